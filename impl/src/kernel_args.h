// Plain data handed from the dispatching entry point (attention.cpp) to the
// per-target kernels (attention-inl.h). No SIMD types here: this header is
// compiled once, the kernels once per instruction set.
#pragma once

#include <atomic>
#include <cstdint>

#include "attncheck/problem.h"

namespace attncheck::detail {

/// Query rows per work item. Fixed (never derived from the thread count), so
/// every row is computed by the same instruction sequence however the items
/// are spread over threads: the result is bitwise identical for any count.
inline constexpr int64_t kChunkRows = 64;

struct KernelArgs {
  const Problem* problem = nullptr;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  float* lse = nullptr;            ///< optional, [batch][heads][n_q]
  float multiplier = 1.0f;         ///< scale / τ, applied once to each dot product
  int64_t chunks_per_slice = 0;    ///< ceil(n_q / kChunkRows)
  int64_t total_items = 0;         ///< batch · heads · chunks_per_slice
};

/// Runs work items (b, h, query chunk) taken from `next` until none are left,
/// on the dispatched target. Called by every worker thread.
void run_attention_worker(const KernelArgs& args, std::atomic<int64_t>& next);

/// The HWY_TARGET bit of the kernel that HWY_DYNAMIC_DISPATCH selects now.
int64_t dispatched_target();

}  // namespace attncheck::detail
