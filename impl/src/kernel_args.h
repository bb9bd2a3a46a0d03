// Plain data handed from the dispatching entry point (attention.cpp) to the
// per-target kernels (attention-inl.h). No SIMD types here: this header is
// compiled once, the kernels once per instruction set.
#pragma once

#include <cstdint>

#include "attncheck/problem.h"

namespace attncheck::detail {

/// Query rows per work item (a chunk). Fixed (never derived from the thread
/// count), so every row is computed by the same instruction sequence however
/// the chunks are spread over threads: the result is bitwise identical for any count.
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

/// Computes the whole call on the dispatched target with `threads` threads
/// (the caller's included; at least 1, at most total_items).
void run_attention(const KernelArgs& args, int64_t threads);

/// The HWY_TARGET bit of the kernel that HWY_DYNAMIC_DISPATCH selects now.
int64_t dispatched_target();

}  // namespace attncheck::detail
