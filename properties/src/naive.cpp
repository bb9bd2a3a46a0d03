#include "attncheck/naive.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attncheck {

std::vector<std::pair<Flaw, std::string>> all_flaws() {
  return {{Flaw::column_softmax, "column_softmax"},
          {Flaw::missing_scale, "missing_scale"},
          {Flaw::mask_after_softmax, "mask_after_softmax"},
          {Flaw::no_max_subtraction, "no_max_subtraction"},
          {Flaw::v_rows_misaligned, "v_rows_misaligned"},
          {Flaw::causal_off_by_one, "causal_off_by_one"},
          {Flaw::tail_keys_dropped, "tail_keys_dropped"},
          {Flaw::wrong_head_stride, "wrong_head_stride"},
          {Flaw::tau_multiplied, "tau_multiplied"},
          {Flaw::key_lengths_of_batch0, "key_lengths_of_batch0"},
          {Flaw::relative_error_1e3, "relative_error_1e3"},
          {Flaw::fp16_weights, "fp16_weights"}};
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

namespace {

// Whether query i may read key j, with the flaws that change masking.
bool flawed_allowed(const Problem& p, const Problem& without_causal, int64_t b, int64_t h,
                    int64_t i, int64_t j, Flaw flaw) {
  const Shape& s = p.shape;
  if (flaw == Flaw::tail_keys_dropped && s.n_k > 16 && j >= s.n_k - s.n_k % 16) return false;
  int64_t causal_limit = s.n_k;
  if (p.causal == Causal::top_left) causal_limit = i + 1;
  if (p.causal == Causal::bottom_right) causal_limit = i + 1 + (s.n_k - s.n_q);
  if (flaw == Flaw::causal_off_by_one && p.causal != Causal::none) ++causal_limit;
  if (j >= causal_limit) return false;
  return allowed(without_causal, b, h, i, j);
}

}  // namespace

template <class T>
void naive_attention(const Problem& p, std::span<const float> q, std::span<const float> k,
                     std::span<const float> v, std::span<float> out, std::span<float> weights,
                     Flaw flaw) {
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

  const T scale = flaw == Flaw::missing_scale ? T(1) : T(p.effective_scale());
  const T tau = T(p.temperature);
  const T minus_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> logits(static_cast<size_t>(s.n_q * s.n_k));
  std::vector<T> a(logits.size());
  std::vector<char> ok(logits.size());

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
      // Wrapped reads keep the wrong-stride mutant inside its buffers.
      auto K = [&](int64_t j, int64_t t) { return T(k[static_cast<size_t>((k_base + j * s.d_k + t) % s.k_size())]); };
      auto V = [&](int64_t j, int64_t c) { return T(v[static_cast<size_t>((v_base + j * s.d_v + c) % s.v_size())]); };

      for (int64_t i = 0; i < s.n_q; ++i) {
        for (int64_t j = 0; j < s.n_k; ++j) {
          T dot = 0;
          for (int64_t t = s.d_k - 1; t >= 0; --t) dot += T(q[static_cast<size_t>(q_base + i * s.d_k + t)]) * K(j, t);
          T logit = dot * scale;
          logit = flaw == Flaw::tau_multiplied ? logit * tau : logit / tau;
          const size_t idx = static_cast<size_t>(i * s.n_k + j);
          ok[idx] = flawed_allowed(p, without_causal, b, h, i, j, flaw);
          logits[idx] = (ok[idx] || flaw == Flaw::mask_after_softmax) ? logit : minus_inf;
        }
      }

      // Softmax along rows (or, for the column mutant, along columns).
      const bool by_column = flaw == Flaw::column_softmax;
      const int64_t lines = by_column ? s.n_k : s.n_q, length = by_column ? s.n_q : s.n_k;
      auto at = [&](int64_t line, int64_t pos) {
        return static_cast<size_t>(by_column ? pos * s.n_k + line : line * s.n_k + pos);
      };
      for (int64_t line = 0; line < lines; ++line) {
        T m = minus_inf;
        for (int64_t x = 0; x < length; ++x) m = std::max(m, logits[at(line, x)]);
        if (m == minus_inf) {  // every key masked: the zero policy's row
          for (int64_t x = 0; x < length; ++x) a[at(line, x)] = 0;
          continue;
        }
        if (flaw == Flaw::no_max_subtraction) m = 0;
        T sum = 0;
        for (int64_t x = length - 1; x >= 0; --x) {
          const T e = std::exp(logits[at(line, x)] - m);
          a[at(line, x)] = e;
          sum += e;
        }
        for (int64_t x = 0; x < length; ++x) a[at(line, x)] /= sum;
      }
      if (flaw == Flaw::mask_after_softmax)
        for (size_t idx = 0; idx < a.size(); ++idx)
          if (!ok[idx]) a[idx] = 0;
      if (flaw == Flaw::fp16_weights)
        for (T& w : a) w = T(round_to_fp16(static_cast<float>(w)));

      for (int64_t i = 0; i < s.n_q; ++i) {
        for (int64_t c = 0; c < s.d_v; ++c) {
          T acc = 0;
          for (int64_t j = s.n_k - 1; j >= 0; --j) {
            const int64_t row = flaw == Flaw::v_rows_misaligned ? (j + 1) % s.n_k : j;
            acc += a[static_cast<size_t>(i * s.n_k + j)] * V(row, c);
          }
          if (flaw == Flaw::relative_error_1e3) acc *= T(1.001);
          out[static_cast<size_t>((slice * s.n_q + i) * s.d_v + c)] = static_cast<float>(acc);
        }
        if (!weights.empty())
          for (int64_t j = 0; j < s.n_k; ++j)
            weights[static_cast<size_t>((slice * s.n_q + i) * s.n_k + j)] =
                static_cast<float>(a[static_cast<size_t>(i * s.n_k + j)]);
      }
    }
  }
}

template void naive_attention<float>(const Problem&, std::span<const float>, std::span<const float>,
                                     std::span<const float>, std::span<float>, std::span<float>, Flaw);
template void naive_attention<double>(const Problem&, std::span<const float>, std::span<const float>,
                                      std::span<const float>, std::span<float>, std::span<float>, Flaw);
template void naive_attention<long double>(const Problem&, std::span<const float>,
                                           std::span<const float>, std::span<const float>,
                                           std::span<float>, std::span<float>, Flaw);

}  // namespace attncheck
