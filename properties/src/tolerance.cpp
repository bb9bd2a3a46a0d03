#include "attncheck/tolerance.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "attncheck/reference.h"

namespace attncheck {

double accumulation_factor(int64_t n, double u) {
  const double nu = static_cast<double>(n) * u;
  const double worst = nu < 1 ? nu / (1 - nu) : std::numeric_limits<double>::infinity();
  const double probabilistic =
      std::expm1(kLambda * std::sqrt(static_cast<double>(n)) * u + static_cast<double>(n) * u * u / (1 - u));
  return std::min(worst, probabilistic);
}

namespace {

using LD = long double;

// The arithmetic of a class: classes narrower than float store in the class
// (inputs, exp's results, outputs) and accumulate in float, as mainstream
// fp16/bf16 kernels do; the others compute in their own precision.
struct Arithmetic {
  double u;            // unit roundoff of the accumulation
  double u_store;      // rounding of stored inputs and weights (0: inputs are exact)
  double u_out;        // rounding of the written result (every implementation writes float)
  double tiny;         // values below it may flush to zero
  double out_step;     // spacing of the written result's subnormals
  double largest;      // largest value the arithmetic holds
};

Arithmetic arithmetic_of(Precision p) {
  const PrecisionClass& c = precision_class(p);
  const PrecisionClass& f = precision_class(Precision::fp32);
  const bool narrow = narrower_than_float(p);
  Arithmetic a;
  a.u = narrow ? f.unit_roundoff : c.unit_roundoff;
  a.u_store = narrow ? c.unit_roundoff : 0;
  a.u_out = std::max(c.unit_roundoff, f.unit_roundoff);
  a.tiny = std::max(c.smallest_normal, f.smallest_normal);
  a.out_step = std::max(c.subnormal_step, f.subnormal_step);
  a.largest = std::max(c.largest, f.largest);
  return a;
}


}  // namespace

ErrorBounds forward_error_bounds(const Case& c, const BoundOptions& options) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  const Arithmetic ar = arithmetic_of(options.precision);
  const double u = ar.u;
  const LD mult = static_cast<LD>(p.effective_scale()) / static_cast<LD>(p.temperature);
  const LD amult = std::fabs(mult);
  const double dot_factor = options.exact_dot_products ? 0.0 : accumulation_factor(s.d_k, u);
  // Inputs rounded to float before the call (e.g. K + shift) perturb each
  // product by float's unit roundoff, whatever the implementation's class.
  const double input_rounding = 0x1p-24 * options.extra_input_roundings;
  // The sum of the weights and the output accumulation: n_k additions and as
  // many rescalings of an online softmax.
  const double sum_factor = accumulation_factor(2 * s.n_k + 2, u);
  const double stagnation_limit = 4 * u;
  const double flush_note = std::max(ar.tiny, precision_class(options.precision).weight_flush_note);  // terms this small beside the sum may round with one sign

  ErrorBounds r;
  r.out.assign(static_cast<size_t>(s.out_size()), 0);
  r.o.assign(r.out.size(), 0);
  r.mixed.assign(r.out.size(), 0);
  r.hull_lo.assign(r.out.size(), 0);
  r.hull_hi.assign(r.out.size(), 0);
  r.out_underflow.assign(r.out.size(), 0);
  r.out_reordering.assign(r.out.size(), 0);
  r.weights.assign(static_cast<size_t>(s.weights_size()), 0);
  r.a.assign(r.weights.size(), 0);
  r.empty_row.assign(static_cast<size_t>(s.batch * s.heads * s.n_q), 0);
  r.inconclusive_row.assign(r.empty_row.size(), 0);

  const size_t nk = static_cast<size_t>(s.n_k);
  std::vector<LD> logit(nk), a(nk), e(nk), x(nk), g(nk);
  std::vector<char> ok(nk);
  const size_t dv_size = static_cast<size_t>(s.d_v);
  std::vector<double> o(dv_size), mixed(dv_size), positive(dv_size), negative(dv_size), lo(dv_size), hi(dv_size),
      logit_part(dv_size), small_terms(dv_size), underflow(dv_size), reordering(dv_size);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t slice = b * s.heads + h;
      const float* Q = c.q.data() + slice * s.n_q * s.d_k;
      const float* K = c.k.data() + slice * s.n_k * s.d_k;
      const float* V = c.v.data() + slice * s.n_k * s.d_v;
      for (int64_t i = 0; i < s.n_q; ++i) {
        const size_t row = static_cast<size_t>(slice * s.n_q + i);
        LD m = -std::numeric_limits<LD>::infinity();
        // Logit errors that do not depend on the row's max: the dot product,
        // inputs stored in the class, products flushed to zero.
        for (int64_t j = 0; j < s.n_k; ++j) {
          const size_t jj = static_cast<size_t>(j);
          ok[jj] = allowed(p, b, h, i, j);
          if (!ok[jj]) continue;
          // In double: products of floats are exact in it, and the bound needs
          // its own exact values only to a relative 1e-13 or so (x87 long double
          // would make the bound several times slower than the oracle).
          double dot = 0, magnitude = 0, stored = 0, flushed = 0;
          const float* Qi = Q + i * s.d_k;
          const float* Kj = K + j * s.d_k;
          for (int64_t t = 0; t < s.d_k; ++t) {
            const double prod = static_cast<double>(Qi[t]) * Kj[t];
            dot += prod;
            magnitude += std::fabs(prod);
            flushed += std::min(std::fabs(prod), ar.tiny);
          }
          if (options.exact_dot_products) flushed = 0;
          if (ar.u_store > 0)
            for (int64_t t = 0; t < s.d_k; ++t) {
              // Each input rounded to the class, or flushed below its smallest normal.
              const double qv = std::fabs(Qi[t]), kv = std::fabs(Kj[t]);
              const double eq = qv < ar.tiny ? qv : ar.u_store * qv, ek = kv < ar.tiny ? kv : ar.u_store * kv;
              stored += eq * kv + qv * ek + eq * ek;
            }
          logit[jj] = static_cast<LD>(dot) * mult;
          e[jj] = amult * static_cast<LD>((dot_factor + input_rounding) * magnitude + stored + flushed);
          m = std::max(m, logit[jj]);
        }
        if (m == -std::numeric_limits<LD>::infinity()) {  // empty row: exact zeros expected (bound 0)
          r.empty_row[row] = 1;
          continue;
        }
        LD sum = 0;
        for (size_t j = 0; j < nk; ++j) {
          a[j] = ok[j] ? std::exp(logit[j] - m) : 0;
          sum += a[j];
        }
        const LD log_sum = std::log(sum);
        // The rest of each logit's error: the multiplication by scale/τ, the
        // subtraction of the max, exp's own error and the storing of exp's result.
        LD e_bar = 0, small_weights = 0;
        for (size_t j = 0; j < nk; ++j) {
          a[j] /= sum;
          if (!ok[j]) continue;
          e[j] += u * (std::fabs(logit[j]) + 2 * (m - logit[j])) + kExpUlps * u + ar.u_store;
          e_bar += a[j] * e[j];
          if (a[j] < stagnation_limit) small_weights += a[j];
        }
        // a_j·(e^y − 1) − a_j·c, evaluated in log space where a_j underflows
        // even long double (logit gaps beyond ~11 000) but e^y could revive it.
        auto scaled = [&](size_t j, LD y, LD minus) -> LD {
          if (y < 1) return a[j] * (std::expm1(y) - minus);
          return std::exp(std::min<LD>(logit[j] - m - log_sum + y, 11000)) - a[j] * (1 + minus);
        };
        // First-order sensitivity made rigorous: |â_j/a_j − 1| ≤ e^{x_j} − 1 with
        // x_j = (1 − a_j)e_j + Σ_{k≠j} a_k e_k + R, R bounding the log-sum-exp shift.
        LD shift = 0;
        for (size_t j = 0; j < nk; ++j)
          if (ok[j]) {
            const LD lin = e[j] + e_bar - 2 * a[j] * e[j];
            shift += scaled(j, lin, lin);
          }
        bool first_order = true;
        size_t worst_key = 0;
        LD worst_x = 0;
        const LD log_u = std::log(static_cast<LD>(u));
        for (size_t j = 0; j < nk; ++j) {
          x[j] = ok[j] ? e[j] + e_bar - 2 * a[j] * e[j] + shift : 0;
          // A key matters when its weight could reach the class's resolution.
          if (ok[j] && x[j] > kFirstOrderLimit && logit[j] - m - log_sum + x[j] > log_u) {
            first_order = false;
            if (x[j] > worst_x) worst_x = x[j], worst_key = j;
          }
          g[j] = ok[j] ? scaled(j, x[j], 0) : 0;  // the bound on |â_j − a_j| from the logits
        }
        if (!first_order) {
          r.inconclusive_row[row] = 1;
          if (r.inconclusive_reason.empty())
            r.inconclusive_reason = fmt::format(
                "row [{}][{}][{}]: the logit of key {} ({:.4g}) may be off by {:.3g} in {}, beyond the "
                "first-order model",
                b, h, i, worst_key, static_cast<double>(logit[worst_key]), static_cast<double>(e[worst_key]),
                to_string(options.precision));
        }
        const LD normalisation = sum_factor + 2 * u + small_weights;  // the weights' sum and the division
        for (size_t j = 0; j < nk; ++j) {
          const size_t idx = row * nk + j;
          r.a[idx] = static_cast<double>(a[j]);
          if (!ok[j]) continue;  // masked weights must be exactly zero: bound 0
          LD bound = first_order ? g[j] : std::max(a[j], 1 - a[j]);
          bound += a[j] * (normalisation + ar.u_out) + ar.out_step;
          if (a[j] < ar.tiny) bound += a[j];  // may flush to zero
          r.weights[idx] = static_cast<double>(bound);
        }
        // Per column, in two passes over the readable V rows (row-major), in
        // double for the same reason as the dot products.
        const size_t dv = static_cast<size_t>(s.d_v);
        std::fill(o.begin(), o.end(), 0), std::fill(mixed.begin(), mixed.end(), 0);
        std::fill(positive.begin(), positive.end(), 0), std::fill(negative.begin(), negative.end(), 0);
        std::fill(lo.begin(), lo.end(), std::numeric_limits<double>::infinity());
        std::fill(hi.begin(), hi.end(), -std::numeric_limits<double>::infinity());
        for (size_t j = 0; j < nk; ++j) {
          if (!ok[j]) continue;
          const float* Vj = V + j * dv;
          const double aj = static_cast<double>(a[j]);
          for (size_t col = 0; col < dv; ++col) {
            const double vj = Vj[col], term = aj * vj;
            o[col] += term;
            mixed[col] += std::fabs(term);
            positive[col] += std::max(term, 0.0);
            negative[col] += std::max(-term, 0.0);
            lo[col] = std::min(lo[col], vj), hi[col] = std::max(hi[col], vj);
          }
        }
        std::fill(logit_part.begin(), logit_part.end(), 0), std::fill(small_terms.begin(), small_terms.end(), 0);
        std::fill(underflow.begin(), underflow.end(), 0), std::fill(reordering.begin(), reordering.end(), 0);
        for (size_t j = 0; j < nk; ++j) {
          if (!ok[j]) continue;
          const float* Vj = V + j * dv;
          const double aj = static_cast<double>(a[j]), gj = static_cast<double>(g[j]);
          const double logit_rounding = aj * u * std::fabs(static_cast<double>(logit[j]));
          // Weights in the class's bottom binades may come back as 0 (a note on A);
          // O then loses their terms.
          const bool weight_flushes = aj < flush_note;
          for (size_t col = 0; col < dv; ++col) {
            const double vj = Vj[col], term = aj * std::fabs(vj);
            logit_part[col] += gj * std::fabs(vj - o[col]);
            reordering[col] += logit_rounding * std::fabs(vj - o[col]);
            small_terms[col] += term < stagnation_limit * mixed[col] ? term : 0.0;
            underflow[col] += (weight_flushes || term < ar.tiny || (ar.u_store > 0 && std::fabs(vj) < ar.tiny)) ? term : 0.0;
          }
        }
        for (size_t col = 0; col < dv; ++col) {
          // Beyond the first-order model only the convex hull is certain. In any
          // order of summation every partial sum lies in [−negative, positive].
          // Beyond it, the computed weights may be anything: rounding then
          // scales with the largest readable value, not with the exact mix.
          const LD logits = first_order ? logit_part[col] : std::max(o[col] - lo[col], hi[col] - o[col]);
          const LD computation =
              first_order ? sum_factor * std::max(positive[col], negative[col]) + small_terms[col] +
                                std::fabs(o[col]) * (normalisation + ar.u_out) + ar.u_store * mixed[col] +
                                underflow[col] + ar.out_step
                          : hull_tolerance(s.n_k, std::max(std::fabs(lo[col]), std::fabs(hi[col])), options.precision);
          const size_t idx = row * dv + col;
          r.out[idx] = static_cast<double>(logits + computation);
          r.out_underflow[idx] = first_order ? underflow[col] + ar.out_step : 0;
          r.out_reordering[idx] = 2 * (reordering[col] + u * mixed[col]);
          r.o[idx] = static_cast<double>(o[col]);
          r.mixed[idx] = static_cast<double>(mixed[col]);
          r.hull_lo[idx] = static_cast<double>(lo[col]);
          r.hull_hi[idx] = static_cast<double>(hi[col]);
        }
      }
    }
  }
  return r;
}

double hull_tolerance(int64_t n_k, double vmax, Precision precision) {
  const Arithmetic ar = arithmetic_of(precision);
  const double gamma = accumulation_factor(2 * n_k + 2, ar.u);
  // Accumulation and normalisation (2γ + 2u), stagnation of small terms (4u),
  // stored V and the written result, flushed terms (n_k·tiny) and the last step.
  return (2 * gamma + 6 * ar.u + ar.u_store + ar.u_out) * vmax + static_cast<double>(n_k + 1) * ar.tiny * (1 + vmax) +
         ar.out_step;
}

std::optional<std::string> out_of_class_range(const Case& c, Precision precision) {
  const PrecisionClass& cls = precision_class(precision);
  const Arithmetic ar = arithmetic_of(precision);
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  const std::tuple<const char*, const std::vector<float>*, int64_t, int64_t> tensors[] = {
      {"Q", &c.q, s.n_q, s.d_k}, {"K", &c.k, s.n_k, s.d_k}, {"V", &c.v, s.n_k, s.d_v}};
  for (const auto& [name, t, rows, cols] : tensors)
    for (size_t i = 0; i < t->size(); ++i)
      if (std::fabs((*t)[i]) > cls.largest)
        return fmt::format("{}{} = {:g} is beyond {}'s largest value {:g}", name,
                           index_name(s, rows, cols, static_cast<int64_t>(i)), (*t)[i], to_string(precision),
                           cls.largest);
  // Every stage of a logit: the products' sum, times scale, divided by τ, both.
  const LD scale = p.effective_scale(), tau = p.temperature;
  const LD stretch = std::max({LD(1), scale, 1 / tau, scale / tau});
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t slice = b * s.heads + h;
      const float* Q = c.q.data() + slice * s.n_q * s.d_k;
      const float* K = c.k.data() + slice * s.n_k * s.d_k;
      const float* V = c.v.data() + slice * s.n_k * s.d_v;
      for (int64_t i = 0; i < s.n_q; ++i) {
        int64_t readable = 0;
        LD vmax = 0;
        for (int64_t j = 0; j < s.n_k; ++j) {
          if (!allowed(p, b, h, i, j)) continue;
          ++readable;
          LD magnitude = 0;
          for (int64_t t = 0; t < s.d_k; ++t)
            magnitude += std::fabs(static_cast<LD>(Q[i * s.d_k + t]) * K[j * s.d_k + t]);
          if (magnitude * stretch > ar.largest)
            return fmt::format("row [{}][{}][{}]: the logit of key {} (Σ|q·k| = {:.3g}, scale {:g}, τ {:g}) "
                               "overflows {} arithmetic (largest {:.4g})",
                               b, h, i, j, static_cast<double>(magnitude), p.effective_scale(), p.temperature,
                               to_string(precision), ar.largest);
          for (int64_t col = 0; col < s.d_v; ++col) vmax = std::max<LD>(vmax, std::fabs(V[j * s.d_v + col]));
        }
        if (static_cast<LD>(readable) * vmax > ar.largest)
          return fmt::format("row [{}][{}][{}]: {} readable keys with |V| up to {:.3g} can overflow the output "
                             "accumulation in {}",
                             b, h, i, readable, static_cast<double>(vmax), to_string(precision));
      }
    }
  return std::nullopt;
}

Comparison compare(std::span<const float> got, std::span<const double> expected,
                   std::span<const double> bound, double flush_note) {
  Comparison c;
  for (size_t i = 0; i < got.size(); ++i) {
    if (flush_note > 0 && got[i] == 0 && expected[i] > bound[i] && expected[i] < flush_note) {
      ++c.flushed;
      c.largest_flushed = std::max(c.largest_flushed, expected[i]);
      continue;
    }
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
