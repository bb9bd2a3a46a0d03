// Entry points of the fused attention: validation, the worker threads, the
// diagnostic tables, and the choice of SIMD target. The kernels themselves are
// in attention-inl.h.
#include "attncheck/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <thread>

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

}  // namespace

void attention(const Problem& problem, const float* q, const float* k, const float* v, float* out,
               const AttentionOptions& options) {
  validate_call(problem, q, k, v);
  require_pointer(out, "out");
  if (options.threads < 0)
    throw InvalidInput(fmt::format("threads: must be >= 0 (0 = one per hardware thread), got {}",
                                   options.threads));
  const Shape& s = problem.shape;
  detail::KernelArgs args;
  args.problem = &problem;
  args.q = q;
  args.k = k;
  args.v = v;
  args.out = out;
  args.lse = options.lse;
  args.multiplier = float_multiplier(problem);
  args.chunks_per_slice = (s.n_q + detail::kChunkRows - 1) / detail::kChunkRows;
  args.total_items = s.batch * s.heads * args.chunks_per_slice;

  int64_t threads = options.threads;
  if (threads == 0) threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  threads = std::min(threads, args.total_items);

  detail::run_attention(args, threads);
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
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < nq; ++i) {
    float row_max = neg_inf;
    for (size_t j = 0; j < nk; ++j) {
      float r = 0.0f;
      for (size_t x = 0; x < dk; ++x) r += t.Q[i * dk + x] * t.K[j * dk + x];
      const size_t ij = i * nk + j;
      t.R[ij] = r;
      t.S[ij] = r * scale;
      t.M[ij] = allowed(problem, b, h, static_cast<int64_t>(i), static_cast<int64_t>(j)) ? 0.0f : neg_inf;
      t.L[ij] = (t.S[ij] + t.M[ij]) / tau;
      row_max = std::max(row_max, t.L[ij]);
    }
    if (row_max == neg_inf) continue;  // empty row under the zero policy: A and O stay zero
    float sum = 0.0f;
    for (size_t j = 0; j < nk; ++j) sum += t.A[i * nk + j] = std::exp(t.L[i * nk + j] - row_max);
    for (size_t j = 0; j < nk; ++j) t.A[i * nk + j] /= sum;
    for (size_t j = 0; j < nk; ++j)
      for (size_t c = 0; c < dv; ++c) t.O[i * dv + c] += t.A[i * nk + j] * t.V[j * dv + c];
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

}  // namespace attncheck
