// Tightness and power of the tolerance model (DESIGN.md "Properties"): how
// close correct implementations come to their bound (worst error ÷ bound of
// the fused path and of the naive fp32 composition), and the smallest relative
// perturbation of a correct output that differential_reference catches, per n
// up to 4096. `attncheck verify --power` runs it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attncheck/case.h"
#include "attncheck/implementation.h"

namespace attncheck {

/// The result of a bisection on log ε for the smallest ε a check catches.
struct ThresholdSearch {
  bool caught_at_lo = false;   ///< caught already at the lower end: the threshold is ≤ lo
  bool caught_at_hi = false;   ///< false: never caught in [lo, hi]
  double smallest_caught = 0;  ///< smallest ε seen caught (hi when only hi was; 0 when never caught)
  double largest_missed = 0;   ///< largest ε seen not caught (0 when caught at lo)
  int evaluations = 0;         ///< calls of the check
  double lo = 0, hi = 0;       ///< the range searched
};

/// Evaluates caught(hi) and caught(lo), then bisects [lo, hi] geometrically
/// `steps` times (each step halves log(hi/lo)), assuming caught is monotone in
/// ε: afterwards largest_missed < threshold ≤ smallest_caught and their ratio
/// is (hi/lo)^(1/2^steps). Requires 0 < lo < hi.
ThresholdSearch find_threshold(const std::function<bool(double)>& caught, double lo, double hi, int steps);

/// An implementation returning a base implementation's O·(1 + ε), element by
/// element (the product taken in double, then rounded to float), and no
/// weights. It caches the base output of the last case, so a bisection runs
/// the base once per case.
class RelativePerturbation : public Implementation {
 public:
  explicit RelativePerturbation(std::unique_ptr<Implementation> base, double epsilon = 0);
  void set_epsilon(double epsilon) { epsilon_ = epsilon; }
  double epsilon() const { return epsilon_; }
  std::string name() const override;
  Capabilities capabilities() const override;
  Precision precision() const override { return base_->precision(); }
  void forward(const Problem& problem, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::span<float> out, std::span<float> weights, int threads) override;

 private:
  std::unique_ptr<Implementation> base_;
  double epsilon_;
  std::optional<Case> cached_case_;
  std::vector<float> cached_out_;
};

struct PowerRow;

/// One configuration: n, the input distribution, the mask.
struct PowerConfig {
  int64_t n = 16;
  std::string input = "uniform";  ///< "uniform": U[-1, 1]; "normal": N(0, 1)
  std::string mask = "none";      ///< "none" or "causal" (causal, top-left aligned)
};

struct PowerOptions {
  std::vector<int64_t> sizes = {16, 64, 256, 1024, 4096};
  std::vector<std::string> inputs = {"uniform", "normal", "positive_v"};
  std::vector<std::string> masks = {"none", "causal"};
  int64_t d = 64;
  /// For n above this, only `sampled_queries` query rows of the n×n problem
  /// are computed (evenly spaced: rows n/m − 1, 2n/m − 1, …, n − 1), against
  /// all n keys; under the causal mask each keeps its row of the n×n causal
  /// mask (an explicit mask). Keeps the long double oracle to seconds.
  int64_t subsample_above = 1024;
  int64_t sampled_queries = 256;
  double epsilon_lo = 1e-8, epsilon_hi = 1e-1;
  int steps = 12;
  int threads = 1;
  /// The implementations measured; the first is also the perturbed one.
  std::vector<std::string> implementations = {"fused", "naive-fp32"};
  /// Called with each row as soon as it is measured.
  std::function<void(const PowerRow&)> on_row;
};

/// One implementation's tightness on one configuration.
struct Tightness {
  std::string implementation;
  std::optional<double> error_over_bound;  ///< worst |O − reference| ÷ bound, from differential_reference
  double max_abs_error = 0;                ///< worst |O − reference|
  std::string verdict;                     ///< "PASSED", "FAILED", "INCONCLUSIVE" or "DECLINED"
  std::string message;                     ///< the check's message, if any
};

struct PowerRow {
  PowerConfig config;
  int64_t n_q = 0, n_k = 0;
  std::string query_rows;  ///< which rows of the n×n problem were computed
  std::string oracle;
  std::vector<Tightness> tightness;  ///< one per PowerOptions::implementations
  std::string perturbed;             ///< the implementation whose O·(1 + ε) is searched
  ThresholdSearch power;             ///< its evaluations are of the direct comparison
  std::string power_method;          ///< how the threshold was found and confirmed
  int property_checks = 0;           ///< differential_reference calls of the search and its confirmation
  double seconds = 0;
};

/// The case of a configuration: inputs drawn from a generator seeded by n and
/// the input distribution (so both masks see the same Q, K, V).
Case power_case(const PowerConfig& config, const PowerOptions& options);

/// Measures every (n, input, mask) of `options`.
std::vector<PowerRow> measure_power(const PowerOptions& options);

/// The power JSON version power_json writes (docs/report-schema.md).
inline constexpr int kPowerJsonVersion = 1;

/// The JSON: {"power_json_version", "settings", "context", "rows": [...],
/// "error_vs_n": [...]}; error_vs_n rows carry the
/// fields of verify's error_vs_n (n, d, mask, max_abs_error, error_over_bound,
/// oracle) plus implementation, input, n_q, n_k, verdict and
/// smallest_epsilon_caught. The context is verify's (run_context: CPU, cores,
/// load, compiler, flags, SIMD target, date) taken now, plus load_avg_start
/// from `context_at_start` when given (run_context before measuring).
nlohmann::json power_json(const std::vector<PowerRow>& rows, const PowerOptions& options,
                          const nlohmann::json& context_at_start = nullptr);

/// The table: one line per row (n, n_q×n_k, input, mask, error ÷ bound of each
/// implementation, smallest ε caught, seconds).
std::string format_power_header(const PowerOptions& options);
std::string format_power_row(const PowerRow& row);

/// Measures `options`, printing the table as rows are measured, and writes
/// the JSON to `json_path` unless it is empty (opened first, so an unwritable
/// path fails before minutes of measuring). Returns the rows. `attncheck run`
/// calls it with its own sizes.
std::vector<PowerRow> run_power(const PowerOptions& options, const std::string& json_path);

/// `attncheck verify --power`: run_power with the default options and `threads`.
/// Returns the exit status (0).
int run_power_command(const std::string& json_path, int threads);

}  // namespace attncheck
