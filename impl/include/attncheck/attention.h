// The optimized fused attention: public entry points only; the SIMD kernels
// live in impl/src/*-inl.h, compiled once per instruction set and chosen at run
// time (Highway dynamic dispatch).
#pragma once

#include <string>
#include <vector>

#include "attncheck/problem.h"

namespace attncheck {

/// Calls with at most kDecodeMaxQueryRows query rows take the decode path (K
/// and V streamed once, in place; see attention()), and so do calls with up to
/// kDecodeWideMaxQueryRows against at least kDecodeWideMinKeys keys; the others
/// take the tiled path. 33-64 rows against long rows: the decode path took
/// 0.83-0.96x the tiled path's time against n_k = 16384 (AVX-512 and AVX2),
/// and about the same at n_k = 512-1024; against 64-128 keys 1.0-1.3x
/// (docs/performance-decode.md, "33 to 64 query rows").
inline constexpr int64_t kDecodeMaxQueryRows = 32;
inline constexpr int64_t kDecodeWideMaxQueryRows = 64;
inline constexpr int64_t kDecodeWideMinKeys = 1024;

/// Whether attention() computes a call of this shape on the decode path.
inline bool takes_decode_path(const Shape& shape) {
  return shape.n_q <= kDecodeMaxQueryRows ||
         (shape.n_q <= kDecodeWideMaxQueryRows && shape.n_k >= kDecodeWideMinKeys);
}

struct AttentionOptions {
  /// Worker threads over (batch, head, query block), or over (batch, head,
  /// block of 1024 keys) on the decode path (takes_decode_path); 0 means one per hardware thread. The
  /// result is bitwise identical whatever the count.
  int threads = 1;
  /// Optional output, [batch][heads][n_q]: each row's natural log-sum-exp of
  /// its logits L. Empty rows (zero policy) get -inf.
  float* lse = nullptr;
};

/// O = softmax((Q Kᵀ · scale + M) / τ) V, fused and tiled with an online softmax.
///
/// Shapes (contiguous row-major float32, see problem.h):
///   q   [batch][heads][n_q][d_k]
///   k   [batch][heads][n_k][d_k]
///   v   [batch][heads][n_k][d_v]
///   out [batch][heads][n_q][d_v]
/// Validates everything first (attncheck::validate) and throws InvalidInput
/// without writing `out` or `lse` on bad input.
///
/// Rows fp32 cannot hold (DESIGN.md, "Range": a dot product or logit beyond
/// float although every input is finite, or an overflowing Σ p·v) are found by
/// cheap per-row tests and recomputed in long double, never left zero or NaN;
/// a masked key never takes part, however large its logit. Their lse is ±inf
/// when the exact value is beyond float.
///
/// Decode and short queries (takes_decode_path): K and V are read once, in place (no
/// packing), the keys of each slice split into blocks of 1024 that the threads
/// share (so two threads help even with one head), each block's partial
/// softmax merged with the others by log-sum-exp in block order — a split that
/// does not depend on the thread count, hence the same bits for any count.
/// K and V are checked for non-finite values while they are streamed; a bad
/// value still throws InvalidInput naming it, with nothing written. Extra
/// memory: n_q · (d_v + 2) floats per block of 1024 keys, plus O(16 · 64) per thread.
///
/// Otherwise, extra memory: K of one (batch, head) slice packed as Kᵀ in panels of 64
/// keys (n_k rounded up to 64, times d_k floats; V too when d_v is not a
/// multiple of the SIMD width), shared by the threads — a few slices at once
/// only when sequences are short; a single slice whose Kᵀ is at most 2 MiB is
/// packed by each thread for itself — plus O(64 · (d_k + d_v)) per thread.
void attention(const Problem& problem, const float* q, const float* k, const float* v, float* out,
               const AttentionOptions& options = {});

/// The nine tables of one (batch, head) slice, each row-major, for diagnosis.
/// Q n_q×d_k, K n_k×d_k, V n_k×d_v, R = QKᵀ, S = R·scale, M (0 or -inf),
/// L = (S + M)/τ, A = softmax rows of L, O = A V; R..A are n_q×n_k.
struct AttentionTables {
  int64_t n_q = 0, n_k = 0, d_k = 0, d_v = 0;
  std::vector<float> Q, K, V, R, S, M, L, A, O;
};

/// Computes the nine tables of slice (b, h) in fp32, materialising every
/// n_q×n_k matrix (slow; for diagnosis only). Same validation as attention().
/// Where fp32 overflows, R, S and L hold the exact value rounded to float
/// (±inf beyond its range, never NaN), L is -inf wherever M is, and the rows of
/// A and O that fp32 cannot compute come from long double, as in attention().
AttentionTables attention_tables(const Problem& problem, const float* q, const float* k,
                                 const float* v, int64_t b, int64_t h);

/// SIMD targets compiled into this binary and supported by this CPU, best first
/// (Highway names, e.g. "AVX3", "AVX2", "SSE4", "EMU128").
std::vector<std::string> available_targets();
/// The target attention() dispatches to now.
std::string active_target();
/// Restricts dispatch to the named target (one of available_targets());
/// throws InvalidInput naming the option for an unknown or unsupported name.
/// An empty name restores the best target. Process-wide: call it between
/// attention() calls, not while one runs on another thread.
void force_target(const std::string& name);

/// How the decode path (takes_decode_path) computes its dot products: `automatic`
/// picks by SIMD target and row count (docs/performance-decode.md); the others
/// force one method for every row count, so that each runs, and can be tested
/// and timed, on any machine: one key at a time along d, four keys at a time
/// along d, or the query rows in the lanes. The portable scalar target always
/// scores one key at a time. Process-wide, like force_target().
enum class DecodeScoring { automatic, key_by_key, four_keys, rows_in_lanes };
void force_decode_scoring(DecodeScoring scoring);

}  // namespace attncheck
