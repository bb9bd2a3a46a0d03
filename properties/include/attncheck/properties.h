// The properties every correct attention satisfies, each a function of an
// implementation and a case. Each is phrased on outputs (so it checks an
// implementation that exposes only O) and, where the implementation exposes
// weights, also checks them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/case.h"
#include "attncheck/generators.h"
#include "attncheck/implementation.h"

namespace attncheck {

/// The verdict on one case. At most one of discard, inconclusive and
/// unsupported is set; a case with any of them set is neither a pass nor a failure.
struct Outcome {
  bool ok = true;
  bool discard = false;               ///< the case does not exercise the property
  /// The tolerance model cannot judge the case (first-order model does not hold,
  /// or a value leaves the class's range): counted and shown, never a pass.
  bool inconclusive = false;
  /// The implementation declined (Unsupported or InvalidInput) a case that is
  /// out of range for its precision class: accepted, counted and shown.
  bool unsupported = false;
  std::string message;                ///< why it failed (or was discarded, inconclusive, unsupported)
  /// Deviations worth a note that are not failures, e.g. "flushes weights below
  /// 1.7e-38 to zero"; collected per property.
  std::vector<std::string> notes;
  std::optional<double> worst_ratio;  ///< worst error / bound, where there is a bound
  std::string oracle;                 ///< the reference that judged it, if any
  int64_t slice_b = 0, slice_h = 0;   ///< the slice where it failed
  /// When the property sent forward() something other than the case itself
  /// (input_validation's bad input): what it sent, e.g. "Q[3] = nan on b1h1q2k2d1".
  std::string sent;
};

struct Property {
  std::string name;
  std::string sentence;  ///< the invariant, as a sentence
  /// The generator constraints, given the implementation's capabilities.
  std::function<CaseRequest(const Capabilities&)> request;
  /// Why the property cannot run against this implementation; empty when it can.
  std::function<std::string(const Capabilities&, Precision)> skip_reason;
  /// Checks one case; `threads` is the thread hint passed to forward().
  std::function<Outcome(Implementation&, const Case&, int threads)> check;
  bool has_bound = true;  ///< reports a worst error / bound
};

/// Every property, in the order verify runs them.
const std::vector<Property>& all_properties();
/// The property named `name`, or null.
const Property* find_property(const std::string& name);

/// The multiplier k of the naive-ratio rule: error ≤ k × naive error + floor.
inline constexpr double kNaiveRatio = 4.0;
/// The floor of the naive-ratio rule is the tolerance bound divided by this.
inline constexpr double kNaiveFloorDivisor = 8.0;

/// Runs forward() into a buffer pre-filled with NaN and followed by guard
/// values. Fails (InvalidInput is passed through) when a guard is overwritten.
struct Run {
  std::vector<float> out, weights;
};
Run run_implementation(Implementation& impl, const Case& c, bool want_weights, int threads);

}  // namespace attncheck
