// Private to attncheck::properties: the helpers the property checks share and
// the check functions of each property family (properties_<family>.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attncheck/case.h"
#include "attncheck/implementation.h"
#include "attncheck/properties.h"
#include "attncheck/tolerance.h"

namespace attncheck::props {

inline constexpr size_t kGuard = 16;
inline constexpr float kGuardValue = -1234.5f;
inline const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// The case's own random stream, seeded by its "aux" label.
std::mt19937_64 aux_rng(const Case& c);
Outcome failed(std::string message, int64_t b = 0, int64_t h = 0);
Outcome discarded(std::string why);
double u_of(const Implementation& impl);
/// Turns a comparison into an outcome; `what` names the tensor compared.
Outcome judge(const Comparison& cmp, const Shape& s, int64_t rows, int64_t cols, const std::string& what,
              const std::string& expected_name);
Outcome merge(Outcome a, const Outcome& b);
/// A passing outcome becomes INCONCLUSIVE when the bounds it was judged by
/// have rows beyond the first-order model (they were held only to the hull).
Outcome inconclusive_unless_failed(Outcome o, const ErrorBounds& eb);
Outcome inconclusive_unless_failed(Outcome o, const ErrorBounds& a, const ErrorBounds& b);
Outcome inconclusive_unless_failed(Outcome o, const ErrorBounds& a, const ErrorBounds& b, const ErrorBounds& c);
std::vector<double> sum(const std::vector<double>& a, const std::vector<double>& b, double wb = 1.0);
std::vector<double> to_double(const std::vector<float>& x);
int64_t row_count(const Shape& s);
bool slice_row_empty(const Problem& p, int64_t b, int64_t h, int64_t i);
/// Exact equality of selected rows of two outputs (NaN never equal).
Outcome rows_identical(const std::vector<float>& a, const std::vector<float>& b, const Shape& s,
                       int64_t cols, const std::function<bool(int64_t, int64_t, int64_t)>& row_selected,
                       const std::string& what);
/// The largest magnitude a float input may take in `precision`'s class.
double class_largest_input(Precision precision);
/// Runs a case a property derived from the generated case `original` (huge
/// masked keys, shifted keys, another τ). When the implementation declines it
/// (Unsupported or InvalidInput) and it is beyond the class's range while
/// `original` is not, returns nullopt and sets `declined` to an unsupported
/// outcome saying why; otherwise the decline propagates (verify judges it
/// against `original`: a failure inside the range, unsupported beyond it).
std::optional<Run> run_derived(Implementation& impl, const Case& original, const Case& derived,
                               bool want_weights, int threads, Outcome& declined);
/// True when `derived` is beyond the class's range while `original` is not
/// (out_of_class_range, after a cheap test that most cases pass).
bool leaves_class(const Case& original, const Case& derived, Precision precision);
/// One (b, h) slice as a problem of its own.
Case slice_case(const Case& c, int64_t b, int64_t h);

// properties_structure.cpp
Outcome check_shape(Implementation& impl, const Case& c, int threads);
Outcome check_row_sum(Implementation& impl, const Case& c, int threads);
Outcome check_nonnegative(Implementation& impl, const Case& c, int threads);
Outcome check_empty_row_policy(Implementation& impl, const Case& c, int threads);
Outcome check_input_validation(Implementation& impl, const Case& c, int threads);

// properties_masks.cpp
Outcome check_mask_zero(Implementation& impl, const Case& c, int threads);
Outcome check_causal_prefix(Implementation& impl, const Case& c, int threads);

// properties_invariance.cpp
Outcome check_shift_invariance(Implementation& impl, const Case& c, int threads);
Outcome check_query_permutation(Implementation& impl, const Case& c, int threads);
Outcome check_key_value_permutation(Implementation& impl, const Case& c, int threads);
Outcome check_value_linearity(Implementation& impl, const Case& c, int threads);
Outcome check_batch_head_independence(Implementation& impl, const Case& c, int threads);
Outcome check_thread_determinism(Implementation& impl, const Case& c, int threads);
Outcome check_convex_hull(Implementation& impl, const Case& c, int threads);

// properties_temperature.cpp
Outcome check_temperature_zero_limit(Implementation& impl, const Case& c, int threads);
Outcome check_temperature_infinite_limit(Implementation& impl, const Case& c, int threads);
Outcome check_temperature_monotone(Implementation& impl, const Case& c, int threads);

// properties_differential.cpp
Outcome check_differential_reference(Implementation& impl, const Case& c, int threads);
Outcome check_differential_naive_ratio(Implementation& impl, const Case& c, int threads);

}  // namespace attncheck::props
