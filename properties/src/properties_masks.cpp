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

Outcome check_mask_zero(Implementation& impl, const Case& c, int threads) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  auto rng = aux_rng(c);
  // Per slice, a pivot row; every key it cannot read gets K and V rows of huge
  // values, scaled to the class (fp32: 1e30; fp16: a quarter of 65504).
  const double largest = class_largest_input(impl.precision());
  const double huge = std::min(1e30, largest / 4);
  // Half the cases make the pivot's masked logits overflow the class (DESIGN.md
  // "Range": a masked key never influences its row, even then): each replaced
  // K row is ±largest/2 with the signs of the pivot's query, so the logit is
  // largest/2·Σ|q|·|scale/τ|. The other half keep them finite.
  const bool overflow = rng() % 2 == 0;
  Case changed = c;
  std::vector<std::vector<char>> replaced(static_cast<size_t>(s.batch * s.heads), std::vector<char>(static_cast<size_t>(s.n_k), 0));
  float qmax = 0;
  for (float x : c.q) qmax = std::max(qmax, std::fabs(x));
  const double mult = std::fabs(p.logit_multiplier());
  const float kfinite = static_cast<float>(std::min(huge, huge / (qmax * static_cast<double>(s.d_k) * mult + 1)));
  const float kover = static_cast<float>(largest / 2);
  const float vbig = static_cast<float>(huge);
  bool any = false;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t slice = b * s.heads + h;
      const int64_t pivot = static_cast<int64_t>(rng() % static_cast<uint64_t>(s.n_q));
      const float* q = c.q.data() + (slice * s.n_q + pivot) * s.d_k;
      // Overflowing keys that another row reads take that row beyond the class's
      // range, where an implementation may decline the whole case: prefer the
      // keys no row reads (key padding, a top-left causal mask with n_k > n_q).
      std::vector<char> no_reader(static_cast<size_t>(s.n_k), 1);
      bool any_unread = false;
      if (overflow) {
        for (int64_t j = 0; j < s.n_k; ++j) {
          for (int64_t i = 0; i < s.n_q && no_reader[static_cast<size_t>(j)]; ++i)
            if (allowed(p, b, h, i, j)) no_reader[static_cast<size_t>(j)] = 0;
          any_unread = any_unread || no_reader[static_cast<size_t>(j)];
        }
      }
      for (int64_t j = 0; j < s.n_k; ++j) {
        if (allowed(p, b, h, pivot, j) || (any_unread && !no_reader[static_cast<size_t>(j)])) continue;
        any = true;
        replaced[static_cast<size_t>(slice)][static_cast<size_t>(j)] = 1;
        for (int64_t t = 0; t < s.d_k; ++t)
          changed.k[static_cast<size_t>((slice * s.n_k + j) * s.d_k + t)] =
              overflow ? std::copysign(kover, q[t]) : (t % 2 ? -kfinite : kfinite);
        for (int64_t t = 0; t < s.d_v; ++t)
          changed.v[static_cast<size_t>((slice * s.n_k + j) * s.d_v + t)] = (t % 2 ? -vbig : vbig);
      }
    }
  if (!any) return discarded("no masked key");
  const bool w = impl.capabilities().weights;
  const Run r1 = run_implementation(impl, c, w, threads);
  // Rows that read a replaced key may leave the class's range (overflowing
  // logits, huge outputs): an implementation may decline the changed case then.
  Outcome declined;
  const std::optional<Run> r2 = run_derived(impl, c, changed, w, threads, declined);
  if (!r2) return declined;
  for (size_t idx = 0; idx < r1.weights.size(); ++idx) {
    const int64_t j = static_cast<int64_t>(idx) % s.n_k, i = static_cast<int64_t>(idx) / s.n_k % s.n_q;
    const int64_t slice = static_cast<int64_t>(idx) / (s.n_k * s.n_q);
    if (!allowed(p, slice / s.heads, slice % s.heads, i, j) && (r1.weights[idx] != 0 || r2->weights[idx] != 0))
      return failed(fmt::format("masked weight A{} is {:.9g}, not exactly 0{}",
                                index_name(s, s.n_q, s.n_k, static_cast<int64_t>(idx)),
                                r1.weights[idx] != 0 ? r1.weights[idx] : r2->weights[idx],
                                r1.weights[idx] != 0 ? "" : " once masked keys were replaced by huge ones"),
                    slice / s.heads, slice % s.heads);
  }
  auto unaffected = [&](int64_t b, int64_t h, int64_t i) {
    const auto& rep = replaced[static_cast<size_t>(b * s.heads + h)];
    for (int64_t j = 0; j < s.n_k; ++j)
      if (rep[static_cast<size_t>(j)] && allowed(p, b, h, i, j)) return false;
    return true;
  };
  const std::string what =
      overflow ? fmt::format("replacing masked keys' K rows with ±{:.3g} (their logits overflow) and V rows with "
                             "±{:.3g}: O", kover, vbig)
               : fmt::format("replacing masked keys' K rows with ±{:.3g} and V rows with ±{:.3g}: O", kfinite, vbig);
  Outcome o = rows_identical(r1.out, r2->out, s, s.d_v, unaffected, what);
  if (o.ok && !o.discard) o.worst_ratio.reset();
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
  // With huge queries the new keys' logits may leave the class's range.
  Outcome declined;
  const std::optional<Run> r2 = run_derived(impl, c, changed, w, threads, declined);
  if (!r2) return declined;
  auto before_cut = [&](int64_t b, int64_t, int64_t i) { return key_limit(p, b, i) <= cut; };
  const std::string what = fmt::format("with keys {}..{} replaced: O", cut, s.n_k - 1);
  Outcome o = rows_identical(r1.out, r2->out, s, s.d_v, before_cut, what);
  if (o.ok && !o.discard && w) o = rows_identical(r1.weights, r2->weights, s, s.n_k, before_cut, "A");
  if (o.ok) o.worst_ratio.reset();
  return o;
}

}  // namespace attncheck::props
