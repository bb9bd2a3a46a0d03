#include "property_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "attncheck/tolerance.h"

namespace attncheck::props {

std::mt19937_64 aux_rng(const Case& c) {
  auto it = c.labels.find("aux");
  return std::mt19937_64(it == c.labels.end() ? 0 : std::stoull(it->second));
}

Outcome failed(std::string message, int64_t b, int64_t h) {
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
  a.notes.insert(a.notes.end(), b.notes.begin(), b.notes.end());
  if (b.inconclusive && !a.inconclusive) {
    a.inconclusive = true;
    a.message = b.message;
  }
  return a;
}

std::vector<double> sum(const std::vector<double>& a, const std::vector<double>& b, double wb) {
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

double class_largest_input(Precision precision) {
  return std::min<double>(precision_class(precision).largest, std::numeric_limits<float>::max());
}

namespace {

// Every value within the class and every Σ|q·k|·stretch below a quarter of its
// largest value: surely in range, without the full scan.
bool surely_in_class(const Case& c, Precision precision) {
  const double largest = class_largest_input(precision);
  double qmax = 0, kmax = 0, vmax = 0;
  for (float x : c.q) qmax = std::max(qmax, static_cast<double>(std::fabs(x)));
  for (float x : c.k) kmax = std::max(kmax, static_cast<double>(std::fabs(x)));
  for (float x : c.v) vmax = std::max(vmax, static_cast<double>(std::fabs(x)));
  const Problem& p = c.problem;
  const double scale = p.effective_scale(), tau = p.temperature;
  const double stretch = std::max({1.0, scale, 1 / tau, scale / tau});
  return qmax <= largest && kmax <= largest && vmax <= largest &&
         static_cast<double>(p.shape.d_k) * qmax * kmax * stretch <= largest / 4 &&
         static_cast<double>(p.shape.n_k) * vmax <= largest / 4;
}

}  // namespace

bool leaves_class(const Case& original, const Case& derived, Precision precision) {
  if (surely_in_class(derived, precision)) return false;
  return out_of_class_range(derived, precision) && !out_of_class_range(original, precision);
}

std::optional<Run> run_derived(Implementation& impl, const Case& original, const Case& derived, bool want_weights,
                               int threads, Outcome& declined) {
  try {
    return run_implementation(impl, derived, want_weights, threads);
  } catch (const std::exception& e) {
    if (!dynamic_cast<const Unsupported*>(&e) && !dynamic_cast<const InvalidInput*>(&e)) throw;
    if (!leaves_class(original, derived, impl.precision())) throw;
    declined = Outcome{};
    declined.unsupported = true;
    declined.message = fmt::format("declined a derived case beyond {}'s range ({}): {}", to_string(impl.precision()),
                                   *out_of_class_range(derived, impl.precision()), e.what());
    return std::nullopt;
  }
}

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

Outcome inconclusive_unless_failed(Outcome o, const ErrorBounds& eb) {
  if (!o.ok || o.discard || o.inconclusive || eb.inconclusive_reason.empty()) return o;
  o.inconclusive = true;
  o.message = eb.inconclusive_reason;
  return o;
}

Outcome inconclusive_unless_failed(Outcome o, const ErrorBounds& a, const ErrorBounds& b) {
  return inconclusive_unless_failed(inconclusive_unless_failed(std::move(o), a), b);
}

Outcome inconclusive_unless_failed(Outcome o, const ErrorBounds& a, const ErrorBounds& b, const ErrorBounds& c) {
  return inconclusive_unless_failed(inconclusive_unless_failed(std::move(o), a, b), c);
}

}  // namespace attncheck::props
