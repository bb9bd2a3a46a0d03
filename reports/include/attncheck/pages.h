// Self-contained HTML pages (inline CSS, JavaScript and data; they open from
// disk): the chapter's lab (`attncheck lab`) and the page of one case file
// (`attncheck explain --html`, and one beside each failure `attncheck verify`
// records). Every number on them is computed here, by the multiprecision
// reference, when the page is written; the pages only look values up.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "attncheck/case.h"

namespace attncheck {

class Implementation;

// ---- the chapter's lab (DESIGN.md "The chapter's lab", docs/lab.md) ----

/// The lab's fixed token sequence: 模型 根据 上下文 分配 权重.
const std::vector<std::string>& lab_tokens();

/// The lab's Q (5×3), K (5×3) and V (5×2) for the five tokens, with the
/// default controls: causal mask (top-left) on, τ = 0.85.
Case lab_case();

/// The state a plain lab.html opens in, and its share-URL fragment
/// "query=3&tau=0.85&causal=1" (query counted from 1).
inline constexpr int kLabDefaultQuery = 3;
inline constexpr const char* kLabDefaultTemperature = "0.85";
inline constexpr bool kLabDefaultCausal = true;

/// The temperature slider's steps as the page labels them: "0.10", "0.15", …, "3.00".
std::vector<std::string> lab_temperature_labels();

/// Every state the lab can show, as embedded in the page: the fixed tables
/// (Q, K, V, R = QKᵀ, S = QKᵀ/√3) and, for each temperature label and mask
/// on/off ("0.85/1"), M, L, A, O, exp(L − row max) and per-row summaries,
/// all from the mp50 reference and formatted to three decimals.
nlohmann::json lab_data();

/// The whole lab page.
std::string lab_page_html();

/// Writes `dir`/lab.html (creating `dir`) and returns its path. Throws
/// InvalidInput naming -o and the directory when it cannot be created or
/// written; a failed write leaves no file behind.
std::string write_lab_page(const std::string& dir);

// ---- the page of one case ----

struct CasePageOptions {
  int64_t batch = 0;   ///< the slice the page opens on
  int64_t head = 0;
  std::string title;   ///< e.g. "case file failures/x.json"
  /// Rows and columns shown per table; larger tables show their top-left
  /// corner and say so (the counts of cells beyond their bound cover all cells).
  int64_t max_rows = 40;
  int64_t max_cols = 40;
  /// Slices embedded besides the requested one, while the shown cells of all
  /// embedded slices stay within this many; the page names the slices left out.
  int64_t max_embedded_cells = 60000;
};

/// The data of a case page: the nine tables of each embedded slice from the
/// reference (mp50 for small cases, long double for large, as the verifier's
/// oracle), and with `impl` its A (when it returns weights) and O beside the
/// reference's, each cell with its error, bound (docs/tolerance.md) and error ÷
/// bound, the cells beyond their bound marked exactly as compare_slice() marks them.
/// Validates the case and the slice first and throws InvalidInput on bad input.
nlohmann::json case_page_data(const Case& c, Implementation* impl, const CasePageOptions& options);

/// The whole case page (see case_page_data).
std::string case_page_html(const Case& c, Implementation* impl, const CasePageOptions& options);

/// Writes `html` to `path` through a temporary file beside it, so that a
/// failure leaves nothing half-written. Throws InvalidInput naming `what`
/// (e.g. "--html") and the path when it cannot be written.
void write_page(const std::string& html, const std::string& path, const std::string& what);

/// The case page's path for a case file: x.json gives x.html.
std::string case_page_path(const std::string& case_file);

/// Writes the case page of a counterexample beside its case file, opening on
/// slice (b, h): what `verify` and `run` set as VerifyOptions::on_case_written.
void write_case_page_beside(const std::string& case_file, const Case& c, Implementation& impl, int64_t b, int64_t h);

}  // namespace attncheck
