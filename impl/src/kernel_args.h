// Plain data handed from the dispatching entry point (attention.cpp) to the
// per-target kernels (attention-inl.h, decode-inl.h). No SIMD types here:
// this header is compiled once, the kernels once per instruction set.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attncheck/attention.h"
#include "attncheck/problem.h"

namespace attncheck::detail {

/// Query rows per work item (a chunk). Fixed (never derived from the thread
/// count), so every row is computed by the same instruction sequence however
/// the chunks are spread over threads: the result is bitwise identical for any count.
inline constexpr int64_t kChunkRows = 64;

/// Tiled path: calls with at most this many query rows (a few chunks per
/// slice) stream K: each chunk packs every Kᵀ panel itself right before it
/// uses it, into a buffer of its own that stays in cache, instead of a first
/// phase packing whole slices through memory. They check K and V for values
/// that are not finite as they read them (attention() leaves that check to
/// the kernels, as for the decode path) and write the output only once every
/// value has been read.
inline constexpr int64_t kStreamMaxRows = 8 * kChunkRows;

/// Kᵀ of one slice (n_k · d_k floats) small enough to pack once, in a first
/// phase, when a call up to kStreamMaxRows rows has too few slices for every
/// thread to stream whole ones: streaming, each of its 64-row chunks would
/// repack every panel. 256 KiB: square n = 128–512, 1 head, 2 threads took
/// 0.77–0.94× the time packed; with Kᵀ of 512 KiB packing was 0.87–1.03×,
/// of 2–8 MiB 0.99–1.04× (docs/performance.md, "Few slices on many threads").
inline constexpr int64_t kPackOnceMaxFloats = 64 * 1024;

/// Whether every one of `threads` threads can take whole slices (one thread,
/// or two slices or more per thread), so that a streamed chunk is a slice.
inline bool whole_slices_per_thread(const Shape& s, int64_t threads) {
  return threads == 1 || s.batch * s.heads >= 2 * threads;
}

/// Kᵀ of one slice (n_k · d_k floats) small enough for every thread to pack a
/// copy of its own when a tiled call is one slice on several threads: 2 MiB.
/// Shared, the panels were written by one core and read by the other, with a
/// barrier between; own copies took 0.80–0.95× the time on 2 threads at
/// n = 256–1024 and n_q = 256–512 against n_k = 1024–4096, the same at
/// 8192 × 8192 (2 MiB), and 1.12× against n_k = 16384 (8 MiB, packed through
/// memory) (docs/performance.md, "One slice on two threads: a Kᵀ for each thread").
inline constexpr int64_t kPackPerThreadMaxFloats = 512 * 1024;

/// Whether a tiled call is one slice whose Kᵀ every thread packs for itself.
inline bool packs_per_thread(const Shape& s, int64_t threads) {
  return s.batch * s.heads == 1 && threads > 1 && s.n_k * s.d_k <= kPackPerThreadMaxFloats;
}

/// Whether a tiled call streams K and V (RunStreamed: each chunk packs its
/// own panels and checks the values as it reads them) on `threads` threads,
/// rather than packing groups of slices first (RunTiled).
inline bool streams_kv(const Shape& s, int64_t threads) {
  if (s.n_q > kStreamMaxRows) return false;
  return whole_slices_per_thread(s, threads) || s.n_k * s.d_k > kPackOnceMaxFloats;
}

/// Decode path (decode-inl.h, RunDecode): K and V streamed once, row-major,
/// without packing Kᵀ, for at most this many query rows. Which calls take it
/// is attncheck::takes_decode_path: up to 32 rows always (on AVX2 the rows in
/// the lanes took 0.71–0.95× the streamed tiled path's time for 17–32 rows,
/// which pay for two whole tiles of 16 there), up to 64 against long rows
/// (docs/performance-decode.md).
inline constexpr int64_t kDecodeMaxRows = kDecodeWideMaxQueryRows;
/// Keys per split of the decode path: each (slice, split) is one work item
/// whose partial (max, sum, output) is merged with the others of its slice in
/// split order. Fixed (never derived from the thread count), so the result is
/// bitwise identical for any count, and long rows of one head still spread
/// over several threads.
inline constexpr int64_t kSplitKeys = 1024;

/// The smallest L1 data cache into which the decode path fetches ahead for up
/// to kDecodeMaxQueryRows rows; with a smaller one it fetches into L2
/// (KernelArgs::decode_prefetch_into_l2). On the Zen 4 VM (32 KiB) L2 took
/// 0.65-0.80x the time of L1 at 4-16 rows, 0.94x at 32, 1.02-1.04x at 48-64
/// (d = 128, 16384 keys); on the Zen 5 VM (48 KiB) L2 took 1.02-1.28x at 4-16
/// (docs/performance-decode.md, "A 32 KiB L1: fetch ahead into L2").
inline constexpr long kDecodePrefetchMinL1Bytes = 48 * 1024;

struct KernelArgs {
  const Problem* problem = nullptr;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  float* lse = nullptr;            ///< optional, [batch][heads][n_q]
  float multiplier = 1.0f;         ///< scale / τ, applied once to each dot product
  int64_t chunks_per_slice = 0;    ///< ceil(n_q / kChunkRows)
  bool decode = false;             ///< takes_decode_path: the decode path
  int64_t splits_per_slice = 0;    ///< decode: ceil(n_k / kSplitKeys)
  DecodeScoring decode_scoring = DecodeScoring::automatic;  ///< decode: force_decode_scoring()
  /// decode: fetch ahead into L2 rather than L1 (up to kDecodeMaxQueryRows
  /// rows with an L1 data cache below kDecodePrefetchMinL1Bytes, which the
  /// next block's keys, 16-32 KiB at d = 64-128, would fill).
  bool decode_prefetch_into_l2 = false;
  /// batch · heads · chunks_per_slice, or batch · heads · splits_per_slice (decode)
  int64_t total_items = 0;
};

/// Query row i of slice (b, h) in long double, for a row fp32 cannot hold (a
/// dot product or logit beyond float, or an output sum that overflows): its
/// range holds any dot product of finite floats times any finite scale/τ, so
/// the row is computed, not zeroed. q, k, v are the whole tensors; writes
/// out[0 .. d_v), and *lse and weights[0 .. n_k) when not null. acc holds d_v
/// values (scratch, so that a worker thread never allocates).
void exact_row(const Problem& p, const float* q, const float* k, const float* v, int64_t b,
               int64_t h, int64_t i, long double* acc, float* out, float* lse, float* weights);

/// Computes the whole call on the dispatched target with `threads` threads
/// (the caller's included; at least 1, at most total_items). The decode path
/// validates K and V as it streams them (the caller checked everything else)
/// and returns false, having written nothing, when one holds a value that is
/// not finite; the tiled path expects them validated and returns true.
bool run_attention(const KernelArgs& args, int64_t threads);

/// The HWY_TARGET bit of the kernel that HWY_DYNAMIC_DISPATCH selects now.
int64_t dispatched_target();

/// Whether x[0 .. count) are all finite, on the dispatched target.
bool all_finite_values(const float* x, size_t count);

/// out[i] = the kernels' softmax exp (SoftmaxExp) of x[i] on the dispatched
/// target, for tests of its accuracy.
void softmax_exp(const float* x, float* out, size_t count);

/// The same through SoftmaxExpBlock (four vectors at a time, the rest one by
/// one), which must give softmax_exp's bits.
void softmax_exp_blocks(const float* x, float* out, size_t count);

}  // namespace attncheck::detail
