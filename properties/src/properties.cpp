#include "attncheck/properties.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "attncheck/builtin_implementations.h"
#include "attncheck/tolerance.h"

namespace attncheck {

namespace {

constexpr size_t kGuard = 16;
constexpr float kGuardValue = -1234.5f;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

std::mt19937_64 aux_rng(const Case& c) {
  auto it = c.labels.find("aux");
  return std::mt19937_64(it == c.labels.end() ? 0 : std::stoull(it->second));
}

Outcome failed(std::string message, int64_t b = 0, int64_t h = 0) {
  Outcome o;
  o.ok = false;
  o.message = std::move(message);
  o.slice_b = b;
  o.slice_h = h;
  return o;
}

Outcome discarded(std::string why) {
  Outcome o;
  o.discard = true;
  o.message = std::move(why);
  return o;
}

double u_of(const Implementation& impl) { return unit_roundoff(impl.precision()); }

// Turns a comparison into an outcome; `what` names the tensor compared.
Outcome judge(const Comparison& cmp, const Shape& s, int64_t rows, int64_t cols, const std::string& what,
              const std::string& expected_name) {
  Outcome o;
  o.worst_ratio = cmp.worst_ratio;
  if (cmp.worst_index >= 0) {
    const int64_t per_slice = rows * cols;
    o.slice_b = cmp.worst_index / per_slice / s.heads;
    o.slice_h = cmp.worst_index / per_slice % s.heads;
  }
  if (!cmp.ok) {
    o.ok = false;
    o.message = fmt::format("{}{} = {:.9g}, {} {:.9g}: error {:.3g} exceeds its bound {:.3g} ({:.3g}× the bound)",
                            what, index_name(s, rows, cols, cmp.worst_index), cmp.got, expected_name,
                            cmp.expected, cmp.error, cmp.bound, cmp.worst_ratio);
  }
  return o;
}

Outcome merge(Outcome a, const Outcome& b) {
  if (!a.ok) return a;
  if (!b.ok) return b;
  if (b.worst_ratio && (!a.worst_ratio || *b.worst_ratio > *a.worst_ratio)) a.worst_ratio = b.worst_ratio;
  if (a.oracle.empty()) a.oracle = b.oracle;
  return a;
}

std::vector<double> sum(const std::vector<double>& a, const std::vector<double>& b, double wb = 1.0) {
  std::vector<double> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = a[i] + wb * b[i];
  return r;
}

std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

int64_t row_count(const Shape& s) { return s.batch * s.heads * s.n_q; }

bool slice_row_empty(const Problem& p, int64_t b, int64_t h, int64_t i) {
  for (int64_t j = 0; j < p.shape.n_k; ++j)
    if (allowed(p, b, h, i, j)) return false;
  return true;
}

// Exact equality of selected rows of two outputs (NaN never equal).
Outcome rows_identical(const std::vector<float>& a, const std::vector<float>& b, const Shape& s,
                       int64_t cols, const std::function<bool(int64_t, int64_t, int64_t)>& row_selected,
                       const std::string& what) {
  int64_t compared = 0;
  for (int64_t b_ = 0; b_ < s.batch; ++b_)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.n_q; ++i) {
        if (!row_selected(b_, h, i)) continue;
        ++compared;
        for (int64_t c = 0; c < cols; ++c) {
          const size_t idx = static_cast<size_t>(((b_ * s.heads + h) * s.n_q + i) * cols + c);
          if (!(a[idx] == b[idx]))
            return failed(fmt::format("{}[{}][{}][{}][{}] changed from {:.9g} to {:.9g}", what, b_, h, i, c,
                                      a[idx], b[idx]),
                          b_, h);
        }
      }
  if (compared == 0) return discarded("no row to compare");
  Outcome o;
  o.worst_ratio = 0.0;
  return o;
}

// ---------------------------------------------------------------- properties

Outcome check_shape(Implementation& impl, const Case& c, int threads) {
  const bool w = impl.capabilities().weights;
  const Run r = run_implementation(impl, c, w, threads);
  const Shape& s = c.problem.shape;
  for (size_t i = 0; i < r.out.size(); ++i)
    if (!std::isfinite(r.out[i]))
      return failed(fmt::format("O{} is {} (NaN means it was never written)",
                                index_name(s, s.n_q, s.d_v, static_cast<int64_t>(i)), r.out[i]));
  for (size_t i = 0; i < r.weights.size(); ++i)
    if (!std::isfinite(r.weights[i]))
      return failed(fmt::format("A{} is {}", index_name(s, s.n_q, s.n_k, static_cast<int64_t>(i)), r.weights[i]));
  return {};
}

Outcome check_row_sum(Implementation& impl, const Case& c0, int threads) {
  Case c = c0;
  const Shape& s = c.problem.shape;
  for (int64_t j = 0; j < s.batch * s.heads * s.n_k; ++j) c.v[static_cast<size_t>(j * s.d_v)] = 1.0f;
  const bool w = impl.capabilities().weights;
  const Run r = run_implementation(impl, c, w, threads);
  const ErrorBounds eb = forward_error_bounds(c, {u_of(impl)});
  // Column 0 of O must be 1 on every row that reads a key (0 on empty rows).
  std::vector<float> got;
  std::vector<double> expected, bound;
  for (int64_t row = 0; row < row_count(s); ++row) {
    const size_t idx = static_cast<size_t>(row * s.d_v);
    got.push_back(r.out[idx]);
    expected.push_back(eb.empty_row[static_cast<size_t>(row)] ? 0.0 : 1.0);
    bound.push_back(eb.out[idx]);
  }
  Outcome o = judge(compare(got, expected, bound), s, s.n_q, 1, "O (V column 0 all ones) ", "expected");
  if (!o.ok || !w) return o;
  got.clear(), expected.clear(), bound.clear();
  for (int64_t row = 0; row < row_count(s); ++row) {
    double total = 0, b = 0;
    for (int64_t j = 0; j < s.n_k; ++j) {
      const size_t idx = static_cast<size_t>(row * s.n_k + j);
      total += r.weights[idx];
      b += eb.weights[idx];
    }
    got.push_back(static_cast<float>(total));
    expected.push_back(eb.empty_row[static_cast<size_t>(row)] ? 0.0 : 1.0);
    bound.push_back(b + 0x1p-24 * static_cast<double>(s.n_k));
  }
  return merge(o, judge(compare(got, expected, bound), s, s.n_q, 1, "sum of weights of row ", "expected"));
}

Outcome check_nonnegative(Implementation& impl, const Case& c0, int threads) {
  Case c = c0;
  for (float& x : c.v) x = std::fabs(x);
  const bool w = impl.capabilities().weights;
  const Run r = run_implementation(impl, c, w, threads);
  const Shape& s = c.problem.shape;
  for (size_t i = 0; i < r.out.size(); ++i)
    if (!(r.out[i] >= 0))
      return failed(fmt::format("O{} = {:.9g} with every V >= 0",
                                index_name(s, s.n_q, s.d_v, static_cast<int64_t>(i)), r.out[i]));
  for (size_t i = 0; i < r.weights.size(); ++i)
    if (!(r.weights[i] >= 0))
      return failed(fmt::format("A{} = {:.9g} is negative", index_name(s, s.n_q, s.n_k, static_cast<int64_t>(i)),
                                r.weights[i]));
  return {};
}

Outcome check_mask_zero(Implementation& impl, const Case& c, int threads) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  auto rng = aux_rng(c);
  // Per slice, a pivot row; every key it cannot read gets K and V rows of huge values.
  Case changed = c;
  std::vector<std::vector<char>> replaced(static_cast<size_t>(s.batch * s.heads), std::vector<char>(static_cast<size_t>(s.n_k), 0));
  float qmax = 0;
  for (float x : c.q) qmax = std::max(qmax, std::fabs(x));
  const double mult = std::fabs(p.logit_multiplier());
  // Huge, but small enough that a masked key's logit stays finite in float.
  const float kbig = static_cast<float>(std::min(1e30, 1e30 / (qmax * static_cast<double>(s.d_k) * mult + 1)));
  bool any = false;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t slice = b * s.heads + h;
      const int64_t pivot = static_cast<int64_t>(rng() % static_cast<uint64_t>(s.n_q));
      for (int64_t j = 0; j < s.n_k; ++j) {
        if (allowed(p, b, h, pivot, j)) continue;
        any = true;
        replaced[static_cast<size_t>(slice)][static_cast<size_t>(j)] = 1;
        for (int64_t t = 0; t < s.d_k; ++t)
          changed.k[static_cast<size_t>((slice * s.n_k + j) * s.d_k + t)] = (t % 2 ? -kbig : kbig);
        for (int64_t t = 0; t < s.d_v; ++t)
          changed.v[static_cast<size_t>((slice * s.n_k + j) * s.d_v + t)] = (t % 2 ? -1e30f : 1e30f);
      }
    }
  if (!any) return discarded("no masked key");
  const bool w = impl.capabilities().weights;
  const Run r1 = run_implementation(impl, c, w, threads);
  const Run r2 = run_implementation(impl, changed, w, threads);
  for (size_t idx = 0; idx < r1.weights.size(); ++idx) {
    const int64_t j = static_cast<int64_t>(idx) % s.n_k, i = static_cast<int64_t>(idx) / s.n_k % s.n_q;
    const int64_t slice = static_cast<int64_t>(idx) / (s.n_k * s.n_q);
    if (!allowed(p, slice / s.heads, slice % s.heads, i, j) && (r1.weights[idx] != 0 || r2.weights[idx] != 0))
      return failed(fmt::format("masked weight A{} is {:.9g}, not exactly 0",
                                index_name(s, s.n_q, s.n_k, static_cast<int64_t>(idx)),
                                r1.weights[idx] != 0 ? r1.weights[idx] : r2.weights[idx]),
                    slice / s.heads, slice % s.heads);
  }
  auto unaffected = [&](int64_t b, int64_t h, int64_t i) {
    const auto& rep = replaced[static_cast<size_t>(b * s.heads + h)];
    for (int64_t j = 0; j < s.n_k; ++j)
      if (rep[static_cast<size_t>(j)] && allowed(p, b, h, i, j)) return false;
    return true;
  };
  Outcome o = rows_identical(r1.out, r2.out, s, s.d_v, unaffected,
                             "replacing masked keys' K and V rows with ±1e30: O");
  if (o.ok && !o.discard) o.worst_ratio.reset();
  return o;
}

Outcome check_shift_invariance(Implementation& impl, const Case& c, int threads) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  auto rng = aux_rng(c);
  // A shift vector whose largest row shift is 0.5, 50, 200 or 2000 logits: past
  // exp's overflow for a softmax without max subtraction.
  const double targets[] = {0.5, 50, 200, 2000};
  const double target = targets[rng() % 4];
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
  const double factor = std::min(target / largest, 1e6);
  Case shifted = c;
  for (size_t x = 0; x < shifted.k.size(); ++x)
    shifted.k[x] = static_cast<float>(shifted.k[x] + w[x % static_cast<size_t>(s.d_k)] * factor);
  const Run r1 = run_implementation(impl, c, false, threads);
  const Run r2 = run_implementation(impl, shifted, false, threads);
  const ErrorBounds b1 = forward_error_bounds(c, {u_of(impl)});
  BoundOptions shifted_options{u_of(impl)};
  shifted_options.extra_input_roundings = 1;  // K + shift is rounded to float
  const ErrorBounds b2 = forward_error_bounds(shifted, shifted_options);
  return judge(compare(r2.out, to_double(r1.out), sum(b1.out, b2.out)), s, s.n_q, s.d_v,
               fmt::format("with every key shifted (row logits moved by up to {:g}): O", target),
               "unshifted");
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
  const ErrorBounds b1 = forward_error_bounds(c, {u_of(impl)});
  std::vector<double> expected(r2.out.size()), bound(r2.out.size());
  for (int64_t slice = 0; slice < s.batch * s.heads; ++slice)
    for (int64_t i = 0; i < s.n_q; ++i)
      for (int64_t col = 0; col < s.d_v; ++col) {
        const size_t to = static_cast<size_t>((slice * s.n_q + i) * s.d_v + col);
        const size_t from = static_cast<size_t>((slice * s.n_q + perm[static_cast<size_t>(i)]) * s.d_v + col);
        expected[to] = r1.out[from];
        bound[to] = 2 * b1.out[from];
      }
  return judge(compare(r2.out, expected, bound), s, s.n_q, s.d_v, "with queries permuted: O",
               "the permuted original");
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
  const ErrorBounds b1 = forward_error_bounds(c, {u_of(impl)});
  const ErrorBounds b2 = forward_error_bounds(moved, {u_of(impl)});
  Outcome o = judge(compare(r2.out, to_double(r1.out), sum(b1.out, b2.out)), s, s.n_q, s.d_v,
                    "with keys and values permuted together: O", "original");
  if (!o.ok || !w) return o;
  std::vector<double> expected(r2.weights.size()), bound(r2.weights.size());
  for (int64_t row = 0; row < row_count(s); ++row)
    for (int64_t j = 0; j < s.n_k; ++j) {
      const size_t to = static_cast<size_t>(row * s.n_k + j);
      const size_t from = static_cast<size_t>(row * s.n_k + perm[static_cast<size_t>(j)]);
      expected[to] = r1.weights[from];
      bound[to] = b1.weights[from] + b2.weights[to];
    }
  return merge(o, judge(compare(r2.weights, expected, bound), s, s.n_q, s.n_k,
                        "with keys and values permuted together: A", "the permuted original"));
}

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

Outcome check_temperature_zero_limit(Implementation& impl, const Case& c0, int threads) {
  Case c = c0;
  // Q and K are integers, so distinct dot products differ by at least 1; with
  // τ = scale/100 distinct logits are at least 100 apart and exp(-100) ≈ 4e-44.
  c.problem.temperature = c.problem.effective_scale() / 100.0;
  const Run r = run_implementation(impl, c, false, threads);
  BoundOptions options{u_of(impl)};
  options.exact_dot_products = true;
  const ErrorBounds eb = forward_error_bounds(c, options);
  std::vector<double> bound = eb.out;
  const Shape& s = c.problem.shape;
  for (size_t i = 0; i < bound.size(); ++i) bound[i] += static_cast<double>(s.n_k) * 4e-44 * 2 * (1 + std::fabs(eb.mixed[i]));
  return judge(compare(r.out, limit_output(c, true), bound), s, s.n_q, s.d_v,
               fmt::format("at τ = {:.3g} (τ → 0): O", c.problem.temperature),
               "the mean of the V rows tied for the largest logit,");
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
  c.problem.temperature = 1e7 * std::max(1.0, largest);
  const double spread = 2 * largest / c.problem.temperature;  // ≤ 2e-7
  const Run r = run_implementation(impl, c, false, threads);
  const ErrorBounds eb = forward_error_bounds(c, {u_of(impl)});
  std::vector<double> bound = eb.out;
  for (size_t i = 0; i < bound.size(); ++i) bound[i] += 2 * spread * eb.mixed[i] + 1e-300;
  return judge(compare(r.out, limit_output(c, false), bound), s, s.n_q, s.d_v,
               fmt::format("at τ = {:.3g} (τ → ∞): O", c.problem.temperature),
               "the mean of the readable V rows,");
}

// Row entropies of the weights, read from O with V = identity (d_v = n_k) so
// that implementations exposing only O are checked too; also their tolerance.
struct Entropies {
  std::vector<double> h, tolerance;
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
  const ErrorBounds eb = forward_error_bounds(c, {u_of(impl)});
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
  return e;
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
  return o;
}

Outcome check_convex_hull(Implementation& impl, const Case& c, int threads) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  const Run r = run_implementation(impl, c, false, threads);
  const double u = u_of(impl);
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
          const double tol = kSafetyFactor * u * static_cast<double>(s.n_k + 4) * vmax + 0x1p-24 * vmax +
                             kSafetyFactor * static_cast<double>(s.n_k + 1) * kFloatTiny * (1 + vmax);
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

Outcome check_causal_prefix(Implementation& impl, const Case& c, int threads) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  if (p.causal == Causal::none) return discarded("no causal mask");
  auto rng = aux_rng(c);
  // Keys from `cut` on are replaced; rows whose causal limit is ≤ cut must not change.
  const int64_t pivot = static_cast<int64_t>(rng() % static_cast<uint64_t>(s.n_q));
  int64_t cut = key_limit(p, 0, pivot);
  if (cut >= s.n_k) cut = key_limit(p, 0, 0);
  if (cut >= s.n_k) return discarded("no key lies past a causal limit");
  Case changed = c;
  std::uniform_real_distribution<float> value(-4, 4);
  for (int64_t slice = 0; slice < s.batch * s.heads; ++slice)
    for (int64_t j = cut; j < s.n_k; ++j) {
      for (int64_t t = 0; t < s.d_k; ++t) changed.k[static_cast<size_t>((slice * s.n_k + j) * s.d_k + t)] = value(rng);
      for (int64_t t = 0; t < s.d_v; ++t) changed.v[static_cast<size_t>((slice * s.n_k + j) * s.d_v + t)] = value(rng);
    }
  const bool w = impl.capabilities().weights;
  const Run r1 = run_implementation(impl, c, w, threads);
  const Run r2 = run_implementation(impl, changed, w, threads);
  auto before_cut = [&](int64_t b, int64_t, int64_t i) { return key_limit(p, b, i) <= cut; };
  const std::string what = fmt::format("with keys {}..{} replaced: O", cut, s.n_k - 1);
  Outcome o = rows_identical(r1.out, r2.out, s, s.d_v, before_cut, what);
  if (o.ok && !o.discard && w) o = rows_identical(r1.weights, r2.weights, s, s.n_k, before_cut, "A");
  if (o.ok) o.worst_ratio.reset();
  return o;
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
  const double u = u_of(impl);
  const ErrorBounds b1 = forward_error_bounds(c, {u}), b2 = forward_error_bounds(c2, {u}),
                    b3 = forward_error_bounds(c3, {u});
  std::vector<double> expected(r3.out.size()), bound(r3.out.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    expected[i] = alpha * r1.out[i] + beta * r2.out[i];
    // The three bounds, plus the rounding of αV1 + βV2 to float.
    bound[i] = b3.out[i] + std::fabs(alpha) * b1.out[i] + std::fabs(beta) * b2.out[i] +
               kSafetyFactor * 0x1p-24 * b3.mixed[i] + 1e-300;
  }
  const Shape& s = c.problem.shape;
  return judge(compare(r3.out, expected, bound), s, s.n_q, s.d_v,
               fmt::format("with V = {:g}·V1 + {:g}·V2: O", alpha, beta), fmt::format("{:g}·O1 + {:g}·O2 =", alpha, beta));
}

// One (b, h) slice as a problem of its own.
Case slice_case(const Case& c, int64_t b, int64_t h) {
  const Shape& s = c.problem.shape;
  Case one = c;
  one.problem.shape.batch = one.problem.shape.heads = 1;
  if (!c.problem.key_lengths.empty()) one.problem.key_lengths = {c.problem.key_lengths[static_cast<size_t>(b)]};
  if (c.problem.mask) {
    const ExplicitMask& m = *c.problem.mask;
    const int64_t mb = m.batch == 1 ? 0 : b, mh = m.heads == 1 ? 0 : h;
    ExplicitMask part;
    auto first = m.allowed.begin() + (mb * m.heads + mh) * s.n_q * s.n_k;
    part.allowed.assign(first, first + s.n_q * s.n_k);
    one.problem.mask = part;
  }
  const int64_t slice = b * s.heads + h;
  one.q.assign(c.q.begin() + slice * s.n_q * s.d_k, c.q.begin() + (slice + 1) * s.n_q * s.d_k);
  one.k.assign(c.k.begin() + slice * s.n_k * s.d_k, c.k.begin() + (slice + 1) * s.n_k * s.d_k);
  one.v.assign(c.v.begin() + slice * s.n_k * s.d_v, c.v.begin() + (slice + 1) * s.n_k * s.d_v);
  return one;
}

Outcome check_batch_head_independence(Implementation& impl, const Case& c, int threads) {
  const Shape& s = c.problem.shape;
  if (s.batch * s.heads < 2) return discarded("a single slice");
  const Run all = run_implementation(impl, c, false, threads);
  const ErrorBounds eb = forward_error_bounds(c, {u_of(impl)});
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
  return result;
}

Outcome check_empty_row_policy(Implementation& impl, const Case& c, int threads) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  bool any_empty = false;
  for (int64_t b = 0; b < s.batch && !any_empty; ++b)
    for (int64_t h = 0; h < s.heads && !any_empty; ++h)
      for (int64_t i = 0; i < s.n_q && !any_empty; ++i) any_empty = slice_row_empty(p, b, h, i);
  if (!any_empty) return discarded("no empty row");
  if (p.empty_rows == EmptyRowPolicy::reject) {
    try {
      (void)run_implementation(impl, c, false, threads);
      return failed("an empty row under the reject policy was accepted");
    } catch (const InvalidInput&) {
      return {};
    }
  }
  const bool w = impl.capabilities().weights;
  const Run r = run_implementation(impl, c, w, threads);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.n_q; ++i) {
        const size_t row = static_cast<size_t>((b * s.heads + h) * s.n_q + i);
        const bool empty = slice_row_empty(p, b, h, i);
        for (int64_t col = 0; col < s.d_v; ++col) {
          const float x = r.out[row * static_cast<size_t>(s.d_v) + static_cast<size_t>(col)];
          if (empty ? x != 0.0f : !std::isfinite(x))
            return failed(fmt::format("O[{}][{}][{}][{}] = {} on {} row under the zero policy", b, h, i, col, x,
                                      empty ? "an empty" : "a non-empty"),
                          b, h);
        }
        if (empty && w)
          for (int64_t j = 0; j < s.n_k; ++j)
            if (r.weights[row * static_cast<size_t>(s.n_k) + static_cast<size_t>(j)] != 0.0f)
              return failed(fmt::format("A[{}][{}][{}][{}] is not 0 on an empty row", b, h, i, j), b, h);
      }
  return {};
}

// The bad inputs of DESIGN.md, one per case, chosen by the case's aux number.
Outcome check_input_validation(Implementation& impl, const Case& c, int threads) {
  const Capabilities caps = impl.capabilities();
  const Shape& s = c.problem.shape;
  auto rng = aux_rng(c);
  Case bad = c;
  std::vector<std::string> kinds = {"nonfinite", "temperature", "scale", "tensor_length", "zero_size"};
  if (caps.explicit_mask) kinds.push_back("mask_shape");
  if (caps.key_padding) kinds.push_back("key_lengths");
  if (caps.empty_row_reject && (caps.key_padding || caps.explicit_mask)) kinds.push_back("empty_row");
  const std::string kind = kinds[rng() % kinds.size()];
  std::string what;
  // Spans passed to forward; tensor_length shortens or lengthens one.
  std::vector<float> q = c.q, k = c.k, v = c.v;
  if (kind == "nonfinite") {
    const float values[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
    const float value = values[rng() % 3];
    std::vector<float>* tensors[] = {&q, &k, &v};
    const char* names[] = {"Q", "K", "V"};
    const size_t t = rng() % 3;
    const size_t idx = rng() % tensors[t]->size();
    (*tensors[t])[idx] = value;
    what = fmt::format("{}[{}] = {}", names[t], idx, value);
  } else if (kind == "temperature" || kind == "scale") {
    const double values[] = {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity()};
    const double value = values[rng() % 4];
    if (kind == "temperature") bad.problem.temperature = value;
    else bad.problem.scale = value;
    what = fmt::format("{} = {}", kind, value);
  } else if (kind == "tensor_length") {
    std::vector<float>* tensors[] = {&q, &k, &v};
    const char* names[] = {"Q", "K", "V"};
    const size_t t = rng() % 3;
    if (rng() % 2) tensors[t]->push_back(1.0f);
    else tensors[t]->pop_back();
    what = fmt::format("{} with {} elements for the shape {}", names[t], tensors[t]->size(), canonical_name(c.problem));
  } else if (kind == "zero_size") {
    int64_t* dims[] = {&bad.problem.shape.n_q, &bad.problem.shape.n_k, &bad.problem.shape.d_k, &bad.problem.shape.d_v};
    const char* names[] = {"n_q", "n_k", "d_k", "d_v"};
    const size_t d = rng() % 4;
    *dims[d] = 0;
    bad.problem.mask.reset();
    bad.problem.key_lengths.clear();
    q.resize(static_cast<size_t>(bad.problem.shape.q_size()));
    k.resize(static_cast<size_t>(bad.problem.shape.k_size()));
    v.resize(static_cast<size_t>(bad.problem.shape.v_size()));
    what = fmt::format("{} = 0", names[d]);
  } else if (kind == "mask_shape") {
    ExplicitMask m;
    m.batch = s.batch + 1;
    m.allowed.assign(static_cast<size_t>(m.batch * s.n_q * s.n_k), 1);
    if (rng() % 2) {
      m.batch = 1;
      m.allowed.resize(static_cast<size_t>(s.n_q * s.n_k - 1));
    }
    bad.problem.mask = m;
    what = fmt::format("a mask of [{}][{}] with {} elements", m.batch, m.heads, m.allowed.size());
  } else if (kind == "key_lengths") {
    bad.problem.key_lengths.assign(static_cast<size_t>(s.batch), s.n_k);
    switch (rng() % 3) {
      case 0: bad.problem.key_lengths[0] = s.n_k + 1; break;
      case 1: bad.problem.key_lengths[0] = -1; break;
      default: bad.problem.key_lengths.push_back(1); break;
    }
    what = fmt::format("key_lengths {}", fmt::join(bad.problem.key_lengths, ","));
  } else {  // an empty row under the reject policy
    bad.problem.empty_rows = EmptyRowPolicy::reject;
    if (caps.key_padding) {
      bad.problem.key_lengths.assign(static_cast<size_t>(s.batch), s.n_k);
      bad.problem.key_lengths[rng() % static_cast<size_t>(s.batch)] = 0;
    } else {
      ExplicitMask m;
      m.allowed.assign(static_cast<size_t>(s.n_q * s.n_k), 1);
      std::fill_n(m.allowed.begin(), s.n_k, uint8_t{0});
      bad.problem.mask = m;
    }
    what = "an empty row under the reject policy";
  }
  // Guarded buffers pre-filled with a sentinel: nothing may be written.
  const Shape& bs = bad.problem.shape;
  const size_t out_size = static_cast<size_t>(std::max<int64_t>(0, bs.out_size()));
  const size_t w_size = caps.weights ? static_cast<size_t>(std::max<int64_t>(0, bs.weights_size())) : 0;
  std::vector<float> out(out_size + kGuard, kGuardValue), weights(w_size + kGuard, kGuardValue);
  try {
    impl.forward(bad.problem, q, k, v, std::span<float>(out.data(), out_size),
                 std::span<float>(weights.data(), w_size), threads);
  } catch (const InvalidInput&) {
    for (float x : out)
      if (x != kGuardValue) return failed("rejected " + what + " but wrote to out first");
    for (float x : weights)
      if (x != kGuardValue) return failed("rejected " + what + " but wrote to weights first");
    return {};
  } catch (const ImplementationFault&) {
    throw;
  } catch (const std::exception& e) {
    return failed(fmt::format("{} raised '{}' instead of InvalidInput", what, e.what()));
  }
  return failed("accepted bad input: " + what);
}

Outcome check_differential_reference(Implementation& impl, const Case& c, int threads) {
  const Oracle oracle = choose_oracle(c.problem, impl.precision());
  const double u = u_of(impl);
  if (unit_roundoff(oracle) > kOracleTrust * u)
    return failed(fmt::format("no oracle precise enough for a {} implementation", to_string(impl.precision())));
  const bool w = impl.capabilities().weights;
  std::vector<double> ref_a;
  const std::vector<double> ref_o = oracle_attention(oracle, c, w ? &ref_a : nullptr);
  const Run r = run_implementation(impl, c, w, threads);
  const ErrorBounds eb = forward_error_bounds(c, {u});
  const Shape& s = c.problem.shape;
  Outcome o = judge(compare(r.out, ref_o, eb.out), s, s.n_q, s.d_v, "O", to_string(oracle) + " reference");
  if (o.ok && w) o = merge(o, judge(compare(r.weights, ref_a, eb.weights), s, s.n_q, s.n_k, "A",
                                    to_string(oracle) + " reference"));
  o.oracle = to_string(oracle);
  return o;
}

Outcome check_differential_naive_ratio(Implementation& impl, const Case& c, int threads) {
  auto naive = make_naive_peer(impl.precision());
  if (!naive) return failed("no naive implementation in " + to_string(impl.precision()));
  const Oracle oracle = choose_oracle(c.problem, impl.precision());
  const std::vector<double> ref = oracle_attention(oracle, c, nullptr);
  const Run r = run_implementation(impl, c, false, threads);
  const Run n = run_implementation(*naive, c, false, 1);
  const ErrorBounds eb = forward_error_bounds(c, {u_of(impl)});
  double naive_err = 0;
  for (size_t i = 0; i < ref.size(); ++i) naive_err = std::max(naive_err, std::fabs(n.out[i] - ref[i]));
  // Each element may err by k× the naive implementation's worst error, plus a
  // floor of 1/kNaiveFloorDivisor of its tolerance bound: a naive implementation
  // that happens to be exact on a case must not demand exactness.
  Outcome o;
  o.oracle = to_string(oracle);
  o.worst_ratio = 0.0;
  int64_t worst = -1;
  double worst_err = 0, worst_allowed = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double e = std::fabs(r.out[i] - ref[i]);
    if (std::isnan(e)) e = std::numeric_limits<double>::infinity();
    const double allowed_err = kNaiveRatio * naive_err + eb.out[i] / kNaiveFloorDivisor;
    const double ratio = e == 0 ? 0 : e / allowed_err;
    if (worst < 0 || ratio > *o.worst_ratio) {
      o.worst_ratio = ratio;
      worst = static_cast<int64_t>(i);
      worst_err = e;
      worst_allowed = allowed_err;
    }
  }
  const Shape& s = c.problem.shape;
  o.slice_b = worst / (s.n_q * s.d_v) / s.heads;
  o.slice_h = worst / (s.n_q * s.d_v) % s.heads;
  if (*o.worst_ratio > 1) {
    o.ok = false;
    o.message = fmt::format("error {:.3g} at O{} exceeds {:g}× the naive {} error {:.3g} + floor {:.3g} (allowed {:.3g})",
                            worst_err, index_name(s, s.n_q, s.d_v, worst), kNaiveRatio, to_string(impl.precision()),
                            naive_err, worst_allowed - kNaiveRatio * naive_err, worst_allowed);
  }
  return o;
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

// ------------------------------------------------------------------ table

std::string no_skip(const Capabilities&, Precision) { return {}; }

CaseRequest plain(const Capabilities& caps) {
  CaseRequest r;
  r.caps = caps;
  return r;
}

std::vector<Property> make_properties() {
  using R = CaseRequest;
  std::vector<Property> list;
  auto add = [&](std::string name, std::string sentence, std::function<CaseRequest(const Capabilities&)> request,
                 std::function<Outcome(Implementation&, const Case&, int)> check, bool has_bound = true,
                 std::function<std::string(const Capabilities&, Precision)> skip = no_skip) {
    list.push_back({std::move(name), std::move(sentence), std::move(request), std::move(skip), std::move(check),
                    has_bound});
  };
  add("shape", "every element of O (and A) is written and finite", plain, check_shape, false);
  add("row_sum", "with a V column of ones the output column is 1 (weights sum to one)", plain, check_row_sum);
  add("nonnegative", "with V >= 0 the output is >= 0 (weights are non-negative)", plain, check_nonnegative, false);
  add("mask_zero", "masked weights are exactly 0: replacing masked keys with 1e30 leaves O unchanged",
      [](const Capabilities& caps) { R r = plain(caps); r.masked_key = true; return r; }, check_mask_zero, false,
      [](const Capabilities& caps, Precision) {
        return caps.explicit_mask || caps.key_padding || caps.causal_top_left || caps.causal_bottom_right
                   ? std::string()
                   : std::string("implementation supports no mask");
      });
  add("shift_invariance", "adding one vector to every key leaves O unchanged, even past exp's overflow", plain,
      check_shift_invariance);
  add("query_permutation", "permuting the queries permutes the output rows",
      [](const Capabilities& caps) { R r = plain(caps); r.no_causal = true; return r; }, check_query_permutation);
  add("key_value_permutation", "permuting keys with their values (and mask columns) leaves O unchanged",
      [](const Capabilities& caps) { R r = plain(caps); r.position_free = true; return r; },
      check_key_value_permutation);
  add("temperature_zero_limit", "as τ → 0 each row becomes one-hot on its argmax, ties split evenly",
      [](const Capabilities& caps) { R r = plain(caps); r.integer_qk = true; r.fixed_temperature = true; return r; },
      check_temperature_zero_limit, true,
      [](const Capabilities& caps, Precision) { return caps.temperature ? std::string() : std::string("implementation does not support temperature"); });
  add("temperature_infinite_limit", "as τ → ∞ each row becomes uniform over its readable keys",
      [](const Capabilities& caps) { R r = plain(caps); r.fixed_temperature = true; return r; },
      check_temperature_infinite_limit, true,
      [](const Capabilities& caps, Precision) { return caps.temperature ? std::string() : std::string("implementation does not support temperature"); });
  add("temperature_monotone", "row entropy is non-decreasing in τ", plain, check_temperature_monotone, true,
      [](const Capabilities& caps, Precision) { return caps.temperature ? std::string() : std::string("implementation does not support temperature"); });
  add("convex_hull", "each output lies within the range of the readable V rows of its column", plain,
      check_convex_hull);
  add("causal_prefix", "row i does not depend on keys and values past its causal limit",
      [](const Capabilities& caps) { R r = plain(caps); r.causal = true; return r; }, check_causal_prefix, false,
      [](const Capabilities& caps, Precision) {
        return caps.causal_top_left || caps.causal_bottom_right ? std::string()
                                                                : std::string("implementation does not support causal masks");
      });
  add("value_linearity", "O is linear in V", plain, check_value_linearity);
  add("batch_head_independence", "each (batch, head) slice equals the same slice computed alone",
      [](const Capabilities& caps) { R r = plain(caps); r.multi_slice = true; return r; },
      check_batch_head_independence, true,
      [](const Capabilities& caps, Precision) { return caps.batch_heads ? std::string() : std::string("implementation does not support batch or heads > 1"); });
  add("empty_row_policy", "empty rows are rejected (reject) or give zero rows of O and A (zero)",
      [](const Capabilities& caps) { R r = plain(caps); r.empty_row = true; return r; }, check_empty_row_policy,
      false, [](const Capabilities& caps, Precision) {
        return (caps.empty_row_reject || caps.empty_row_zero) && (caps.key_padding || caps.explicit_mask)
                   ? std::string()
                   : std::string("implementation can express no empty row");
      });
  add("input_validation", "every bad input is rejected with InvalidInput and nothing is written", plain,
      check_input_validation, false);
  add("differential_reference", "O (and A) agree with the high-precision reference within the tolerance model",
      plain, check_differential_reference);
  add("differential_naive_ratio", "the error is at most 4× a naive same-precision implementation's", plain,
      check_differential_naive_ratio, true, [](const Capabilities&, Precision p) {
        return make_naive_peer(p) ? std::string() : "no naive implementation in " + to_string(p);
      });
  add("thread_determinism", "the output is bitwise identical whatever the thread count",
      [](const Capabilities& caps) { R r = plain(caps); r.multi_slice = true; return r; }, check_thread_determinism,
      false, [](const Capabilities& caps, Precision) {
        return caps.threads ? std::string() : std::string("implementation does not use threads");
      });
  return list;
}

}  // namespace

Run run_implementation(Implementation& impl, const Case& c, bool want_weights, int threads) {
  const Shape& s = c.problem.shape;
  const size_t out_size = static_cast<size_t>(s.out_size());
  const size_t w_size = want_weights ? static_cast<size_t>(s.weights_size()) : 0;
  std::vector<float> out(out_size + kGuard, kNaN), weights(w_size + kGuard, kNaN);
  std::fill(out.begin() + static_cast<std::ptrdiff_t>(out_size), out.end(), kGuardValue);
  std::fill(weights.begin() + static_cast<std::ptrdiff_t>(w_size), weights.end(), kGuardValue);
  impl.forward(c.problem, c.q, c.k, c.v, std::span<float>(out.data(), out_size),
               std::span<float>(weights.data(), w_size), threads);
  for (size_t i = out_size; i < out.size(); ++i)
    if (out[i] != kGuardValue) throw std::runtime_error("forward wrote past the end of out");
  for (size_t i = w_size; i < weights.size(); ++i)
    if (weights[i] != kGuardValue) throw std::runtime_error("forward wrote past the end of weights");
  out.resize(out_size);
  weights.resize(w_size);
  return {std::move(out), std::move(weights)};
}

const std::vector<Property>& all_properties() {
  static const std::vector<Property> list = make_properties();
  return list;
}

const Property* find_property(const std::string& name) {
  for (const Property& p : all_properties())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace attncheck
