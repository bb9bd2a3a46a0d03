#include "property_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "attncheck/generators.h"
#include "attncheck/tolerance.h"

namespace attncheck::props {

namespace {

// The limit of O as τ → 0 (mean of the V rows tied for the largest logit) or
// τ → ∞ (mean of every readable V row), computed exactly from integer logits.
std::vector<double> limit_output(const Case& c, bool zero_limit) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  std::vector<double> out(static_cast<size_t>(s.out_size()), 0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t slice = b * s.heads + h;
      for (int64_t i = 0; i < s.n_q; ++i) {
        std::vector<long double> dots(static_cast<size_t>(s.n_k));
        long double best = -std::numeric_limits<long double>::infinity();
        for (int64_t j = 0; j < s.n_k; ++j) {
          long double d = 0;
          for (int64_t t = 0; t < s.d_k; ++t)
            d += static_cast<long double>(c.q[static_cast<size_t>((slice * s.n_q + i) * s.d_k + t)]) *
                 c.k[static_cast<size_t>((slice * s.n_k + j) * s.d_k + t)];
          dots[static_cast<size_t>(j)] = d;
          if (allowed(p, b, h, i, j)) best = std::max(best, d);
        }
        std::vector<int64_t> chosen;
        for (int64_t j = 0; j < s.n_k; ++j)
          if (allowed(p, b, h, i, j) && (!zero_limit || dots[static_cast<size_t>(j)] == best)) chosen.push_back(j);
        for (int64_t col = 0; col < s.d_v; ++col) {
          long double acc = 0;
          for (int64_t j : chosen) acc += c.v[static_cast<size_t>((slice * s.n_k + j) * s.d_v + col)];
          out[static_cast<size_t>((slice * s.n_q + i) * s.d_v + col)] =
              chosen.empty() ? 0.0 : static_cast<double>(acc / static_cast<long double>(chosen.size()));
        }
      }
    }
  return out;
}

// Row entropies of the weights, read from O with V = identity (d_v = n_k) so
// that implementations exposing only O are checked too; also their tolerance.
struct Entropies {
  std::vector<double> h, tolerance;
  std::string inconclusive_reason;  // rows beyond the first-order model
};

Entropies row_entropies(Implementation& impl, const Case& c0, double tau, int threads) {
  Case c = c0;
  Shape& s = c.problem.shape;
  c.problem.temperature = tau;
  s.d_v = s.n_k;
  c.v.assign(static_cast<size_t>(s.v_size()), 0.0f);
  for (int64_t slice = 0; slice < s.batch * s.heads; ++slice)
    for (int64_t j = 0; j < s.n_k; ++j) c.v[static_cast<size_t>((slice * s.n_k + j) * s.n_k + j)] = 1.0f;
  const Run r = run_implementation(impl, c, false, threads);
  const ErrorBounds eb = forward_error_bounds(c, {impl.precision()});
  Entropies e;
  for (int64_t row = 0; row < row_count(s); ++row) {
    double h = 0, tol = 0;
    for (int64_t j = 0; j < s.n_k; ++j) {
      const size_t idx = static_cast<size_t>(row * s.n_k + j);
      const double a = r.out[idx], d = eb.out[idx];
      if (a > 0) h -= a * std::log(a);
      if (std::isnan(a)) h = std::numeric_limits<double>::quiet_NaN();
      // |d(a ln a)| ≤ d·(1 + |ln a|), and at most d·|ln d| near zero.
      tol += d * (1 + std::fabs(std::log(std::max({std::fabs(a), d, 1e-300}))));
    }
    e.h.push_back(h);
    e.tolerance.push_back(tol);
  }
  e.inconclusive_reason = eb.inconclusive_reason;
  return e;
}

}  // namespace

Outcome check_temperature_zero_limit(Implementation& impl, const Case& c0, int threads) {
  Case c = c0;
  // Q and K are integers, so distinct dot products differ by at least 1; with
  // τ = scale/gap distinct logits are at least gap apart: 100 (exp(-100) ≈ 4e-44)
  // for float and wider, 20 (exp(-20) ≈ 2e-9) for narrow classes, whose input
  // rounding grows with the logits (zero_limit_logit_gap).
  const double gap = zero_limit_logit_gap(impl.precision());
  const double residual = gap == 100.0 ? 4e-44 : 1.01 * std::exp(-gap);  // a bound on exp(-gap)
  c.problem.temperature = c.problem.effective_scale() / gap;
  Outcome declined;
  const std::optional<Run> run = run_derived(impl, c0, c, false, threads, declined);
  if (!run) return declined;
  const Run& r = *run;
  BoundOptions options{impl.precision()};
  options.exact_dot_products = true;
  const ErrorBounds eb = forward_error_bounds(c, options);
  std::vector<double> bound = eb.out;
  const Shape& s = c.problem.shape;
  // Every non-tied key keeps a weight of at most exp(-gap) (×2 for the logits'
  // errors): its V row moves the output by up to that times |v_jc|, which
  // matters where exp(-gap) is only 2e-9 and V is large beside the output.
  std::vector<double> column_sum(static_cast<size_t>(s.batch * s.heads * s.d_v), 0.0);
  for (int64_t slice = 0; slice < s.batch * s.heads; ++slice)
    for (int64_t j = 0; j < s.n_k; ++j)
      for (int64_t col = 0; col < s.d_v; ++col)
        column_sum[static_cast<size_t>(slice * s.d_v + col)] +=
            std::fabs(c.v[static_cast<size_t>((slice * s.n_k + j) * s.d_v + col)]);
  for (size_t i = 0; i < bound.size(); ++i) {
    const size_t slice = i / static_cast<size_t>(s.n_q * s.d_v), col = i % static_cast<size_t>(s.d_v);
    bound[i] += residual * 2 *
                (static_cast<double>(s.n_k) * (1 + std::fabs(eb.mixed[i])) + column_sum[slice * s.d_v + col]);
  }
  return inconclusive_unless_failed(judge(compare(r.out, limit_output(c, true), bound), s, s.n_q, s.d_v,
                                          fmt::format("at τ = {:.3g} (τ → 0): O", c.problem.temperature),
                                          "the mean of the V rows tied for the largest logit,"),
                                    eb);
}

Outcome check_temperature_infinite_limit(Implementation& impl, const Case& c0, int threads) {
  Case c = c0;
  const Shape& s = c.problem.shape;
  // τ so large that every logit is below 1e-7: the weights are uniform to ~1e-7.
  double largest = 0;
  for (int64_t row = 0; row < row_count(s); ++row)
    for (int64_t j = 0; j < s.n_k; ++j) {
      const int64_t slice = row / s.n_q;
      double d = 0;
      for (int64_t t = 0; t < s.d_k; ++t)
        d += std::fabs(static_cast<double>(c.q[static_cast<size_t>(row * s.d_k + t)]) *
                       c.k[static_cast<size_t>((slice * s.n_k + j) * s.d_k + t)]);
      largest = std::max(largest, d * c.problem.effective_scale());
    }
  // Capped so that scale/τ stays a normal float (a fused kernel folds them into
  // one float multiplier): logits near the float maximum cannot be flattened.
  c.problem.temperature = std::min(1e7 * std::max(1.0, largest), c.problem.effective_scale() * 0x1p100);
  const double spread = 2 * largest / c.problem.temperature;  // ≤ 2e-7 unless capped
  if (spread > 1e-3)
    return discarded(fmt::format("logits up to {:.3g} cannot be flattened by a τ whose scale/τ is a normal float",
                                 largest));
  const Run r = run_implementation(impl, c, false, threads);
  const ErrorBounds eb = forward_error_bounds(c, {impl.precision()});
  std::vector<double> bound = eb.out;
  for (size_t i = 0; i < bound.size(); ++i) bound[i] += 2 * spread * eb.mixed[i] + 1e-300;
  return inconclusive_unless_failed(judge(compare(r.out, limit_output(c, false), bound), s, s.n_q, s.d_v,
                                          fmt::format("at τ = {:.3g} (τ → ∞): O", c.problem.temperature),
                                          "the mean of the readable V rows,"),
                                    eb);
}

Outcome check_temperature_monotone(Implementation& impl, const Case& c, int threads) {
  const Capabilities caps = impl.capabilities();
  const Shape& s = c.problem.shape;
  if (!caps.dv_ne_dk && s.n_k != s.d_k) return discarded("reading weights through V = I needs d_v = n_k");
  auto rng = aux_rng(c);
  const double tau1 = c.problem.temperature;
  const double tau2 = tau1 * (1.25 + static_cast<double>(rng() % 16) / 2);
  const Entropies e1 = row_entropies(impl, c, tau1, threads);
  const Entropies e2 = row_entropies(impl, c, tau2, threads);
  Outcome o;
  o.worst_ratio = 0.0;
  for (size_t row = 0; row < e1.h.size(); ++row) {
    const double excess = e1.h[row] - e2.h[row];
    const double tol = e1.tolerance[row] + e2.tolerance[row] + 1e-300;
    const double ratio = std::isnan(excess) ? std::numeric_limits<double>::infinity() : std::max(0.0, excess / tol);
    o.worst_ratio = std::max(*o.worst_ratio, ratio);
    if (ratio > 1) {
      const int64_t r = static_cast<int64_t>(row);
      return failed(fmt::format("row [{}][{}][{}]: entropy {:.9g} at τ = {:.4g} exceeds entropy {:.9g} at "
                                "τ = {:.4g} by {:.3g} (tolerance {:.3g})",
                                r / s.n_q / s.heads, r / s.n_q % s.heads, r % s.n_q, e1.h[row], tau1, e2.h[row],
                                tau2, excess, tol),
                    r / s.n_q / s.heads, r / s.n_q % s.heads);
    }
  }
  const std::string& reason = e1.inconclusive_reason.empty() ? e2.inconclusive_reason : e1.inconclusive_reason;
  if (!reason.empty()) {
    o.inconclusive = true;
    o.message = reason;
  }
  return o;
}

}  // namespace attncheck::props
