#include "attncheck/tolerance.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attncheck/reference.h"

namespace attncheck {

ErrorBounds forward_error_bounds(const Case& c, const BoundOptions& options) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  using LD = long double;
  const double u = options.u;
  const double u_out = 0x1p-24;  // every implementation writes float
  const double F = kSafetyFactor;
  const LD mult = static_cast<LD>(p.effective_scale()) / static_cast<LD>(p.temperature);
  const double dot_roundings = options.exact_dot_products ? 2.0 : static_cast<double>(s.d_k + 2);
  // Inputs rounded to float before the call (e.g. K + shift) perturb each logit
  // by float's unit roundoff, whatever the implementation's precision.
  const double input_rounding = 0x1p-24 * options.extra_input_roundings;

  ErrorBounds r;
  r.out.assign(static_cast<size_t>(s.out_size()), 0);
  r.o.assign(r.out.size(), 0);
  r.mixed.assign(r.out.size(), 0);
  r.weights.assign(static_cast<size_t>(s.weights_size()), 0);
  r.a.assign(r.weights.size(), 0);
  r.logit_range.assign(static_cast<size_t>(s.batch * s.heads * s.n_q), 0);
  r.empty_row.assign(r.logit_range.size(), 0);

  const size_t nk = static_cast<size_t>(s.n_k);
  std::vector<LD> logit(nk), a(nk), e(nk);
  std::vector<char> ok(nk);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t slice = b * s.heads + h;
      const float* Q = c.q.data() + slice * s.n_q * s.d_k;
      const float* K = c.k.data() + slice * s.n_k * s.d_k;
      const float* V = c.v.data() + slice * s.n_k * s.d_v;
      for (int64_t i = 0; i < s.n_q; ++i) {
        const size_t row = static_cast<size_t>(slice * s.n_q + i);
        LD m = -std::numeric_limits<LD>::infinity(), lo = std::numeric_limits<LD>::infinity();
        std::vector<LD> magnitude(nk, 0);
        for (int64_t j = 0; j < s.n_k; ++j) {
          const size_t jj = static_cast<size_t>(j);
          ok[jj] = allowed(p, b, h, i, j);
          LD dot = 0, mag = 0;
          for (int64_t t = 0; t < s.d_k; ++t) {
            const LD x = Q[i * s.d_k + t], y = K[j * s.d_k + t];
            dot += x * y;
            mag += std::fabs(x * y);
          }
          logit[jj] = dot * mult;
          magnitude[jj] = mag * std::fabs(mult);
          if (ok[jj]) {
            m = std::max(m, logit[jj]);
            lo = std::min(lo, logit[jj]);
          }
        }
        if (m == -std::numeric_limits<LD>::infinity()) {  // empty row: exact zeros expected
          r.empty_row[row] = 1;
          for (int64_t c2 = 0; c2 < s.d_v; ++c2) r.out[row * static_cast<size_t>(s.d_v) + static_cast<size_t>(c2)] = kFloatTiny;
          for (int64_t j = 0; j < s.n_k; ++j) r.weights[row * nk + static_cast<size_t>(j)] = kFloatTiny;
          continue;
        }
        r.logit_range[row] = static_cast<double>(m - lo);
        LD sum = 0;
        for (size_t j = 0; j < nk; ++j) {
          a[j] = ok[j] ? std::exp(logit[j] - m) : 0;
          sum += a[j];
        }
        LD e_bar = 0;
        for (size_t j = 0; j < nk; ++j) {
          a[j] /= sum;
          // Error of logit j as the implementation computes it: the dot product
          // and the scale/τ multiplications, the exp argument, and underflow.
          e[j] = ok[j] ? u * (dot_roundings * magnitude[j] + (m - logit[j])) + input_rounding * magnitude[j] +
                             (options.exact_dot_products ? 0 : static_cast<LD>(s.d_k) * std::fabs(mult) * kFloatTiny)
                       : 0;
          e_bar += a[j] * e[j];
        }
        const LD softmax_rounding = u * static_cast<LD>(s.n_k + 6);  // exp, the sum, the division
        for (size_t j = 0; j < nk; ++j) {
          r.a[row * nk + j] = static_cast<double>(a[j]);
          r.weights[row * nk + j] = ok[j] ? static_cast<double>(F * a[j] * (e[j] + e_bar + softmax_rounding) +
                                                                u_out * a[j]) + kFloatTiny
                                          : 0.0;  // masked weights must be exactly zero
        }
        for (int64_t col = 0; col < s.d_v; ++col) {
          LD o = 0, mixed = 0, spread = 0, vmax = 0;
          for (size_t j = 0; j < nk; ++j) {
            const LD vj = V[static_cast<int64_t>(j) * s.d_v + col];
            o += a[j] * vj;
            mixed += a[j] * std::fabs(vj);
            spread += a[j] * std::fabs(vj) * (e[j] + softmax_rounding);
            if (ok[j]) vmax = std::max(vmax, std::fabs(vj));
          }
          const LD accumulation = u * static_cast<LD>(s.n_k + 2) * mixed;
          const LD bound = F * (spread + e_bar * mixed + accumulation) + u_out * std::fabs(o) +
                           F * static_cast<LD>(s.n_k + 1) * kFloatTiny * (1 + vmax);
          const size_t idx = row * static_cast<size_t>(s.d_v) + static_cast<size_t>(col);
          r.out[idx] = static_cast<double>(bound);
          r.o[idx] = static_cast<double>(o);
          r.mixed[idx] = static_cast<double>(mixed);
        }
      }
    }
  }
  return r;
}

Comparison compare(std::span<const float> got, std::span<const double> expected,
                   std::span<const double> bound) {
  Comparison c;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(static_cast<double>(got[i]) - expected[i]);
    double ratio = error / bound[i];
    if (!std::isfinite(got[i]) || std::isnan(ratio)) ratio = std::numeric_limits<double>::infinity();
    if (error == 0) ratio = 0;
    if (c.worst_index < 0 || ratio > c.worst_ratio) {
      c.worst_ratio = ratio;
      c.worst_index = static_cast<int64_t>(i);
      c.got = got[i];
      c.expected = expected[i];
      c.error = error;
      c.bound = bound[i];
    }
  }
  c.ok = !(c.worst_ratio > 1.0);
  return c;
}

std::string index_name(const Shape& s, int64_t rows, int64_t cols, int64_t flat) {
  const int64_t col = flat % cols, row = (flat / cols) % rows;
  const int64_t h = (flat / (cols * rows)) % s.heads, b = flat / (cols * rows * s.heads);
  return fmt::format("[{}][{}][{}][{}]", b, h, row, col);
}

Oracle choose_oracle(const Problem& p, Precision precision) {
  if (precision == Precision::multiprecision) return Oracle::mp100;
  if (precision == Precision::extended) return Oracle::mp50;
  const Shape& s = p.shape;
  const int64_t work = s.batch * s.heads * s.n_q * s.n_k * (s.d_k + s.d_v);
  return work <= kMultiprecisionWork ? Oracle::mp50 : Oracle::long_double;
}

std::string to_string(Oracle o) {
  switch (o) {
    case Oracle::long_double: return "long double";
    case Oracle::mp50: return "mp50";
    case Oracle::mp100: return "mp100";
  }
  return "?";
}

double unit_roundoff(Oracle o) {
  switch (o) {
    case Oracle::long_double: return 0x1p-64;
    case Oracle::mp50: return 0.5e-49;
    case Oracle::mp100: return 0.5e-99;
  }
  return 1;
}

namespace {
template <class T>
std::vector<double> run_reference(const Case& c, std::vector<double>* weights) {
  std::vector<T> w;
  const std::vector<T> o = reference_attention<T>(c.problem, c.q, c.k, c.v, weights ? &w : nullptr);
  std::vector<double> result(o.size());
  for (size_t i = 0; i < o.size(); ++i) result[i] = static_cast<double>(o[i]);
  if (weights) {
    weights->resize(w.size());
    for (size_t i = 0; i < w.size(); ++i) (*weights)[i] = static_cast<double>(w[i]);
  }
  return result;
}
}  // namespace

std::vector<double> oracle_attention(Oracle o, const Case& c, std::vector<double>* weights) {
  switch (o) {
    case Oracle::long_double: return run_reference<long double>(c, weights);
    case Oracle::mp50: return run_reference<mp50>(c, weights);
    case Oracle::mp100: return run_reference<mp100>(c, weights);
  }
  return {};
}

}  // namespace attncheck
