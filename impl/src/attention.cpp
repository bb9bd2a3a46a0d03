// Entry points of the fused attention: validation, the worker threads, the
// diagnostic tables, and the choice of SIMD target. The kernels themselves are
// in attention-inl.h.
#include "attncheck/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <thread>

#include <unistd.h>

#include "hwy/highway.h"
#include "hwy/targets.h"
#include "kernel_args.h"

namespace attncheck {
namespace {

void require_pointer(const void* ptr, const char* name) {
  if (ptr == nullptr) throw InvalidInput(fmt::format("{}: null pointer", name));
}

// Everything attention() and attention_tables() check before touching memory.
void validate_call(const Problem& problem, const float* q, const float* k, const float* v) {
  validate_problem(problem);  // sizes are sane before spans are formed from them
  require_pointer(q, "q");
  require_pointer(k, "k");
  require_pointer(v, "v");
  const Shape& s = problem.shape;
  validate(problem, {q, static_cast<size_t>(s.q_size())}, {k, static_cast<size_t>(s.k_size())},
           {v, static_cast<size_t>(s.v_size())});
}

// validate_call() without the finiteness scan of K and V, which the decode
// path makes as it streams them (a separate pass would double its memory
// traffic). On any error the full validation runs, so that the error reported
// is the one validate_call() reports first.
void validate_call_but_kv_values(const Problem& problem, const float* q, const float* k,
                                 const float* v) {
  validate_problem(problem);
  require_pointer(q, "q");
  require_pointer(k, "k");
  require_pointer(v, "v");
  const Shape& s = problem.shape;
  const bool q_finite = detail::all_finite_values(q, static_cast<size_t>(s.q_size()));
  try {
    if (!q_finite) throw InvalidInput("Q: not finite");
    validate_empty_rows(problem);
  } catch (const InvalidInput&) {
    validate_call(problem, q, k, v);
    throw;
  }
}

// scale/τ as the single float multiplier the kernel applies to Q.
float float_multiplier(const Problem& problem) {
  const double multiplier = problem.logit_multiplier();
  const auto as_float = static_cast<float>(multiplier);
  if (!std::isfinite(as_float) || as_float == 0.0f)
    throw InvalidInput(fmt::format(
        "scale/temperature: the logit multiplier scale/τ = {} is outside the float range", multiplier));
  return as_float;
}

// The targets this binary holds and this CPU runs, best first. Read once,
// before force_target() narrows what Highway reports as supported.
const std::vector<int64_t>& available_target_bits() {
  static const std::vector<int64_t> bits = hwy::SupportedAndGeneratedTargets();
  return bits;
}

// The L1 data cache of the CPU this process runs on, bytes (0 when the system
// does not say).
long l1_data_cache_bytes() {
  static const long bytes = std::max(0L, ::sysconf(_SC_LEVEL1_DCACHE_SIZE));
  return bytes;
}

std::atomic<DecodeScoring>& forced_decode_scoring() {
  static std::atomic<DecodeScoring> scoring{DecodeScoring::automatic};
  return scoring;
}

// scale as the reference computes it: the default 1/√d_k in long double.
long double exact_scale_of(const Problem& p) {
  if (p.scale) return *p.scale;
  return 1.0L / std::sqrt(static_cast<long double>(p.shape.d_k));
}

}  // namespace

namespace detail {

void exact_row(const Problem& p, const float* q, const float* k, const float* v, int64_t b,
               int64_t h, int64_t i, long double* acc, float* out, float* lse, float* weights) {
  const Shape& s = p.shape;
  const auto nq = static_cast<size_t>(s.n_q), nk = static_cast<size_t>(s.n_k);
  const auto dk = static_cast<size_t>(s.d_k), dv = static_cast<size_t>(s.d_v);
  const auto slice = static_cast<size_t>(b * s.heads + h);
  const float* qi = q + (slice * nq + static_cast<size_t>(i)) * dk;
  const float* ks = k + slice * nk * dk;
  const float* vs = v + slice * nk * dv;
  const long double scale = exact_scale_of(p);
  const long double tau = p.temperature;
  const long double neg_inf = -std::numeric_limits<long double>::infinity();
  // The same operations each time, so the weights' pass sees the same logits. A product of floats
  // is exact in long double (x87 or quad), and a dot product of finite floats times a
  // finite scale and 1/τ (|·| < 2^2500) stays far inside its range.
  auto logit = [&](size_t j) {
    if (!allowed(p, b, h, i, static_cast<int64_t>(j))) return neg_inf;
    long double dot = 0.0L;
    for (size_t x = 0; x < dk; ++x) dot += static_cast<long double>(qi[x]) * static_cast<long double>(ks[j * dk + x]);
    return dot * scale / tau;
  };
  // One online pass (running max, rescaled sums): each dot product once, no n_k scratch.
  long double row_max = neg_inf, sum = 0.0L;
  std::fill(acc, acc + dv, 0.0L);
  for (size_t j = 0; j < nk; ++j) {
    const long double l = logit(j);
    if (l == neg_inf) continue;  // masked keys are skipped, never weighted
    if (l > row_max) {
      const long double rescale = std::exp(row_max - l);  // 0 for the first readable key
      sum *= rescale;
      for (size_t c = 0; c < dv; ++c) acc[c] *= rescale;
      row_max = l;
    }
    const long double e = std::exp(l - row_max);
    sum += e;
    for (size_t c = 0; c < dv; ++c) acc[c] += e * static_cast<long double>(vs[j * dv + c]);
  }
  if (row_max == neg_inf) {  // empty row under the zero policy
    std::fill(out, out + dv, 0.0f);
    if (lse) *lse = -std::numeric_limits<float>::infinity();
    if (weights) std::fill(weights, weights + nk, 0.0f);
    return;
  }
  for (size_t c = 0; c < dv; ++c) out[c] = static_cast<float>(acc[c] / sum);
  if (lse) *lse = static_cast<float>(row_max + std::log(sum));  // ±inf when beyond float
  if (weights)
    for (size_t j = 0; j < nk; ++j) weights[j] = static_cast<float>(std::exp(logit(j) - row_max) / sum);
}

}  // namespace detail

void attention(const Problem& problem, const float* q, const float* k, const float* v, float* out,
               const AttentionOptions& options) {
  validate_problem(problem);
  const Shape& s = problem.shape;
  const bool decode = takes_decode_path(s);
  const int64_t chunks_per_slice = (s.n_q + detail::kChunkRows - 1) / detail::kChunkRows;
  const int64_t splits_per_slice = (s.n_k + detail::kSplitKeys - 1) / detail::kSplitKeys;
  const int64_t total_items = s.batch * s.heads * (decode ? splits_per_slice : chunks_per_slice);
  // Negative threads are refused below, after K and V (as always, a bad K or V
  // is reported first); until then they count as one.
  // Counted once: std::thread::hardware_concurrency() reads /sys on every
  // call, and calls with threads = 0 took 1.39-1.49x the time at n = 128 and
  // one query row against 4096 keys, 1 head (docs/performance.md, "Per-call costs").
  static const int64_t hardware_threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  int64_t threads = options.threads == 0 ? hardware_threads : std::max<int64_t>(1, options.threads);
  threads = std::min(threads, total_items);
  // Every path checks K and V in its threads, as it reads or packs them,
  // before it writes anything (run_attention() returns false on a value that
  // is not finite).
  validate_call_but_kv_values(problem, q, k, v);
  detail::KernelArgs args;
  try {
    require_pointer(out, "out");
    if (options.threads < 0)
      throw InvalidInput(fmt::format("threads: must be >= 0 (0 = one per hardware thread), got {}",
                                     options.threads));
    args.multiplier = float_multiplier(problem);
  } catch (const InvalidInput&) {
    validate_call(problem, q, k, v);  // a bad K or V is reported first, as before
    throw;
  }
  args.problem = &problem;
  args.q = q;
  args.k = k;
  args.v = v;
  args.out = out;
  args.lse = options.lse;
  args.chunks_per_slice = chunks_per_slice;
  args.decode = decode;
  args.splits_per_slice = splits_per_slice;
  args.decode_scoring = forced_decode_scoring().load(std::memory_order_relaxed);
  args.decode_prefetch_into_l2 = decode && problem.shape.n_q <= kDecodeMaxQueryRows && l1_data_cache_bytes() > 0 &&
                                 l1_data_cache_bytes() < detail::kDecodePrefetchMinL1Bytes;
  args.total_items = total_items;

  if (!detail::run_attention(args, threads)) {
    // K or V holds a value that is not finite: name it.
    validate_call(problem, q, k, v);
    throw InvalidInput("K/V: a value is not finite");  // not reached: validate_call names it
  }
}

AttentionTables attention_tables(const Problem& problem, const float* q, const float* k,
                                 const float* v, int64_t b, int64_t h) {
  validate_call(problem, q, k, v);
  const Shape& s = problem.shape;
  if (b < 0 || b >= s.batch)
    throw InvalidInput(fmt::format("b: batch index {} outside [0, {})", b, s.batch));
  if (h < 0 || h >= s.heads)
    throw InvalidInput(fmt::format("h: head index {} outside [0, {})", h, s.heads));

  AttentionTables t;
  t.n_q = s.n_q;
  t.n_k = s.n_k;
  t.d_k = s.d_k;
  t.d_v = s.d_v;
  const auto nq = static_cast<size_t>(s.n_q), nk = static_cast<size_t>(s.n_k);
  const auto dk = static_cast<size_t>(s.d_k), dv = static_cast<size_t>(s.d_v);
  const auto slice = static_cast<size_t>(b * s.heads + h);
  t.Q.assign(q + slice * nq * dk, q + (slice + 1) * nq * dk);
  t.K.assign(k + slice * nk * dk, k + (slice + 1) * nk * dk);
  t.V.assign(v + slice * nk * dv, v + (slice + 1) * nk * dv);
  for (auto* table : {&t.R, &t.S, &t.M, &t.L, &t.A}) table->assign(nq * nk, 0.0f);
  t.O.assign(nq * dv, 0.0f);

  const auto scale = static_cast<float>(problem.effective_scale());
  const auto tau = static_cast<float>(problem.temperature);
  const long double exact_scale = exact_scale_of(problem);
  const long double exact_tau = problem.temperature;
  // Only their ratio must fit a float (attention() checks it): a scale or τ
  // beyond float, or below its normal range, gives S and L from long double.
  const bool float_factors = std::isnormal(scale) && std::isnormal(tau);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  std::vector<long double> acc(dv);
  for (size_t i = 0; i < nq; ++i) {
    const auto row = static_cast<int64_t>(i);
    float row_max = neg_inf;
    bool readable = false;
    // A row fp32 cannot hold (DESIGN.md, "Range") gets A and O from long double.
    bool exact = false;
    for (size_t j = 0; j < nk; ++j) {
      float r = 0.0f;
      for (size_t x = 0; x < dk; ++x) r += t.Q[i * dk + x] * t.K[j * dk + x];
      const size_t ij = i * nk + j;
      const bool masked = !allowed(problem, b, h, row, static_cast<int64_t>(j));
      t.M[ij] = masked ? neg_inf : 0.0f;
      if (std::isfinite(r) && float_factors) {
        t.R[ij] = r;
        t.S[ij] = r * scale;
        // Not (S + M)/τ: a masked S of +inf would give NaN.
        t.L[ij] = masked ? neg_inf : t.S[ij] / tau;
      } else {
        long double dot = r;
        if (!std::isfinite(r)) {  // overflowed (±inf, or NaN from +inf + -inf): the exact value
          dot = 0.0L;
          for (size_t x = 0; x < dk; ++x)
            dot += static_cast<long double>(t.Q[i * dk + x]) * static_cast<long double>(t.K[j * dk + x]);
          exact = exact || !masked;
        }
        t.R[ij] = static_cast<float>(dot);  // rounded: ±inf beyond float, never NaN
        t.S[ij] = static_cast<float>(dot * exact_scale);
        t.L[ij] = masked ? neg_inf : static_cast<float>(dot * exact_scale / exact_tau);
      }
      if (!masked) {
        readable = true;
        row_max = std::max(row_max, t.L[ij]);
      }
    }
    if (!readable) continue;  // empty row under the zero policy: A and O stay zero
    // A max of +inf, or of -inf with a readable key: every logit overflowed.
    exact = exact || !std::isfinite(row_max);
    float* a = t.A.data() + i * nk;
    float* o = t.O.data() + i * dv;
    if (!exact) {
      float sum = 0.0f;
      for (size_t j = 0; j < nk; ++j) sum += a[j] = std::exp(t.L[i * nk + j] - row_max);
      for (size_t j = 0; j < nk; ++j) a[j] /= sum;
      for (size_t j = 0; j < nk; ++j)
        for (size_t c = 0; c < dv; ++c) o[c] += a[j] * t.V[j * dv + c];
      // Σ a·v can overflow for values of V near the float limit.
      exact = !std::all_of(o, o + dv, [](float x) { return std::isfinite(x); });
    }
    if (exact) detail::exact_row(problem, q, k, v, b, h, row, acc.data(), o, nullptr, a);
  }
  return t;
}

std::vector<std::string> available_targets() {
  std::vector<std::string> names;
  for (int64_t bit : available_target_bits()) names.emplace_back(hwy::TargetName(bit));
  return names;
}

std::string active_target() { return hwy::TargetName(detail::dispatched_target()); }

void force_target(const std::string& name) {
  const auto& bits = available_target_bits();
  if (name.empty()) {
    hwy::SetSupportedTargetsForTest(0);  // back to what the CPU supports
    return;
  }
  for (int64_t bit : bits) {
    if (name == hwy::TargetName(bit)) {
      hwy::SetSupportedTargetsForTest(bit);
      return;
    }
  }
  throw InvalidInput(fmt::format("--target: unknown or unsupported SIMD target '{}' (available: {})",
                                 name, fmt::join(available_targets(), ", ")));
}

void force_decode_scoring(DecodeScoring scoring) {
  forced_decode_scoring().store(scoring, std::memory_order_relaxed);
}

}  // namespace attncheck
