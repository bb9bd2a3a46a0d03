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

Outcome check_shift_invariance(Implementation& impl, const Case& c, int threads) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  auto rng = aux_rng(c);
  // A shift vector whose largest row shift is 0.5, 50, 200 or 2000 logits: past
  // exp's overflow for a softmax without max subtraction. Narrow classes round
  // the shifted keys to the class, so a shift of L logits costs ~2u·L of logit
  // error: shifts up to resolvable_logit (fp16 ≈ 102, past its exp's overflow
  // at 11; bf16 12.8), and 2000 in one case of 16 (inconclusive, mostly).
  double target;
  if (narrower_than_float(impl.precision())) {
    const double r = resolvable_logit(impl.precision());
    const double narrow_targets[] = {0.5, 0.5, 0.5, r / 8, r / 8, r / 8, r / 8, r / 4, r / 4, r / 4, r / 4,
                                     r / 2, r / 2, r / 2, r / 2, 2000};
    target = narrow_targets[rng() % 16];
  } else {
    const double targets[] = {0.5, 50, 200, 2000};
    target = targets[rng() % 4];
  }
  std::uniform_real_distribution<double> unit(-1, 1);
  std::vector<double> w(static_cast<size_t>(s.d_k));
  for (double& x : w) x = unit(rng);
  double largest = 0;
  for (int64_t row = 0; row < row_count(s); ++row) {
    double dot = 0;
    for (int64_t t = 0; t < s.d_k; ++t) dot += c.q[static_cast<size_t>(row * s.d_k + t)] * w[static_cast<size_t>(t)];
    largest = std::max(largest, std::fabs(dot * p.logit_multiplier()));
  }
  if (largest == 0) return discarded("Q is zero: no shift changes the logits");
  // Tiny queries would need a shift past float's range; cap it (the logits then move less).
  double factor = std::min(target / largest, 1e6);
  auto shift = [&](double f) {
    Case moved = c;
    for (size_t x = 0; x < moved.k.size(); ++x)
      moved.k[x] = static_cast<float>(moved.k[x] + w[x % static_cast<size_t>(s.d_k)] * f);
    return moved;
  };
  Case shifted = shift(factor);
  // The shifted keys must stay within the class (fp16: |K| ≤ 65504, logits in
  // range): a smaller shift then, and none when even a tiny one would not fit.
  for (int tries = 0; leaves_class(c, shifted, impl.precision()); ++tries) {
    if (tries == 12) return discarded("no shift of the keys stays within the precision class's range");
    factor /= 4;
    shifted = shift(factor);
  }
  const Run r1 = run_implementation(impl, c, false, threads);
  Outcome declined;
  const std::optional<Run> shifted_run = run_derived(impl, c, shifted, false, threads, declined);
  if (!shifted_run) return declined;
  const Run& r2 = *shifted_run;
  const ErrorBounds b1 = forward_error_bounds(c, {impl.precision()});
  BoundOptions shifted_options{impl.precision()};
  shifted_options.extra_input_roundings = 1;  // K + shift is rounded to float
  const ErrorBounds b2 = forward_error_bounds(shifted, shifted_options);
  return inconclusive_unless_failed(
      judge(compare(r2.out, to_double(r1.out), sum(b1.out, b2.out)), s, s.n_q, s.d_v,
            fmt::format("with every key shifted (row logits moved by up to {:.3g}): O", factor * largest),
            "unshifted"),
      b1, b2);
}

Outcome check_query_permutation(Implementation& impl, const Case& c, int threads) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  if (p.causal != Causal::none) return discarded("causal masks depend on the query position");
  auto rng = aux_rng(c);
  std::vector<int64_t> perm(static_cast<size_t>(s.n_q));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  Case moved = c;
  for (int64_t slice = 0; slice < s.batch * s.heads; ++slice)
    for (int64_t i = 0; i < s.n_q; ++i)
      std::copy_n(c.q.begin() + (slice * s.n_q + perm[static_cast<size_t>(i)]) * s.d_k, s.d_k,
                  moved.q.begin() + (slice * s.n_q + i) * s.d_k);
  if (p.mask) {
    const ExplicitMask& m = *p.mask;
    for (int64_t slice = 0; slice < m.batch * m.heads; ++slice)
      for (int64_t i = 0; i < s.n_q; ++i)
        std::copy_n(m.allowed.begin() + (slice * s.n_q + perm[static_cast<size_t>(i)]) * s.n_k, s.n_k,
                    moved.problem.mask->allowed.begin() + (slice * s.n_q + i) * s.n_k);
  }
  const Run r1 = run_implementation(impl, c, false, threads);
  const Run r2 = run_implementation(impl, moved, false, threads);
  const ErrorBounds b1 = forward_error_bounds(c, {impl.precision()});
  std::vector<double> expected(r2.out.size()), bound(r2.out.size());
  for (int64_t slice = 0; slice < s.batch * s.heads; ++slice)
    for (int64_t i = 0; i < s.n_q; ++i)
      for (int64_t col = 0; col < s.d_v; ++col) {
        const size_t to = static_cast<size_t>((slice * s.n_q + i) * s.d_v + col);
        const size_t from = static_cast<size_t>((slice * s.n_q + perm[static_cast<size_t>(i)]) * s.d_v + col);
        expected[to] = r1.out[from];
        bound[to] = 2 * b1.out[from];
      }
  return inconclusive_unless_failed(judge(compare(r2.out, expected, bound), s, s.n_q, s.d_v, "with queries permuted: O",
               "the permuted original"), b1);
}

Outcome check_key_value_permutation(Implementation& impl, const Case& c, int threads) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  if (p.causal != Causal::none || !p.key_lengths.empty())
    return discarded("causal masks and key lengths depend on the key position");
  auto rng = aux_rng(c);
  std::vector<int64_t> perm(static_cast<size_t>(s.n_k));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  Case moved = c;
  for (int64_t slice = 0; slice < s.batch * s.heads; ++slice)
    for (int64_t j = 0; j < s.n_k; ++j) {
      const int64_t from = slice * s.n_k + perm[static_cast<size_t>(j)], to = slice * s.n_k + j;
      std::copy_n(c.k.begin() + from * s.d_k, s.d_k, moved.k.begin() + to * s.d_k);
      std::copy_n(c.v.begin() + from * s.d_v, s.d_v, moved.v.begin() + to * s.d_v);
    }
  if (p.mask) {
    const ExplicitMask& m = *p.mask;
    for (int64_t row = 0; row < m.batch * m.heads * s.n_q; ++row)
      for (int64_t j = 0; j < s.n_k; ++j)
        moved.problem.mask->allowed[static_cast<size_t>(row * s.n_k + j)] =
            m.allowed[static_cast<size_t>(row * s.n_k + perm[static_cast<size_t>(j)])];
  }
  const bool w = impl.capabilities().weights;
  const Run r1 = run_implementation(impl, c, w, threads);
  const Run r2 = run_implementation(impl, moved, w, threads);
  const ErrorBounds b1 = forward_error_bounds(c, {impl.precision()});
  const ErrorBounds b2 = forward_error_bounds(moved, {impl.precision()});
  Outcome o = judge(compare(r2.out, to_double(r1.out), sum(b1.out, b2.out)), s, s.n_q, s.d_v,
                    "with keys and values permuted together: O", "original");
  if (!o.ok || !w) return inconclusive_unless_failed(std::move(o), b1, b2);
  std::vector<double> expected(r2.weights.size()), bound(r2.weights.size());
  for (int64_t row = 0; row < row_count(s); ++row)
    for (int64_t j = 0; j < s.n_k; ++j) {
      const size_t to = static_cast<size_t>(row * s.n_k + j);
      const size_t from = static_cast<size_t>(row * s.n_k + perm[static_cast<size_t>(j)]);
      expected[to] = r1.weights[from];
      bound[to] = b1.weights[from] + b2.weights[to];
    }
  return inconclusive_unless_failed(merge(o, judge(compare(r2.weights, expected, bound), s, s.n_q, s.n_k,
                        "with keys and values permuted together: A", "the permuted original")), b1, b2);
}

Outcome check_value_linearity(Implementation& impl, const Case& c, int threads) {
  auto rng = aux_rng(c);
  const double alphas[] = {2, 0.5, -1, 3}, betas[] = {1, -1, 0.25, -3};
  const double alpha = alphas[rng() % 4], beta = betas[rng() % 4];
  Case c2 = c, c3 = c;
  std::uniform_int_distribution<int> small(-8, 8);
  for (float& x : c2.v) x = static_cast<float>(small(rng)) * 0.25f;
  for (size_t i = 0; i < c3.v.size(); ++i) c3.v[i] = static_cast<float>(alpha * c.v[i] + beta * c2.v[i]);
  const Run r1 = run_implementation(impl, c, false, threads);
  const Run r2 = run_implementation(impl, c2, false, threads);
  const Run r3 = run_implementation(impl, c3, false, threads);
  const ErrorBounds b1 = forward_error_bounds(c, {impl.precision()}), b2 = forward_error_bounds(c2, {impl.precision()}),
                    b3 = forward_error_bounds(c3, {impl.precision()});
  std::vector<double> expected(r3.out.size()), bound(r3.out.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    expected[i] = alpha * r1.out[i] + beta * r2.out[i];
    // The three bounds, plus the rounding of αV1 + βV2 to float (u·Σ_j a_j|v3_j|).
    bound[i] = b3.out[i] + std::fabs(alpha) * b1.out[i] + std::fabs(beta) * b2.out[i] +
               2 * 0x1p-24 * b3.mixed[i] + 1e-300;
  }
  const Shape& s = c.problem.shape;
  return inconclusive_unless_failed(judge(compare(r3.out, expected, bound), s, s.n_q, s.d_v,
               fmt::format("with V = {:g}·V1 + {:g}·V2: O", alpha, beta), fmt::format("{:g}·O1 + {:g}·O2 =", alpha, beta)), b1, b2, b3);
}

Outcome check_batch_head_independence(Implementation& impl, const Case& c, int threads) {
  const Shape& s = c.problem.shape;
  if (s.batch * s.heads < 2) return discarded("a single slice");
  const Run all = run_implementation(impl, c, false, threads);
  const ErrorBounds eb = forward_error_bounds(c, {impl.precision()});
  Outcome result;
  result.worst_ratio = 0.0;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const Case one = slice_case(c, b, h);
      const Run alone = run_implementation(impl, one, false, threads);
      const size_t first = static_cast<size_t>((b * s.heads + h) * s.n_q * s.d_v);
      const std::vector<float> part(all.out.begin() + static_cast<std::ptrdiff_t>(first),
                                    all.out.begin() + static_cast<std::ptrdiff_t>(first + alone.out.size()));
      std::vector<double> bound(eb.out.begin() + static_cast<std::ptrdiff_t>(first),
                                eb.out.begin() + static_cast<std::ptrdiff_t>(first + alone.out.size()));
      for (double& x : bound) x *= 2;
      Outcome o = judge(compare(part, to_double(alone.out), bound), one.problem.shape, s.n_q, s.d_v,
                        fmt::format("slice (b={}, h={}) computed in the batch: O", b, h), "computed alone");
      o.slice_b = b, o.slice_h = h;
      result = merge(result, o);
      if (!result.ok) return result;
    }
  return inconclusive_unless_failed(std::move(result), eb);
}

Outcome check_thread_determinism(Implementation& impl, const Case& c, int) {
  const Run one = run_implementation(impl, c, false, 1);
  for (int threads : {2, 3, 0}) {
    const Run many = run_implementation(impl, c, false, threads);
    const Shape& s = c.problem.shape;
    for (size_t i = 0; i < one.out.size(); ++i)
      if (std::memcmp(&one.out[i], &many.out[i], sizeof(float)) != 0)
        return failed(fmt::format("O{} is {:.9g} with 1 thread and {:.9g} with {} threads",
                                  index_name(s, s.n_q, s.d_v, static_cast<int64_t>(i)), one.out[i], many.out[i],
                                  threads == 0 ? std::string("all") : std::to_string(threads)));
  }
  return {};
}

Outcome check_convex_hull(Implementation& impl, const Case& c, int threads) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  const Run r = run_implementation(impl, c, false, threads);
  Outcome o;
  o.worst_ratio = 0.0;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.n_q; ++i)
        for (int64_t col = 0; col < s.d_v; ++col) {
          const int64_t slice = b * s.heads + h;
          double lo = std::numeric_limits<double>::infinity(), hi = -lo, vmax = 0;
          for (int64_t j = 0; j < s.n_k; ++j) {
            if (!allowed(p, b, h, i, j)) continue;
            const double x = c.v[static_cast<size_t>((slice * s.n_k + j) * s.d_v + col)];
            lo = std::min(lo, x), hi = std::max(hi, x), vmax = std::max(vmax, std::fabs(x));
          }
          if (lo > hi) lo = hi = 0;  // empty row: zero
          const double tol = hull_tolerance(s.n_k, vmax, impl.precision());
          const double got = r.out[static_cast<size_t>((slice * s.n_q + i) * s.d_v + col)];
          const double excess = std::max(lo - got, got - hi);
          const double ratio = std::isnan(got) ? std::numeric_limits<double>::infinity() : std::max(0.0, excess / tol);
          o.worst_ratio = std::max(*o.worst_ratio, ratio);
          if (ratio > 1)
            return failed(fmt::format("O[{}][{}][{}][{}] = {:.9g} lies outside [{:.9g}, {:.9g}], the range of "
                                      "column {} over the readable V rows, by {:.3g} (tolerance {:.3g})",
                                      b, h, i, col, got, lo, hi, col, excess, tol),
                          b, h);
        }
  return o;
}

}  // namespace attncheck::props
