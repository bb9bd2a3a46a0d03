// The tolerance model (docs/tolerance.md): a per-element forward error bound
// for attention computed in a given precision, and comparisons that report
// their worst error as a fraction of that bound.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attncheck/case.h"
#include "attncheck/implementation.h"

namespace attncheck {

/// Multiplies the first-order bound; covers second-order terms, exp evaluated
/// to a few ulps, and the rescaling steps of an online softmax.
inline constexpr double kSafetyFactor = 4.0;
/// Smallest normal float: products and weights below it may flush to zero.
inline constexpr double kFloatTiny = 0x1p-126;
/// An oracle is trusted when its own bound is below this fraction of the
/// implementation's bound.
inline constexpr double kOracleTrust = 1e-3;

struct BoundOptions {
  /// Unit roundoff of the arithmetic being bounded (unit_roundoff(precision)).
  double u = 0x1p-24;
  /// Roundings to float of each logit's inputs before the call, e.g. 1 when K
  /// was shifted (K + c is itself rounded); counted with float's unit roundoff.
  int extra_input_roundings = 0;
  /// Q and K hold small integers, so every dot product is exact; only the
  /// scale and temperature multiplications round.
  bool exact_dot_products = false;
};

/// Per-element bounds for one case, plus the quantities they are built from.
/// All vectors are in the layout of problem.h.
struct ErrorBounds {
  std::vector<double> out;          ///< bound on |O - O_exact|, [b][h][n_q][d_v]
  std::vector<double> weights;      ///< bound on |A - A_exact|, [b][h][n_q][n_k]
  std::vector<double> a;            ///< A in long double, rounded to double
  std::vector<double> o;            ///< O in long double, rounded to double
  std::vector<double> mixed;        ///< Σ_j a_ij·|v_jc|, [b][h][n_q][d_v]
  std::vector<double> logit_range;  ///< max − min allowed logit, [b][h][n_q]
  std::vector<char> empty_row;      ///< 1 where every key is masked, [b][h][n_q]
};

/// The bound of docs/tolerance.md for every element of O and A. Takes a valid
/// case (validate() it first). Output elements are also allowed the rounding of
/// the result to float (u_fp32·|O|), since every implementation writes float.
ErrorBounds forward_error_bounds(const Case& c, const BoundOptions& options);

/// Worst element of a comparison, as a fraction of its bound.
struct Comparison {
  bool ok = true;
  double worst_ratio = 0;  ///< max |got − expected| / bound; +inf for NaN or a zero bound exceeded
  int64_t worst_index = -1;
  double got = 0, expected = 0, error = 0, bound = 0;
};

/// Compares element by element; NaN or infinity in `got` always fails.
Comparison compare(std::span<const float> got, std::span<const double> expected,
                   std::span<const double> bound);

/// "[b][h][row][col]" for a flat index into a [batch][heads][rows][cols] tensor.
std::string index_name(const Shape& s, int64_t rows, int64_t cols, int64_t flat);

/// Which reference judges a case: mp50 for small problems, long double for
/// large ones where 50 digits would be too slow (its own error is then still
/// ≤ kOracleTrust of the bound); mp100 for implementations that are themselves
/// multiprecision, mp50 for extended ones.
enum class Oracle { long_double, mp50, mp100 };
Oracle choose_oracle(const Problem& p, Precision implementation_precision);
std::string to_string(Oracle o);
double unit_roundoff(Oracle o);

/// The oracle's O (and A when `weights` is not null) rounded to double.
std::vector<double> oracle_attention(Oracle o, const Case& c, std::vector<double>* weights);

/// Problems up to this many multiply-adds (b·h·n_q·n_k·(d_k+d_v)) use mp50.
inline constexpr int64_t kMultiprecisionWork = 60000;

}  // namespace attncheck
