// The differential family: agreement with the high-precision reference within
// the tolerance model, and the comparative rule against a naive peer.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attncheck/builtin_implementations.h"
#include "property_support.h"

namespace attncheck::props {

namespace {
// 1, 3, 10, 30, ... × a power of ten at or above x: notes of nearby cases coincide.
double round_up_half_decade(double x) {
  const double decade = std::pow(10.0, std::floor(std::log10(x)));
  return x <= decade ? decade : x <= 3 * decade ? 3 * decade : 10 * decade;
}
}  // namespace

Outcome check_differential_reference(Implementation& impl, const Case& c, int threads) {
  const Precision precision = impl.precision();
  const Oracle oracle = choose_oracle(c.problem, precision);
  if (unit_roundoff(oracle) > kOracleTrust * unit_roundoff(precision))
    return failed(fmt::format("no oracle precise enough for a {} implementation", to_string(precision)));
  const bool w = impl.capabilities().weights;
  std::vector<double> ref_a;
  const std::vector<double> ref_o = oracle_attention(oracle, c, w ? &ref_a : nullptr);
  const Run r = run_implementation(impl, c, w, threads);
  const ErrorBounds eb = forward_error_bounds(c, {precision});
  const Shape& s = c.problem.shape;
  const std::string judge_name = to_string(oracle) + " reference";
  Outcome o = judge(compare(r.out, ref_o, eb.out), s, s.n_q, s.d_v, "O", judge_name);
  if (o.ok && w) {
    const Comparison cmp = compare(r.weights, ref_a, eb.weights, precision_class(precision).weight_flush_note);
    o = merge(o, judge(cmp, s, s.n_q, s.n_k, "A", judge_name));
    if (cmp.flushed > 0)
      o.notes.push_back(fmt::format("flushes weights below {:.0e} to zero", round_up_half_decade(cmp.largest_flushed)));
  }
  o.oracle = to_string(oracle);
  return inconclusive_unless_failed(std::move(o), eb);
}

Outcome check_differential_naive_ratio(Implementation& impl, const Case& c, int threads) {
  auto naive = make_naive_peer(impl.precision());
  if (!naive) return failed("no naive implementation in " + to_string(impl.precision()));
  const Oracle oracle = choose_oracle(c.problem, impl.precision());
  const std::vector<double> ref = oracle_attention(oracle, c, nullptr);
  const Run r = run_implementation(impl, c, false, threads);
  Run n;
  try {
    n = run_implementation(*naive, c, false, 1);
  } catch (const Unsupported& e) {
    Outcome o;
    o.inconclusive = true;
    o.message = std::string("the naive peer declined the case: ") + e.what();
    return o;
  }
  const ErrorBounds eb = forward_error_bounds(c, {impl.precision()});
  const Shape& s = c.problem.shape;
  // Errors are measured in units of each element's tolerance bound, so that rows
  // of different scales each count at their own scale: the implementation's
  // worst may be at most k× the naive peer's worst, plus a floor of
  // 1/kNaiveFloorDivisor (a naive peer exact by luck must not demand exactness).
  // What rounding each logit and the output twice more than the peer may cost
  // (out_reordering) is left out first: on short rows and large logits a peer
  // that rounded luckily would otherwise fail a correct implementation whose
  // only difference is the order of the same roundings. Rows beyond the
  // first-order model are left out, unless not finite: there the class cannot
  // resolve the logits' differences, either side's weights are luck, and only
  // the convex hull holds (differential_reference checks it). A NaN is never an
  // allowance.
  auto judged = [&](size_t i) { return !eb.inconclusive_row[i / static_cast<size_t>(s.d_v)]; };
  double naive_worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(n.out[i] - ref[i]);
    if (std::isnan(e)) {
      Outcome inc;
      inc.inconclusive = true;
      inc.message = fmt::format("the naive peer returned {} at O{}", n.out[i],
                                index_name(s, s.n_q, s.d_v, static_cast<int64_t>(i)));
      return inc;
    }
    if (e > 0 && judged(i)) naive_worst = std::max(naive_worst, e / eb.out[i]);
  }
  const double allowed_ratio = kNaiveRatio * naive_worst + 1 / kNaiveFloorDivisor;
  Outcome o;
  o.oracle = to_string(oracle);
  o.worst_ratio = 0.0;
  int64_t worst = 0;
  double worst_err = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::isfinite(r.out[i]) ? std::fabs(r.out[i] - ref[i]) : std::numeric_limits<double>::infinity();
    if (!judged(i) && std::isfinite(err)) continue;
    // Underflow the class allows is not measured against the peer's luck.
    const double e = err <= eb.out_underflow[i] ? 0 : std::max(0.0, err - eb.out_reordering[i]);
    const double ratio = e == 0 ? 0 : e / eb.out[i] / allowed_ratio;
    if (ratio > *o.worst_ratio) {
      o.worst_ratio = ratio;
      worst = static_cast<int64_t>(i);
      worst_err = err;
    }
  }
  o.slice_b = worst / (s.n_q * s.d_v) / s.heads;
  o.slice_h = worst / (s.n_q * s.d_v) % s.heads;
  if (*o.worst_ratio > 1) {
    o.ok = false;
    const size_t w = static_cast<size_t>(worst);
    o.message = fmt::format(
        "error {:.3g} at O{}, less the {:.3g} that rounding its logits and output twice more may cost, is {:.3g} "
        "of its bound {:.3g}; allowed {:.3g}: {:g}× the naive {} worst ({:.3g} of its bound) + {:g}",
        worst_err, index_name(s, s.n_q, s.d_v, worst), eb.out_reordering[w],
        (worst_err - eb.out_reordering[w]) / eb.out[w], eb.out[w], allowed_ratio, kNaiveRatio,
        to_string(impl.precision()), naive_worst,
        1 / kNaiveFloorDivisor);
    return o;
  }
  return inconclusive_unless_failed(std::move(o), eb);
}

}  // namespace attncheck::props
