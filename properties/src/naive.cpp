#include "attncheck/naive.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace attncheck {

std::vector<FlawInfo> all_flaws() {
  return {{Flaw::column_softmax, "column_softmax", {"row_sum", "differential_reference"}},
          {Flaw::missing_scale, "missing_scale", {"differential_reference"}},
          {Flaw::mask_after_softmax, "mask_after_softmax", {"row_sum", "differential_reference"}},
          {Flaw::no_max_subtraction, "no_max_subtraction", {"shift_invariance", "shape"}},
          {Flaw::v_rows_misaligned, "v_rows_misaligned", {"differential_reference", "key_value_permutation"}},
          {Flaw::causal_off_by_one, "causal_off_by_one", {"causal_prefix", "mask_zero", "differential_reference"}},
          {Flaw::tail_keys_dropped, "tail_keys_dropped", {"row_sum", "differential_reference"}},
          {Flaw::wrong_head_stride, "wrong_head_stride", {"batch_head_independence", "differential_reference"}},
          {Flaw::tau_multiplied, "tau_multiplied", {"temperature_zero_limit", "temperature_infinite_limit", "differential_reference"}},
          {Flaw::key_lengths_of_batch0, "key_lengths_of_batch0", {"batch_head_independence", "differential_reference", "mask_zero"}},
          {Flaw::relative_error_1e3, "relative_error_1e3", {"row_sum", "differential_reference"}},
          {Flaw::fp16_weights, "fp16_weights", {"differential_reference"}},
          // O·(1 + 1e-4) only from n_k = 1024: needs long rows in the run. A V
          // column of ones reads 1.0001, beyond fp32's bound at that length; the
          // reference sees it where |O| is near Σ a·|v| (V of one sign), not on
          // zero-mean V whose long-row means are small.
          {Flaw::relative_error_1e4_long_rows, "relative_error_1e4_long_rows", {"differential_reference", "row_sum"}},
          // The softmax renormalises over the other keys, so the weights still
          // sum to one and row_sum cannot see it; the reference can, and so can
          // permuting keys (another key lands on position 1024).
          {Flaw::key_dropped_past_block, "key_dropped_past_block", {"differential_reference", "key_value_permutation"}},
          // A zero row (its weights sum to 0) for a row whose fp32 logit overflows;
          // needs a generated readable key with a product past float's maximum.
          {Flaw::overflow_zeros, "overflow_zeros", {"differential_reference", "row_sum"}},
          // NaN only when a masked key's fp32 logit is +inf: mask_zero's huge
          // masked keys, or a generated masked key with an overflowing logit.
          {Flaw::masked_overflow_nan, "masked_overflow_nan", {"mask_zero", "shape"}},
          // Only on rows with a weight above 0.99: peaked rows, and every row at τ → 0.
          {Flaw::peaked_v_misaligned, "peaked_v_misaligned", {"differential_reference", "temperature_zero_limit"}}};
}

float round_to_fp16(float x) {
  if (x == 0 || !std::isfinite(x)) return x;
  const float ax = std::fabs(x);
  if (ax >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), x);
  // Below 2^-14 binary16 is subnormal with a fixed spacing of 2^-24.
  if (ax < 0x1p-14f) return std::nearbyint(x * 0x1p24f) * 0x1p-24f;
  int e = 0;
  const float m = std::frexp(x, &e);  // |m| in [0.5, 1): 11 significant bits
  return std::ldexp(std::nearbyint(m * 2048.0f) / 2048.0f, e);
}

float round_to_bf16(float x) {
  if (std::isnan(x)) return x;
  // bfloat16 is the top half of a binary32: round the low 16 bits away, to
  // nearest with ties to even. The carry moves into the exponent where the
  // significand overflows (and to the infinity pattern past the largest
  // value); float subnormals round to bfloat16 subnormals the same way.
  uint32_t bits = std::bit_cast<uint32_t>(x);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return std::bit_cast<float>(bits & 0xffff0000u);
}

float round_to_class(float x, Precision precision) {
  if (precision == Precision::fp16) return round_to_fp16(x);
  if (precision == Precision::bf16) return round_to_bf16(x);
  return x;
}

namespace {

constexpr int64_t kBlock = 1024;  // the key block of the block-boundary mutants

// Whether query i may read key j, with the flaws that change masking.
bool flawed_allowed(const Problem& p, const Problem& without_causal, int64_t b, int64_t h,
                    int64_t i, int64_t j, Flaw flaw) {
  const Shape& s = p.shape;
  if (flaw == Flaw::tail_keys_dropped && s.n_k > 16 && j >= s.n_k - s.n_k % 16) return false;
  if (flaw == Flaw::key_dropped_past_block && s.n_k > kBlock && j == kBlock) return false;
  int64_t causal_limit = s.n_k;
  if (p.causal == Causal::top_left) causal_limit = i + 1;
  if (p.causal == Causal::bottom_right) causal_limit = i + 1 + (s.n_k - s.n_q);
  if (flaw == Flaw::causal_off_by_one && p.causal != Causal::none) ++causal_limit;
  if (j >= causal_limit) return false;
  return allowed(without_causal, b, h, i, j);
}

// Softmax of one line of logits (finite or -inf; NaN propagates) into
// a_at(0 … length-1), with the flaw that skips the max subtraction.
template <class U, class At>
void softmax_line(std::span<const U> logits, Flaw flaw, At&& a_at) {
  using T = std::remove_reference_t<decltype(a_at(0))>;
  const int64_t length = static_cast<int64_t>(logits.size());
  U m = -std::numeric_limits<U>::infinity();
  for (const U& x : logits) m = std::max(m, x);
  if (flaw == Flaw::no_max_subtraction) m = 0;
  U sum = 0;
  for (int64_t x = length - 1; x >= 0; --x) sum += std::exp(logits[static_cast<size_t>(x)] - m);
  for (int64_t x = 0; x < length; ++x) a_at(x) = static_cast<T>(std::exp(logits[static_cast<size_t>(x)] - m) / sum);
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "fp32";
  else if constexpr (std::is_same_v<T, double>) return "fp64";
  else return "long double";
}

}  // namespace

template <class T>
void naive_attention(const Problem& p, std::span<const float> q, std::span<const float> k,
                     std::span<const float> v, std::span<float> out, std::span<float> weights,
                     Flaw flaw, LogitOverflow overflow) {
  validate(p, q, k, v);
  const Shape& s = p.shape;
  if (static_cast<int64_t>(out.size()) != s.out_size())
    throw InvalidInput("out: wrong number of elements");
  if (!weights.empty() && static_cast<int64_t>(weights.size()) != s.weights_size())
    throw InvalidInput("weights: wrong number of elements");

  Problem without_causal = p;
  without_causal.causal = Causal::none;
  if (flaw == Flaw::key_lengths_of_batch0 && !p.key_lengths.empty())
    std::fill(without_causal.key_lengths.begin(), without_causal.key_lengths.end(),
              p.key_lengths[0]);

  const double scale = flaw == Flaw::missing_scale ? 1.0 : p.effective_scale();
  const double tau = p.temperature;
  const T minus_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> logits(static_cast<size_t>(s.n_q * s.n_k));
  std::vector<T> a(logits.size());
  std::vector<char> ok(logits.size());
  std::vector<T> mixed(static_cast<size_t>(s.d_v));  // one row of A·V
  // Results go to these first: nothing is written when a row is rejected.
  std::vector<float> o_result(out.size()), w_result(weights.size());

  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t slice = b * s.heads + h;
      const int64_t q_base = slice * s.n_q * s.d_k;
      int64_t k_base = slice * s.n_k * s.d_k;
      int64_t v_base = slice * s.n_k * s.d_v;
      if (flaw == Flaw::wrong_head_stride) {
        k_base = slice * s.n_q * s.d_k;
        v_base = slice * s.n_q * s.d_v;
      }
      // Wrapped reads keep the wrong-stride mutant inside its buffers; the
      // other codes read in range and skip the division (most of this
      // function's time when every read paid it).
      const bool wraps = flaw == Flaw::wrong_head_stride;
      auto k_at = [&](int64_t j, int64_t t) {
        const int64_t at = k_base + j * s.d_k + t;
        return k[static_cast<size_t>(wraps ? at % s.k_size() : at)];
      };
      auto v_at = [&](int64_t j, int64_t c) {
        const int64_t at = v_base + j * s.d_v + c;
        return v[static_cast<size_t>(wraps ? at % s.v_size() : at)];
      };
      // The logit of (i, j) computed in U: dot product in reverse order, then
      // the scale, then τ.
      auto logit_in = [&]<class U>(int64_t i, int64_t j) {
        U dot = 0;
        for (int64_t t = s.d_k - 1; t >= 0; --t)
          dot += U(q[static_cast<size_t>(q_base + i * s.d_k + t)]) * U(k_at(j, t));
        const U logit = dot * U(scale);
        return flaw == Flaw::tau_multiplied ? logit * U(tau) : logit / U(tau);
      };
      auto row_name = [&](int64_t i) { return fmt::format("row [b={}][h={}][row={}]", b, h, i); };

      for (int64_t i = 0; i < s.n_q; ++i) {
        for (int64_t j = 0; j < s.n_k; ++j) {
          const size_t idx = static_cast<size_t>(i * s.n_k + j);
          ok[idx] = flawed_allowed(p, without_causal, b, h, i, j, flaw);
          // A masked key's logit is never computed, so it cannot overflow its
          // row. The mutants compute it anyway: one keeps it (the mask comes
          // after the softmax), one adds the mask as −∞ (+inf − inf is NaN).
          if (ok[idx]) logits[idx] = logit_in.template operator()<T>(i, j);
          else if (flaw == Flaw::mask_after_softmax) logits[idx] = logit_in.template operator()<T>(i, j);
          else if (flaw == Flaw::masked_overflow_nan) logits[idx] = logit_in.template operator()<T>(i, j) + minus_inf;
          else logits[idx] = minus_inf;
        }
      }

      if (flaw == Flaw::column_softmax) {  // softmax over queries, no overflow handling
        for (int64_t j = 0; j < s.n_k; ++j) {
          std::vector<T> line(static_cast<size_t>(s.n_q));
          bool any = false;
          for (int64_t i = 0; i < s.n_q; ++i) {
            line[static_cast<size_t>(i)] = logits[static_cast<size_t>(i * s.n_k + j)];
            any = any || ok[static_cast<size_t>(i * s.n_k + j)];
          }
          auto at = [&](int64_t i) -> T& { return a[static_cast<size_t>(i * s.n_k + j)]; };
          if (!any) for (int64_t i = 0; i < s.n_q; ++i) at(i) = 0;
          else softmax_line<T>(std::span<const T>(line), flaw, at);
        }
      }
      for (int64_t i = 0; i < s.n_q && flaw != Flaw::column_softmax; ++i) {
        const size_t row0 = static_cast<size_t>(i * s.n_k);
        auto at = [&](int64_t j) -> T& { return a[row0 + static_cast<size_t>(j)]; };
        bool any = false, finite = true;
        T row_max = minus_inf;
        for (int64_t j = 0; j < s.n_k; ++j) {
          if (!ok[row0 + static_cast<size_t>(j)]) continue;
          any = true;
          finite = finite && std::isfinite(logits[row0 + static_cast<size_t>(j)]);
          row_max = std::max(row_max, logits[row0 + static_cast<size_t>(j)]);
        }
        if (!any || (flaw == Flaw::overflow_zeros && row_max == -minus_inf)) {
          // Every key masked (the zero policy's row), or the mutant that
          // silently zeroes a row whose logit overflowed.
          for (int64_t j = 0; j < s.n_k; ++j) at(j) = 0;
          continue;
        }
        const std::span<const T> line(logits.data() + row0, static_cast<size_t>(s.n_k));
        if (finite) {
          softmax_line<T>(line, flaw, at);
          continue;
        }
        // A readable key's logit is not finite in T: the row is out of range
        // for T. Reject it, or recompute its logits in long double, whose range
        // holds any product of floats with any finite scale and τ.
        int64_t bad = 0;
        while (!ok[row0 + static_cast<size_t>(bad)] || std::isfinite(line[static_cast<size_t>(bad)])) ++bad;
        if (overflow == LogitOverflow::reject)
          throw Unsupported(fmt::format("{}: the logit of key {} is {} in {}; out of range for the class",
                                        row_name(i), bad, static_cast<double>(line[static_cast<size_t>(bad)]),
                                        type_name<T>()));
        std::vector<long double> wide(static_cast<size_t>(s.n_k));
        for (int64_t j = 0; j < s.n_k; ++j) {
          long double& x = wide[static_cast<size_t>(j)];
          x = ok[row0 + static_cast<size_t>(j)] ? logit_in.template operator()<long double>(i, j)
                                                 : -std::numeric_limits<long double>::infinity();
          if (ok[row0 + static_cast<size_t>(j)] && !std::isfinite(x))
            throw Unsupported(fmt::format("{}: the logit of key {} overflows even in long double", row_name(i), j));
          if (!ok[row0 + static_cast<size_t>(j)] && flaw == Flaw::masked_overflow_nan) x = line[static_cast<size_t>(j)];
        }
        softmax_line<long double>(std::span<const long double>(wide), flaw, at);
      }
      if (flaw == Flaw::mask_after_softmax)
        for (size_t idx = 0; idx < a.size(); ++idx)
          if (!ok[idx]) a[idx] = 0;
      if (flaw == Flaw::fp16_weights)
        for (T& w : a) w = T(round_to_fp16(static_cast<float>(w)));

      for (int64_t i = 0; i < s.n_q; ++i) {
        const size_t row0 = static_cast<size_t>(i * s.n_k);
        const bool peaked = flaw == Flaw::peaked_v_misaligned &&
                            *std::max_element(a.begin() + static_cast<std::ptrdiff_t>(row0),
                                              a.begin() + static_cast<std::ptrdiff_t>(row0) + s.n_k) > T(0.99);
        const bool misaligned = flaw == Flaw::v_rows_misaligned || peaked;
        auto v_row = [&](int64_t j) { return misaligned ? (j + 1) % s.n_k : j; };
        // Every column sums its terms from the last key to the first; the
        // columns advance together so that V is read row by row.
        std::fill(mixed.begin(), mixed.end(), T(0));
        for (int64_t j = s.n_k - 1; j >= 0; --j) {
          const T aj = a[row0 + static_cast<size_t>(j)];
          const int64_t jv = v_row(j);
          for (int64_t c = 0; c < s.d_v; ++c) mixed[static_cast<size_t>(c)] += aj * v_at(jv, c);
        }
        for (int64_t c = 0; c < s.d_v; ++c) {
          auto mix = [&]<class U>() {
            U acc = 0;
            for (int64_t j = s.n_k - 1; j >= 0; --j)
              acc += U(a[row0 + static_cast<size_t>(j)]) * U(v_at(v_row(j), c));
            return acc;
          };
          T acc = mixed[static_cast<size_t>(c)];
          if (!std::isfinite(acc)) {
            // Partial sums of V rows near float's maximum can overflow T; the
            // exact value lies within the largest |V|, so recompute wider and
            // keep it finite.
            const long double wide = mix.template operator()<long double>();
            const long double limit = std::numeric_limits<float>::max();
            acc = static_cast<T>(std::clamp(wide, -limit, limit));
          }
          if (flaw == Flaw::relative_error_1e3) acc *= T(1.001);
          if (flaw == Flaw::relative_error_1e4_long_rows && s.n_k >= kBlock) acc *= T(1.0001);
          o_result[static_cast<size_t>((slice * s.n_q + i) * s.d_v + c)] = static_cast<float>(acc);
        }
        if (!weights.empty())
          for (int64_t j = 0; j < s.n_k; ++j)
            w_result[static_cast<size_t>((slice * s.n_q + i) * s.n_k + j)] =
                static_cast<float>(a[row0 + static_cast<size_t>(j)]);
      }
    }
  }
  std::copy(o_result.begin(), o_result.end(), out.begin());
  std::copy(w_result.begin(), w_result.end(), weights.begin());
}

#define ATTNCHECK_NAIVE(T)                                                                            \
  template void naive_attention<T>(const Problem&, std::span<const float>, std::span<const float>, \
                                   std::span<const float>, std::span<float>, std::span<float>, Flaw, \
                                   LogitOverflow);
ATTNCHECK_NAIVE(float)
ATTNCHECK_NAIVE(double)
ATTNCHECK_NAIVE(long double)
#undef ATTNCHECK_NAIVE

}  // namespace attncheck
