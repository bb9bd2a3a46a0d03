// Per-target kernels of the decode path (n_q <= kDecodeMaxRows). Included
// after attention-inl.h, whose kernels, layout and threads it shares, by
// attention_kernels.cpp once per instruction set (the include guard toggles
// with HWY_TARGET_TOGGLE).

#if defined(ATTNCHECK_IMPL_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNCHECK_IMPL_DECODE_INL_H_
#undef ATTNCHECK_IMPL_DECODE_INL_H_
#else
#define ATTNCHECK_IMPL_DECODE_INL_H_
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "attention-inl.h"
#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernel_args.h"

HWY_BEFORE_NAMESPACE();
namespace attncheck::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Decode path: n_q <= kDecodeMaxRows (one query row with a KV cache, or a few).
// Such calls are memory-bound: each key is read once and meets only a few query
// rows, so packing Kᵀ (a transposed copy of every key) would cost more than the
// attention itself. Here K and V are streamed once, row-major, straight from
// the caller's tensors:
//   - the keys of each slice are cut into splits of kSplitKeys; one work item
//     is (slice, split) and computes, for every query row, the partial running
//     max m, sum l and unnormalised output o over its keys (blocks of
//     kPanelKeys: dot products along d, masks, online softmax, P · V);
//   - after a barrier the partials of each slice are merged in split order
//     (log-sum-exp: M = max m_s, L = Σ l_s·e^(m_s − M), O = Σ o_s·e^(m_s − M)).
// The splits do not depend on the thread count and the merge order is fixed,
// so the result is bitwise identical for any count, and two threads help even
// with one head. Rows out of fp32's range go to exact_row as in ProcessChunk.

// Above kColumnsMinRows query rows the decode path works with the lanes over
// rows (BlockInLanes: scores and softmax on transposed blocks, P · V on
// them or by rows, pv_in_lanes_); up to it, it scores along d one key at a
// time (DotFourRows, DotRow). Four keys at a time (ScoreFourKeys) runs only
// when forced (DecodeScoring::four_keys): on the AMD EPYC Zen 5 VM, with the
// lines fetched ahead into L1, it took 1.06-1.18x the time of one key at a
// time at 5 to 8 rows against memory (n_k = 16384 and 65536, d = 64 and 128)
// and 1.11-1.24x that of the lanes over rows, which from 6 rows took
// 0.84-0.97x the time of one key at a time on 1 and 2 threads (5 rows
// 0.96-1.06x; in cache, 4-8 MiB of K and V, 1.02-1.09x); earlier code on the
// Zen 4 VM had preferred four keys at 5 to 8 rows and on the Intel AVX-512 VM
// one key at a time (docs/performance-decode.md, "Scoring methods from 5
// rows"). With 16 vector registers (kSixteenVectorRegisters) ScoreFourKeys' 16
// accumulators spill and it took 1.4–2× as long as one key at a time. With
// vectors of 8 (AVX2) the lanes over rows overtook one key at a time from 13
// or 14 rows in earlier code; on the AMD EPYC Zen 3 VM (2026-12-07) they took
// 0.79–0.92× its time at 8 to 12 rows against memory (d = 128, 1 and 2
// threads; d = 64 0.98–1.04×) and 0.85–0.87× in cache, but 0.91–1.15× at 6
// rows and 1.01–1.03× at 5, so AVX2 takes them from 8 rows. With vectors of 4
// (SSE4) they took 1.17–1.23× its time at 13 rows and 0.99–1.03× at 16,
// so those targets keep one key at a time (docs/performance-decode.md).
constexpr size_t kColumnsMinRows =
    !kSixteenVectorRegisters ? 5 : hn::MaxLanes(DF()) >= 8 ? 7 : static_cast<size_t>(kDecodeMaxRows);
// Accumulators per register block with the lanes over rows (ScoreKeysInLanes,
// AccumulateInLanes): with 16 registers, 12 leave room for two vectors of
// rows and a broadcast.
constexpr size_t kColumnBlock = kSixteenVectorRegisters ? 12 : 24;
// With vectors of 16 rows (AVX-512), 33 to 64 rows take their vectors of rows
// four or three at a time, in scores and in P · V (4 × 6 and 3 × 8
// accumulators: 0.42 and 0.46 vectors loaded per FMA, against 0.58 for two
// vectors by 12 keys or columns), then in pairs. On the AMD EPYC Zen 5 VM,
// against pairs only: 0.91-0.94x the time at 48 rows, 0.94-0.99x at 56-64
// (n_k = 1024-16384, d = 64 and 128, 1 and 2 threads), the same bits
// (docs/performance-decode.md, "33 to 64 rows: four or three vectors of rows
// at a time"). The decode path with them at 96-256 rows took 0.99-1.11x the
// streamed tiled path's time, so the 64-row limit stays.
constexpr bool kWideRowBlocks = hn::MaxLanes(DF()) == 16 && !kSixteenVectorRegisters;

// Terms along d (keys in P · V) per prefetch step with the lanes over rows
// (ScoreKeysInLanes, OutputBlock). A step is a few instructions and a branch
// beside a term's 12 FMAs and 8 loads; on the AMD EPYC Zen 3 VM (AVX2, 16
// registers) one step per four terms took 0.90-0.98x the time on 1 thread at
// 8-64 rows against 16384 keys (d = 128 and 64, 8 heads), 0.98x in cache, and
// on 2 threads 0.92x at 16 rows, 0.95x at 64, 1.05x at 8 (noise of ±30 % there;
// docs/performance-decode.md, "Prefetch steps every four terms"). Untried with
// 32 registers, which keep a step a term.
constexpr size_t kTermsPerStep = kSixteenVectorRegisters ? 4 : 1;

// The largest power of two below n (0 for n <= 1): the register blocks of the
// rest after whole blocks of n take each such power at most once.
constexpr size_t PowerOfTwoBelow(size_t n) {
  size_t p = 1;
  while (2 * p < n) p *= 2;
  return n <= 1 ? 0 : p;
}

// Σ_x q[x]·k[x]: vectors over x (four accumulators), the rest one by one.
// q is padded to whole vectors and aligned; k is a row of the caller's K.
HWY_INLINE float DotRow(DF d, const float* HWY_RESTRICT q, const float* HWY_RESTRICT k, size_t dk) {
  const size_t N = hn::Lanes(d);
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t x = 0;
  for (; x + 4 * N <= dk; x += 4 * N) {
    a0 = hn::MulAdd(hn::Load(d, q + x), hn::LoadU(d, k + x), a0);
    a1 = hn::MulAdd(hn::Load(d, q + x + N), hn::LoadU(d, k + x + N), a1);
    a2 = hn::MulAdd(hn::Load(d, q + x + 2 * N), hn::LoadU(d, k + x + 2 * N), a2);
    a3 = hn::MulAdd(hn::Load(d, q + x + 3 * N), hn::LoadU(d, k + x + 3 * N), a3);
  }
  for (; x + N <= dk; x += N) a0 = hn::MulAdd(hn::Load(d, q + x), hn::LoadU(d, k + x), a0);
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; x < dk; ++x) sum += q[x] * k[x];
  return sum;
}

#if HWY_TARGET != HWY_SCALAR
// The lanes of four vectors summed at once: lane 4b + i of the result holds
// the sum of a_i's lanes in 128-bit block b (two interleaving steps).
HWY_INLINE VF SumFourInBlocks(DF d, VF a0, VF a1, VF a2, VF a3) {
  const VF t01 = hn::Add(hn::InterleaveLower(d, a0, a1), hn::InterleaveUpper(d, a0, a1));
  const VF t23 = hn::Add(hn::InterleaveLower(d, a2, a3), hn::InterleaveUpper(d, a2, a3));
  const hn::Repartition<double, DF> dd;
  const auto lo = hn::InterleaveLower(dd, hn::BitCast(dd, t01), hn::BitCast(dd, t23));
  const auto hi = hn::InterleaveUpper(dd, hn::BitCast(dd, t01), hn::BitCast(dd, t23));
  return hn::Add(hn::BitCast(d, lo), hn::BitCast(d, hi));
}

// Lane i of the result: the sum over the 128-bit blocks b of v of lane 4b + i,
// the blocks added in order (as one lane at a time: ((b0 + b1) + b2) + b3).
template <class D>
HWY_INLINE hn::Vec128<float> SumBlocksInOrder(D /* tag */, hn::Vec<D> v) {
  constexpr size_t kLanes = hn::MaxLanes(D());
  if constexpr (kLanes == 4) {
    return v;
  } else if constexpr (kLanes == 8) {
    const hn::Full128<float> d4;
    return hn::Add(hn::LowerHalf(d4, v), hn::UpperHalf(d4, v));
  } else {
    static_assert(kLanes == 16, "vectors of 4, 8 or 16 lanes");
    const hn::Half<D> d8;
    const hn::Full128<float> d4;
    const auto lo = hn::LowerHalf(d8, v), hi = hn::UpperHalf(d8, v);
    const auto sum = hn::Add(hn::Add(hn::LowerHalf(d4, lo), hn::UpperHalf(d4, lo)), hn::LowerHalf(d4, hi));
    return hn::Add(sum, hn::UpperHalf(d4, hi));
  }
}

// N sums from N/4 results of SumFourInBlocks: lane 4c + i of the result is
// the sum over the blocks b of lane 4b + i of w[c].
HWY_INLINE VF SumBlocks(DF d, const VF* HWY_RESTRICT w) {
  constexpr size_t kLanes = hn::MaxLanes(DF());
  if constexpr (kLanes == 4) {
    return w[0];
  } else if constexpr (kLanes == 8) {  // [w0.b0 + w0.b1, w1.b0 + w1.b1]
    return hn::Add(hn::ConcatUpperUpper(d, w[1], w[0]), hn::ConcatLowerLower(d, w[1], w[0]));
  } else if constexpr (kLanes == 16) {
    // Halves first ([w0.b0 + w0.b2, w0.b1 + w0.b3, w2.b0 + w2.b2, w2.b1 + w2.b3]),
    // then adjacent blocks; the odd blocks come from w1 and w3.
    const VF x02 = hn::Add(hn::ConcatUpperUpper(d, w[2], w[0]), hn::ConcatLowerLower(d, w[2], w[0]));
    const VF x13 = hn::Add(hn::ConcatUpperUpper(d, w[3], w[1]), hn::ConcatLowerLower(d, w[3], w[1]));
    return hn::OddEvenBlocks(hn::Add(x13, hn::SwapAdjacentBlocks(x13)), hn::Add(x02, hn::SwapAdjacentBlocks(x02)));
  } else {  // other widths: block by block
    const size_t N = hn::Lanes(d);
    HWY_ALIGN float in[HWY_MAX_BYTES / sizeof(float)];
    HWY_ALIGN float out[HWY_MAX_BYTES / sizeof(float)];
    for (size_t c = 0; c < N / 4; ++c) {
      hn::Store(w[c], d, in);
      for (size_t i = 0; i < 4; ++i) {
        float sum = 0.0f;
        for (size_t b = 0; b < N; b += 4) sum += in[b + i];
        out[4 * c + i] = sum;
      }
    }
    return hn::Load(d, out);
  }
}

// Four dot products s[i·ss] = q_i · k (i < 4, q_i = q + i·qs, padded and
// aligned): k is loaded once for the four rows, and the four sums are reduced
// together (SumFourInBlocks) instead of one horizontal sum each. With kVecs >
// 0, d_k is kVecs whole vectors: the loop along d is unrolled, with no tail
// (same steps, same bits); four rows against keys in L2 or L3 (n_k =
// 256-4096, d = 64 and 128) took 1.16-1.39x the time with the general loop,
// against memory the same (docs/performance-decode.md).
template <size_t kVecs = 0>
HWY_INLINE void DotFourRows(DF d, const float* HWY_RESTRICT q, size_t qs, const float* HWY_RESTRICT k,
                            size_t dk, float* HWY_RESTRICT s, size_t ss) {
  const size_t N = hn::Lanes(d);
  const size_t whole = kVecs > 0 ? kVecs : dk / N;
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  HWY_UNROLL(8)
  for (size_t i = 0; i < whole; ++i) {
    const size_t x = i * N;
    const VF kv = hn::LoadU(d, k + x);
    a0 = hn::MulAdd(hn::Load(d, q + x), kv, a0);
    a1 = hn::MulAdd(hn::Load(d, q + qs + x), kv, a1);
    a2 = hn::MulAdd(hn::Load(d, q + 2 * qs + x), kv, a2);
    a3 = hn::MulAdd(hn::Load(d, q + 3 * qs + x), kv, a3);
  }
  // The four sums, each added over the blocks in vector ops: added one lane at
  // a time (scalar loads and a chain of three adds per row) they took 4-8 % of
  // a call in cache at n_q = 4 (docs/performance-decode.md). Same order, same bits.
  HWY_ALIGN float sums[4];
  hn::Store(SumBlocksInOrder(d, SumFourInBlocks(d, a0, a1, a2, a3)), hn::Full128<float>(), sums);
  for (size_t i = 0; i < 4; ++i) {
    float sum = sums[i];
    if constexpr (kVecs == 0)
      for (size_t t = whole * N; t < dk; ++t) sum += q[i * qs + t] * k[t];
    s[i * ss] = sum;
  }
}

// s[r·ss + j] = q_r · k_j for four query rows (q_r = q + r·qs, padded and
// aligned) and four consecutive keys (k_j = k + j·dk): 16 accumulators along
// d, so that each loaded key vector meets four rows and each query vector
// four keys, and the 16 sums are reduced together (SumFourInBlocks, then
// SumBlocks) instead of one horizontal sum each. The elements past the last
// whole vector are added one by one.
HWY_INLINE void ScoreFourKeys(DF d, const float* HWY_RESTRICT q, size_t qs, const float* HWY_RESTRICT k,
                              size_t dk, float* HWY_RESTRICT s, size_t ss) {
  const size_t N = hn::Lanes(d);
  VF acc[4][4];
  for (size_t r = 0; r < 4; ++r)
    for (size_t j = 0; j < 4; ++j) acc[r][j] = hn::Zero(d);
  size_t x = 0;
  for (; x + N <= dk; x += N) {
    VF kv[4];
    for (size_t j = 0; j < 4; ++j) kv[j] = hn::LoadU(d, k + j * dk + x);
    for (size_t r = 0; r < 4; ++r) {
      const VF qv = hn::Load(d, q + r * qs + x);
      for (size_t j = 0; j < 4; ++j) acc[r][j] = hn::MulAdd(qv, kv[j], acc[r][j]);
    }
  }
  VF w[4];  // w[r]: the four keys of row r, in-block sums
  for (size_t r = 0; r < 4; ++r) w[r] = SumFourInBlocks(d, acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
  HWY_ALIGN float sums[16];  // sums[4r + j]
  for (size_t c = 0; c < 4; c += N / 4) hn::Store(SumBlocks(d, w + c), d, sums + 4 * c);
  for (size_t r = 0; r < 4; ++r) {
    for (size_t j = 0; j < 4; ++j) {
      float sum = sums[4 * r + j];
      for (size_t t = x; t < dk; ++t) sum += q[r * qs + t] * k[j * dk + t];
      s[r * ss + j] = sum;
    }
  }
}
#endif

// The dot products of one to three query rows with the next block's keys,
// computed during this block's P · V (one key beside each value row) so that
// K and V stream from memory at once: one stream at a time, with the scores
// of a block and its P · V in turn, took 1.12-1.26x the time at one row and
// 1.19-1.31x at two or three (docs/performance-decode.md). Four rows keep
// the two phases: with their software prefetch they were 1.01-1.18x faster.
struct NextScores {
  const float* HWY_RESTRICT q = nullptr;  // the query row, padded to whole vectors
  const float* HWY_RESTRICT k = nullptr;  // the next block's first key
  size_t dk = 0, count = 0;               // count = 0: nothing to score
  float* HWY_RESTRICT s = nullptr;        // s[j] = q · k_j, as DotRow
  size_t rows = 1, qs = 0, ss = 0;        // more rows: q + r·qs and s + r·ss

  HWY_INLINE void Key(DF d, size_t j) const {
    if (j >= count) return;
    for (size_t r = 0; r < rows; ++r) s[r * ss + j] = DotRow(d, q + r * qs, k + j * dk, dk);
  }
  HWY_INLINE void From(DF d, size_t j) const {
    for (; j < count; ++j) Key(d, j);
  }
};

// NextScores as the `ahead` of AccumulateGroup: one key scored a step.
class ScoreAhead {
 public:
  ScoreAhead(DF d, const NextScores& next) : d_(d), next_(next) {}
  HWY_INLINE void Step() { next_.Key(d_, j_++); }
  void Finish() const { next_.From(d_, j_); }

 private:
  DF d_;
  const NextScores& next_;
  size_t j_ = 0;
};

// One query row's o[0 .. kVecs·N) = alpha · o + Σ_{j<kcount} p[j] · v[j][...]
// (v stride vs): the single-row decode step, up to 8 vectors of a V row at a
// time so that V is read in address order. Meanwhile `next` scores the next
// block's keys, one beside each value row.
template <size_t kVecs>
HWY_INLINE void AccumulateOneRow(DF d, const float* HWY_RESTRICT p, size_t kcount,
                                 const float* HWY_RESTRICT v, size_t vs, float* HWY_RESTRICT o,
                                 float alpha, const NextScores& next = NextScores()) {
  const size_t N = hn::Lanes(d);
  VF acc[kVecs];
  const VF a = hn::Set(d, alpha);
  for (size_t c = 0; c < kVecs; ++c) acc[c] = hn::Mul(hn::Load(d, o + c * N), a);
  for (size_t j = 0; j < kcount; ++j) {
    next.Key(d, j);
    const VF pv = hn::Set(d, p[j]);
    const float* HWY_RESTRICT vrow = v + j * vs;
    for (size_t c = 0; c < kVecs; ++c) acc[c] = hn::MulAdd(pv, hn::LoadU(d, vrow + c * N), acc[c]);
  }
  next.From(d, kcount);
  for (size_t c = 0; c < kVecs; ++c) hn::Store(acc[c], d, o + c * N);
}

// One query row's o[0 .. dv) = alpha · o + Σ_{j<kcount} p[j] · v[j][...]
// (v stride dv, o padded to whole vectors) with o in memory (in L1): V is
// read once, in address order, for rows wider than AccumulateOneRow's 8
// vectors, which would read each block of V in several passes of column
// blocks. Each column's sum takes the same steps in the same order as in
// AccumulateOneRow, so the result is the same bit for bit.
HWY_INLINE void AccumulateOneRowInOrder(DF d, const float* HWY_RESTRICT p, size_t kcount,
                                        const float* HWY_RESTRICT v, size_t dv, float* HWY_RESTRICT o,
                                        float alpha, const NextScores& next) {
  const size_t N = hn::Lanes(d);
  const size_t whole = dv / N * N;
  const VF a = hn::Set(d, alpha);
  for (size_t c = 0; c < whole; c += N) hn::Store(hn::Mul(hn::Load(d, o + c), a), d, o + c);
  for (size_t c = whole; c < dv; ++c) o[c] *= alpha;
  for (size_t j = 0; j < kcount; ++j) {
    next.Key(d, j);
    const VF pv = hn::Set(d, p[j]);
    const float* HWY_RESTRICT vrow = v + j * dv;
    for (size_t c = 0; c < whole; c += N)
      hn::Store(hn::MulAdd(pv, hn::LoadU(d, vrow + c), hn::Load(d, o + c)), d, o + c);
    for (size_t c = whole; c < dv; ++c) o[c] += p[j] * vrow[c];
  }
  next.From(d, kcount);
}

// The partial results of every (slice, split, row), written by the workers and
// read by the merge: m, l, o (dvp floats a row) and the row's exact flag.
struct DecodePartials {
  DecodePartials(const Layout& lay, int64_t slices, int64_t splits)
      : rows(static_cast<size_t>(slices * splits) * lay.nq), dvp(lay.dvp) {
    m = Allocate<float>(rows);
    l = Allocate<float>(rows);
    o = Allocate<float>(rows * dvp);
    exact = Allocate<uint8_t>(rows);
  }
  size_t rows, dvp;
  float* m = nullptr, *l = nullptr, *o = nullptr;
  uint8_t* exact = nullptr;
};

class DecodeWorker {
 public:
  DecodeWorker(const KernelArgs& args, const Layout& lay)
      : a_(args), p_(*args.problem), lay_(lay) {
    const size_t N = hn::Lanes(d_);
    dkp_ = hwy::DivCeil(lay.dk, N) * N;
    rows_ = lay.nq;
    rows4_ = hwy::DivCeil(rows_, kGroupRows) * kGroupRows;
    rowsp_ = hwy::DivCeil(rows_, N) * N;
    const size_t row_state = std::max(rows4_, rowsp_);
    v_in_order_ = rows_ == 1 && lay.dv / N > 8;
    into_l2_ = args.decode_prefetch_into_l2;
    q_ = Allocate<float>(rows4_ * dkp_);
#if HWY_TARGET != HWY_SCALAR
    switch (args.decode_scoring) {
      case DecodeScoring::automatic: columns_ = rows_ > kColumnsMinRows; break;
      case DecodeScoring::key_by_key: break;
      case DecodeScoring::four_keys: four_keys_ = true; break;
      case DecodeScoring::rows_in_lanes: columns_ = true; break;
    }
    if (columns_) {
      qt_ = Allocate<float>(rowsp_ * lay.dk);
      st_ = Allocate<float>(kPanelKeys * rowsp_);
      // With a half-width last vector of rows, the upper half of its lanes
      // is never scored: zeros, so that the softmax meets finite values there.
      half_tail_ = N >= 16 && rows_ + N / 2 <= rowsp_;
      pairs_ = N == 16 && rowsp_ == N && (lay.dk == 64 || lay.dk == 128);
      std::fill(st_, st_ + kPanelKeys * rowsp_, 0.0f);
      // P · V with the rows in the lanes only when they fill two vectors or
      // more with no padding; otherwise by rows (AccumulateRows), which at
      // 12-28 rows on AVX-512 took 0.86-0.96x the time and at 32 rows
      // 1.02-1.05x; on AVX2 1.04-1.07x at 13-16 and 32 rows
      // (docs/performance-decode.md).
      pv_in_lanes_ = rows4_ == rowsp_ && rowsp_ >= 2 * N;
      if (pv_in_lanes_) ot_ = Allocate<float>(lay.dv * rowsp_);
    }
#endif
    few_rows_ahead_ = (rows_ == 2 || rows_ == 3) && !columns_ && !four_keys_ && lay.dv % N == 0 &&
                      (lay.dv / N == 4 || lay.dv / N == 8);
    o_ = Allocate<float>(row_state * lay.dvp);
    if (!columns_) s_ = Allocate<float>(rows4_ * kPanelKeys);  // BlockInLanes scores into st_
    if (rows_ == 1 || few_rows_ahead_) s_next_ = Allocate<float>(rows4_ * kPanelKeys);
    m_ = Allocate<float>(row_state);
    l_ = Allocate<float>(row_state);
    alpha_ = Allocate<float>(row_state);
    limits_ = Allocate<int64_t>(row_state);
    exact_ = Allocate<uint8_t>(row_state);
    exact_acc_.resize(lay.dv);
  }

  // The split this worker will likely compute next (item: slice · splits +
  // split; none past the last), whose first block of keys and values the last
  // block of the current split prefetches.
  void ExpectNext(int64_t item, int64_t items, int64_t splits) {
    next_keys_ = 0;
    if (item >= items) return;
    const auto slice = static_cast<size_t>(item / splits), k0 = static_cast<size_t>(item % splits * kSplitKeys);
    next_k_ = a_.k + (slice * lay_.nk + k0) * lay_.dk;
    next_v_ = a_.v + (slice * lay_.nk + k0) * lay_.dv;
    next_keys_ = std::min(kPanelKeys, lay_.nk - k0);
  }

  // The partial of split `split` of slice `slice` over all its query rows.
  // K and V are validated here, on the way (attention() checked Q and the rest):
  // a non-finite key makes row 0's dot product with it non-finite, a non-finite
  // value row 0's output (p·v is NaN or ±inf even for p = 0), and only then are
  // the split's rows looked at; keys that no row reads are scanned. Returns
  // false when K or V holds a non-finite value in this split.
  bool ProcessSplit(int64_t slice, int64_t split, int64_t splits, DecodePartials& out) {
    const size_t dk = lay_.dk, dv = lay_.dv, dvp = lay_.dvp, nq = lay_.nq, nk = lay_.nk;
    const size_t N = hn::Lanes(d_);
    const int64_t b = slice / p_.shape.heads, h = slice % p_.shape.heads;
    const auto slice_z = static_cast<size_t>(slice);
    const float* q = a_.q + slice_z * nq * dk;
    const float* k = a_.k + slice_z * nk * dk;
    const float* v = a_.v + slice_z * nk * dv;
    for (size_t r = 0; r < std::max(rows4_, rowsp_); ++r) {
      limits_[r] = r < rows_ ? key_limit(p_, b, static_cast<int64_t>(r)) : 0;
      m_[r] = kNegInf;
      l_[r] = 0.0f;
      exact_[r] = 0;
    }
    if (slice != packed_slice_) {
      PackQueries(q);
      packed_slice_ = slice;
    }
    if (pv_in_lanes_) std::fill(ot_, ot_ + dv * rowsp_, 0.0f);
    std::fill(o_, o_ + std::max(rows4_, rowsp_) * dvp, 0.0f);
    const uint8_t* mask = nullptr;
    if (p_.mask) {
      const ExplicitMask& em = *p_.mask;
      const size_t mb = em.batch == 1 ? 0 : static_cast<size_t>(b);
      const size_t mh = em.heads == 1 ? 0 : static_cast<size_t>(h);
      mask = em.allowed.data() + (mb * static_cast<size_t>(em.heads) + mh) * nq * nk;
    }
    const int64_t hi = *std::max_element(limits_, limits_ + rows_);
    const auto k0 = static_cast<size_t>(split * kSplitKeys);
    const size_t kend = std::min(nk, k0 + static_cast<size_t>(kSplitKeys));
    split_first_key_ = k0;
    // Keys at or past every row's limit are read by no row (causal, padding);
    // they are only validated.
    const size_t k1 = std::clamp(static_cast<size_t>(std::max<int64_t>(hi, 0)), k0, kend);
    bool finite = true;
    if (k1 < kend)
      finite = AllFiniteValues(d_, k + k1 * dk, (kend - k1) * dk) && AllFiniteValues(d_, v + k1 * dv, (kend - k1) * dv);
    const size_t dv_vecs = dv / N;
    bool scored_ahead = false;  // s_ holds this block's dot products, from the last P · V (NextScores)
    for (size_t j0 = k0; j0 < k1; j0 += kPanelKeys) {
      const size_t kcount = std::min(kPanelKeys, k1 - j0);
#if HWY_TARGET != HWY_SCALAR
      if (columns_) {
        BlockInLanes(k, v, mask, j0, kcount, k1, finite);
        continue;
      }
#endif
      // 1. Dot products along d; lanes past kcount and padding rows are -inf.
      if (!scored_ahead) ScoreBlock(k, v, j0, kcount, k1);
      scored_ahead = false;
      for (size_t r = 0; r < rows4_; ++r) {
        float* srow = s_ + r * kPanelKeys;
        std::fill(srow + (r < rows_ ? kcount : 0), srow + kPanelKeys, kNegInf);
      }
      // 2. Overflowed readable dot products, then masks.
      for (size_t r = 0; r < rows_; ++r) {
        float* srow = s_ + r * kPanelKeys;
        const uint8_t* mrow = mask ? mask + r * nk + j0 : nullptr;
        const int64_t readable =
            std::clamp<int64_t>(limits_[r] - static_cast<int64_t>(j0), 0, static_cast<int64_t>(kcount));
        if (!AllFiniteValues(d_, srow, kPanelKeys)) {  // lanes past kcount are -inf
          for (size_t j = 0; j < kcount; ++j) {
            if (std::isfinite(srow[j])) continue;
            if (r == 0 && !AllFiniteValues(d_, k + (j0 + j) * dk, dk)) finite = false;  // bad input
            if (j < static_cast<size_t>(readable) && (!mrow || mrow[j])) exact_[r] = 1;
          }
        }
        for (size_t j = static_cast<size_t>(readable); j < kcount; ++j) srow[j] = kNegInf;
        if (mrow)
          for (size_t j = 0; j < static_cast<size_t>(readable); ++j)
            if (mrow[j] == 0) srow[j] = kNegInf;
      }
      // 3. Online softmax (as SoftmaxTile, row by row).
      const VF scale = hn::Set(d_, a_.multiplier);
      for (size_t r = 0; r < rows4_; ++r) {
        float* srow = s_ + r * kPanelKeys;
        VF vmax = hn::Load(d_, srow);
        for (size_t c = N; c < kPanelKeys; c += N) vmax = hn::Max(vmax, hn::Load(d_, srow + c));
        const float m_new = std::max(m_[r], hn::GetLane(hn::MaxOfLanes(d_, vmax)) * a_.multiplier);
        if (m_new == kNegInf) {  // nothing readable yet: no weights, output stays zero
          for (size_t c = 0; c < kPanelKeys; c += N) hn::Store(hn::Zero(d_), d_, srow + c);
          alpha_[r] = 1.0f;
          continue;
        }
        // exp(-inf) = 0 on a row's first readable block.
        alpha_[r] = m_[r] == kNegInf ? 0.0f : std::exp(m_[r] - m_new);
        const VF sum = ExpRow(d_, srow, scale, hn::Set(d_, m_new));
        l_[r] = l_[r] * alpha_[r] + hn::GetLane(hn::SumOfLanes(d_, sum));
        m_[r] = m_new;
      }
      // 4. o = alpha·o + P · V over the block's keys, V read in place.
      const float* vblock = v + j0 * dv;
      if (rows_ == 1 || few_rows_ahead_) {  // the next block's dot products (NextScores) during P · V
        NextScores next;
        if (j0 + kPanelKeys < k1)
          next = {q_, k + (j0 + kPanelKeys) * dk, dk, std::min(kPanelKeys, k1 - j0 - kPanelKeys), s_next_,
                  rows_, dkp_, kPanelKeys};
        if (rows_ == 1)
          AccumulateOneRowScoringNext(vblock, kcount, next);
        else
          AccumulateFewRowsScoringNext(vblock, kcount, next);
        if (next.count > 0) {  // the next block's scores are in s_next_: swap them in
          std::swap(s_, s_next_);
          scored_ahead = true;
        }
        continue;
      }
      if (four_keys_) {  // the next block's values fetched during this one's P · V
        Prefetcher ahead = AfterThisBlock(v, j0, k1);
        ahead.Spread(kcount * (rows4_ / kGroupRows) * OutputBlocks(dv_vecs));
        AccumulateRows(s_, kPanelKeys, 1, kcount, vblock, ahead);
        ahead.Finish();
        continue;
      }
      NoPrefetch none;
      AccumulateRows(s_, kPanelKeys, 1, kcount, vblock, none);
    }
    if (pv_in_lanes_)  // back to rows: o_[r][c] = ot_[c][r]
      for (size_t r = 0; r < rows_; ++r)
        for (size_t c = 0; c < dvp; ++c) o_[r * dvp + c] = c < dv ? ot_[c * rowsp_ + r] : 0.0f;
    // Row 0 has added p·v for every key of [k0, k1): a non-finite value shows.
    if (k1 > k0 && !AllFiniteValues(d_, o_, dv))
      finite = finite && AllFiniteValues(d_, v + k0 * dv, (k1 - k0) * dv);
    const size_t base = static_cast<size_t>(slice * splits + split) * nq;
    for (size_t r = 0; r < rows_; ++r) {
      out.m[base + r] = m_[r];
      out.l[base + r] = l_[r];
      out.exact[base + r] = exact_[r];
      std::copy(o_ + r * dvp, o_ + (r + 1) * dvp, out.o + (base + r) * dvp);
    }
    return finite;
  }

  // One row's o_ = alpha · o_ + P · V over a block (s_: P, vblock: its values),
  // `next` scoring the next block meanwhile. Inlined: out of line, one row
  // against 65536 keys took 1.3-1.9x the time in three alternated runs.
  HWY_INLINE void AccumulateOneRowScoringNext(const float* HWY_RESTRICT vblock, size_t kcount, const NextScores& next) {
    const size_t N = hn::Lanes(d_);
    const size_t dv = lay_.dv, dv_vecs = dv / N;
    if (v_in_order_ || dv_vecs == 0) return AccumulateOneRowInOrder(d_, s_, kcount, vblock, dv, o_, alpha_[0], next);
    // No padding rows: wider column blocks, up to 8 vectors (!v_in_order_);
    // the first carries `next`.
    size_t c = dv_vecs >= 8 ? 8 : dv_vecs >= 4 ? 4 : 1;
    if (c == 8) AccumulateOneRow<8>(d_, s_, kcount, vblock, dv, o_, alpha_[0], next);
    if (c == 4) AccumulateOneRow<4>(d_, s_, kcount, vblock, dv, o_, alpha_[0], next);
    if (c == 1) AccumulateOneRow<1>(d_, s_, kcount, vblock, dv, o_, alpha_[0], next);
    for (; c + 4 <= dv_vecs; c += 4) AccumulateOneRow<4>(d_, s_, kcount, vblock + c * N, dv, o_ + c * N, alpha_[0]);
    for (; c < dv_vecs; ++c) AccumulateOneRow<1>(d_, s_, kcount, vblock + c * N, dv, o_ + c * N, alpha_[0]);
    for (size_t col = dv_vecs * N; col < dv; ++col) {  // columns past the last whole vector
      float acc = o_[col] * alpha_[0];
      for (size_t j = 0; j < kcount; ++j) acc += s_[j] * vblock[j * dv + col];
      o_[col] = acc;
    }
  }

  // 2 or 3 rows (few_rows_ahead_): P · V in one pass over V (up to 24
  // accumulators), AccumulateGroup's steps for each output as for four rows
  // (same bits), `next` scoring the next block a key a step.
  HWY_INLINE void AccumulateFewRowsScoringNext(const float* HWY_RESTRICT vblock, size_t kcount,
                                               const NextScores& next) {
    const size_t dv = lay_.dv, dvp = lay_.dvp, dv_vecs = dv / hn::Lanes(d_);
    ScoreAhead ahead(d_, next);
    if (rows_ == 2 && dv_vecs == 8)
      AccumulateGroup<8, ScoreAhead, 2>(d_, s_, kPanelKeys, 1, kcount, vblock, dv, o_, dvp, alpha_, ahead);
    if (rows_ == 2 && dv_vecs == 4)
      AccumulateGroup<4, ScoreAhead, 2>(d_, s_, kPanelKeys, 1, kcount, vblock, dv, o_, dvp, alpha_, ahead);
    if (rows_ == 3 && dv_vecs == 8)
      AccumulateGroup<8, ScoreAhead, 3>(d_, s_, kPanelKeys, 1, kcount, vblock, dv, o_, dvp, alpha_, ahead);
    if (rows_ == 3 && dv_vecs == 4)
      AccumulateGroup<4, ScoreAhead, 3>(d_, s_, kPanelKeys, 1, kcount, vblock, dv, o_, dvp, alpha_, ahead);
    ahead.Finish();
  }

  // The slice's query rows (q) as each scoring method reads them: q_ padded,
  // or Qᵀ in qt_. A worker's splits are mostly of one slice, which is then
  // packed once.
  void PackQueries(const float* HWY_RESTRICT q) {
    const size_t dk = lay_.dk;
    for (size_t r = 0; r < rows4_; ++r)
      for (size_t x = 0; x < dkp_; ++x) q_[r * dkp_ + x] = r < rows_ && x < dk ? q[r * dk + x] : 0.0f;
    float* HWY_RESTRICT qt = qt_;
    if (pairs_) {  // Qᵀ by pairs of x: qt_[(x / 2) · 2·rowsp + (r / 8) · 16 + (r % 8) · 2 + x % 2]
      for (size_t x = 0; x < dk; ++x)
        for (size_t r = 0; r < rowsp_; ++r)
          qt[(x / 2) * 2 * rowsp_ + (r / 8) * 16 + (r % 8) * 2 + x % 2] = r < rows_ ? q[r * dk + x] : 0.0f;
    } else if (columns_) {  // Qᵀ, rows padded to whole vectors: qt_[x · rowsp + r]
      for (size_t x = 0; x < dk; ++x)
        for (size_t r = 0; r < rowsp_; ++r) qt[x * rowsp_ + r] = r < rows_ ? q[r * dk + x] : 0.0f;
    }
  }

  // o_[r] = alpha_[r] · o_[r] + Σ_{j<kcount} p[r][j] · v[j] for every row of
  // rows4_ (v: the block's rows of V, stride d_v), p[r][j] = p[r · p_row + j · p_key];
  // register blocks of kGroupRows rows by the tiled path's widths
  // (AccumulateRowGroup; with 16 registers 4 × 3 against 4 × 2 before: at 2-12
  // rows on the AMD EPYC Zen 3 VM 0.95-0.99x the time), the columns past the
  // last whole vector one by one.
  template <class Ahead>
  HWY_INLINE void AccumulateRows(const float* HWY_RESTRICT p, size_t p_row, size_t p_key, size_t kcount,
                                 const float* HWY_RESTRICT v, Ahead& ahead) {
    const size_t N = hn::Lanes(d_);
    const size_t dv = lay_.dv, dvp = lay_.dvp, dv_vecs = dv / N;
    for (size_t g = 0; g < rows4_; g += kGroupRows) {
      const float* pg = p + g * p_row;
      float* og = o_ + g * dvp;
      const float* ag = alpha_ + g;
      AccumulateRowGroup(d_, pg, p_row, p_key, kcount, v, dv, og, dvp, dv_vecs, ag, ahead);
      for (size_t r = g; r < g + kGroupRows; ++r) {  // columns past the last whole vector
        for (size_t col = dv_vecs * N; col < dv; ++col) {
          float acc = o_[r * dvp + col] * alpha_[r];
          for (size_t j = 0; j < kcount; ++j) acc += p[r * p_row + j * p_key] * v[j * dv + col];
          o_[r * dvp + col] = acc;
        }
      }
    }
  }

  // s_[r][j] = q_r · k_{j0 + j} for every row and j < kcount, with software
  // prefetch spread over the keys: the block's V row j (step 4 reads V in
  // column blocks, not in address order) and the next block's K row j, so
  // that both streams keep the memory busy.
  void ScoreBlock(const float* k, const float* v, size_t j0, size_t kcount, size_t k1) {
    const size_t dk = lay_.dk;
    size_t j = 0;
#if HWY_TARGET != HWY_SCALAR
    if (four_keys_) {
      for (; j + 4 <= kcount; j += 4) {
        for (size_t t = j; t < j + 4; ++t) PrefetchKey(k, v, j0 + t, k1);
        for (size_t r = 0; r < rows_; r += 4)  // padding rows of q_ are zero
          ScoreFourKeys(d_, q_ + r * dkp_, dkp_, k + (j0 + j) * dk, dk, s_ + r * kPanelKeys + j,
                        kPanelKeys);
      }
    }
#endif
    for (; j < kcount; ++j) {
      PrefetchKey(k, v, j0 + j, k1);
      const float* kj = k + (j0 + j) * dk;
      size_t r = 0;
#if HWY_TARGET != HWY_SCALAR
      const size_t N = hn::Lanes(d_);
      for (; r + 4 <= rows_; r += 4) {  // d_k of 4 or 8 whole vectors: unrolled
        float* sr = s_ + r * kPanelKeys + j;
        if (dk == 8 * N)
          DotFourRows<8>(d_, q_ + r * dkp_, dkp_, kj, dk, sr, kPanelKeys);
        else if (dk == 4 * N)
          DotFourRows<4>(d_, q_ + r * dkp_, dkp_, kj, dk, sr, kPanelKeys);
        else
          DotFourRows(d_, q_ + r * dkp_, dkp_, kj, dk, sr, kPanelKeys);
      }
#endif
      for (; r < rows_; ++r) s_[r * kPanelKeys + j] = DotRow(d_, q_ + r * dkp_, kj, dk);
    }
  }

  // What to fetch during the P · V of the block at j0 (v: the slice's V): the
  // next block's values, or after the split's last block the first keys and
  // values of the split this worker likely takes next (ExpectNext).
  Prefetcher AfterThisBlock(const float* v, size_t j0, size_t k1) const {
    const size_t dv = lay_.dv;
    Prefetcher ahead(into_l2_);
    if (j0 + kPanelKeys < k1) {
      ahead.Add(v + (j0 + kPanelKeys) * dv, (std::min(j0 + 2 * kPanelKeys, k1) - j0 - kPanelKeys) * dv);
    } else if (next_keys_ > 0) {
      ahead.Add(next_k_, next_keys_ * lay_.dk);
      ahead.Add(next_v_, next_keys_ * dv);
    }
    return ahead;
  }

  // Prefetch of V row `key` and of K row key + kPanelKeys (if below k1), into
  // L1 (PrefetchToL1, whose comment has the figures). A member function, not a lambda: GCC 12
  // compiled the prefetches of a lambda here to nothing (no prefetch
  // instruction in the object file), and the decode path lost a third of its
  // speed against memory. None for one query row: its K and V are read in
  // address order at once (NextScores), which the hardware prefetchers
  // follow, and on Zen 4 it took 0.70-0.89x the time without them (2-4 rows:
  // 1.0-1.3x, so they keep them; with few_rows_ahead_, 2 and 3 rows use them
  // only while scoring a split's first block; docs/performance-decode.md).
  HWY_INLINE void PrefetchKey(const float* k, const float* v, size_t key, size_t k1) const {
    // K and V both read in address order: the hardware prefetchers follow
    if (v_in_order_ || rows_ == 1) return;
    const size_t dk = lay_.dk, dv = lay_.dv;
    const char* vrow = reinterpret_cast<const char*>(v + key * dv);
    if (!four_keys_ || key < split_first_key_ + kPanelKeys)  // else fetched during the block before's P · V
      for (size_t c = 0; c < dv * sizeof(float); c += 64) PrefetchLine(vrow + c, into_l2_);
    if (key + kPanelKeys < k1) {
      const char* krow = reinterpret_cast<const char*>(k + (key + kPanelKeys) * dk);
      for (size_t c = 0; c < dk * sizeof(float); c += 64) PrefetchLine(krow + c, into_l2_);
    }
  }

#if HWY_TARGET != HWY_SCALAR
  // One block of keys with the lanes over query rows (columns_): steps 1–4 of
  // ProcessSplit on Sᵀ (st_[j][r]) and, with pv_in_lanes_, Oᵀ (ot_[c][r]), so
  // that scores, softmax and output each work on whole vectors of rows, with
  // no horizontal sums and no transposes (without, P · V runs by rows on o_,
  // reading Sᵀ as P). Each value takes the steps it takes in the other methods:
  // a dot product runs along x in order, P · V along the keys in order, and
  // a row's sum of weights adds its keys in the order of hn::SumOfLanes over
  // vectors of keys (the block's keys j and j + N·i go into one partial
  // sum first). Clears `finite` when a key of the block holds a value that is not.
  void BlockInLanes(const float* k, const float* v, const uint8_t* mask, size_t j0, size_t kcount, size_t k1,
                    bool& finite) {
    const size_t N = hn::Lanes(d_);
    const size_t dk = lay_.dk, dv = lay_.dv, nk = lay_.nk, vecs = rowsp_ / N;
    float* HWY_RESTRICT st = st_;
    // 1. Dot products.
    ScoreColumns(k, v, j0, kcount, k1);
    // 2. Overflowed readable dot products (and bad keys, which row 0 meets),
    // then keys past a row's limit or refused by the mask. Padding rows (q = 0,
    // scores 0) are left unmasked: their lanes never meet a real row's, and
    // they are discarded; masking them lane by lane made the whole call take
    // 1.35-1.75x as long at n_q = 20-28 (docs/performance-decode.md).
    const bool all_finite = AllFiniteValues(d_, st, kcount * rowsp_);  // padding rows' q is 0
    for (size_t r = 0; r < rows_; ++r) {
      const int64_t readable =
          std::clamp<int64_t>(limits_[r] - static_cast<int64_t>(j0), 0, static_cast<int64_t>(kcount));
      const uint8_t* mrow = mask ? mask + r * nk + j0 : nullptr;
      if (!all_finite) {
        for (size_t j = 0; j < kcount; ++j) {
          if (std::isfinite(st[j * rowsp_ + r])) continue;
          if (r == 0 && !AllFiniteValues(d_, k + (j0 + j) * dk, dk)) finite = false;  // bad input
          if (j < static_cast<size_t>(readable) && (!mrow || mrow[j])) exact_[r] = 1;
        }
      }
      for (size_t j = static_cast<size_t>(readable); j < kcount; ++j) st[j * rowsp_ + r] = kNegInf;
      if (mrow)
        for (size_t j = 0; j < static_cast<size_t>(readable); ++j)
          if (mrow[j] == 0) st[j * rowsp_ + r] = kNegInf;
    }
    // 3. Online softmax, N rows at a time.
    const VF scale = hn::Set(d_, a_.multiplier);
    const VF neg_inf = hn::Set(d_, kNegInf);
    constexpr size_t kMaxLanes = hn::MaxLanes(DF());
    constexpr size_t kExpBlock = 8;  // keys per SoftmaxExpBlock
    for (size_t i = 0; i < vecs; ++i) {
      const size_t r0 = i * N;
      VF vmax = neg_inf;
      for (size_t j = 0; j < kcount; ++j) vmax = hn::Max(vmax, hn::Load(d_, st + j * rowsp_ + r0));
      const VF m_new = hn::Max(hn::Load(d_, m_ + r0), hn::Mul(vmax, scale));
      // alpha = exp(m_old - m_new): 0 on a row's first readable block
      // (m_old = -inf), 1 while a row has read nothing (both -inf), as in
      // SoftmaxTile; N rows at once, not one std::exp a row.
      const auto empty = hn::Eq(m_new, neg_inf);  // nothing readable yet: no weights
      hn::Store(hn::IfThenElse(empty, hn::Set(d_, 1.0f), SoftmaxExp(d_, hn::Sub(hn::Load(d_, m_ + r0), m_new))),
                d_, alpha_ + r0);
      VF part[kMaxLanes];
      for (size_t lane = 0; lane < N; ++lane) part[lane] = hn::Zero(d_);
      // The exps kExpBlock keys at a time (SoftmaxExpBlock: the same bits)
      // took 0.95-0.98x the time of one at a time at 12-64 rows on the AMD
      // EPYC Zen 3 VM (AVX2; 8 rows 1.01x, once 1.14x in a noisy run;
      // docs/performance-decode.md, "Prefetch steps every four terms"). A row
      // with nothing readable yet (empty) has only -inf scores, whose NaN
      // arguments send the block to each vector's own path.
      size_t j = 0;
      for (; j + kExpBlock <= kcount; j += kExpBlock) {
        VF p[kExpBlock];
        for (size_t t = 0; t < kExpBlock; ++t)
          p[t] = hn::Sub(hn::Mul(hn::Load(d_, st + (j + t) * rowsp_ + r0), scale), m_new);
        SoftmaxExpBlock(d_, p);
        for (size_t t = 0; t < kExpBlock; ++t) {
          p[t] = hn::IfThenZeroElse(empty, p[t]);
          hn::Store(p[t], d_, st + (j + t) * rowsp_ + r0);
          part[(j + t) % N] = hn::Add(part[(j + t) % N], p[t]);
        }
      }
      for (; j < kcount; ++j) {
        float* HWY_RESTRICT sj = st + j * rowsp_ + r0;
        const VF p = hn::IfThenZeroElse(empty, SoftmaxExp(d_, hn::Sub(hn::Mul(hn::Load(d_, sj), scale), m_new)));
        hn::Store(p, d_, sj);
        part[j % N] = hn::Add(part[j % N], p);
      }
      for (size_t half = N / 2; half >= 1; half /= 2)  // hn::SumOfLanes' order
        for (size_t lane = 0; lane < half; ++lane) part[lane] = hn::Add(part[lane], part[lane + half]);
      const VF l_old = hn::Load(d_, l_ + r0);
      hn::Store(hn::IfThenElse(empty, l_old, hn::Add(hn::Mul(l_old, hn::Load(d_, alpha_ + r0)), part[0])), d_,
                l_ + r0);
      hn::Store(m_new, d_, m_ + r0);
    }
    // 4. Oᵀ = alpha · Oᵀ + Vᵀ · Pᵀ (or O = alpha · O + P · V) over the block's
    // keys, V read in place.
    // The next block's values are prefetched over its steps: fetched while
    // the block's own keys were scored instead, they arrived later and took
    // the place of those keys in L1 (n_q = 16 against n_k = 16384: 0.91-0.93x
    // the time; in cache 0.92-0.96x). The last block of a split fetches the
    // first keys and values of the split this worker likely takes next
    // (ExpectNext; n_q = 16 on 2 threads: 0.95-0.96x, on 1 thread
    // 0.98-0.99x; docs/performance-decode.md).
    const float* vblock = v + j0 * dv;
    Prefetcher ahead = AfterThisBlock(v, j0, k1);
    ahead.Spread(pv_in_lanes_ ? hwy::DivCeil(kcount, kTermsPerStep) * hwy::DivCeil(vecs, 2) *
                                    hwy::DivCeil(dv, kColumnBlock)
                              : kcount * (rows4_ / kGroupRows) * OutputBlocks(dv / N));
    if (pv_in_lanes_) {
      size_t v0 = 0;
      if constexpr (kWideRowBlocks) {
        for (; v0 + 4 <= vecs; v0 += 4) AccumulateInLanes<4>(vblock, kcount, v0 * N, ahead);
        if (v0 + 3 <= vecs) {
          AccumulateInLanes<3>(vblock, kcount, v0 * N, ahead);
          v0 += 3;
        }
      }
      for (; v0 < vecs; v0 += 2) {
        if (vecs - v0 >= 2)
          AccumulateInLanes<2>(vblock, kcount, v0 * N, ahead);
        else
          AccumulateInLanes<1>(vblock, kcount, v0 * N, ahead);
      }
    } else {
      // P[r][j] = st[j][r]. By rows also at 13-16 rows on AVX-512: P · V over
      // all 16 rows per vector of V (each value loaded once) took 1.05-1.07x
      // the time at 16 rows with the lines fetched into L1 (13-15 rows
      // 0.99-1.06x; docs/performance-decode.md, "Scoring methods from 5 rows").
      AccumulateRows(st, 1, rowsp_, kcount, vblock, ahead);
    }
    ahead.Finish();
  }

  // ot_[c][r0 ..] = alpha · ot_[c][r0 ..] + Σ_{j<kcount} v[j][c] · st_[j][r0 ..]
  // for every column c, kRowVecs vectors of rows from r0 (v: the block's rows
  // of V, stride d_v), in register blocks of kColumnBlock / kRowVecs columns,
  // then of powers of two for the rest (every block's size is known at compile
  // time: one known at run time kept its accumulators in memory).
  template <size_t kRowVecs>
  HWY_INLINE void AccumulateInLanes(const float* HWY_RESTRICT v, size_t kcount, size_t r0, Prefetcher& ahead) {
    constexpr size_t kCols = kColumnBlock / kRowVecs;
    size_t c0 = 0;
    for (; c0 + kCols <= lay_.dv; c0 += kCols) OutputBlock<kRowVecs, kCols>(v, kcount, r0, c0, ahead);
    OutputRest<kRowVecs, PowerOfTwoBelow(kCols)>(v, kcount, r0, c0, ahead);
  }

  template <size_t kRowVecs, size_t kCols>
  HWY_INLINE void OutputRest(const float* HWY_RESTRICT v, size_t kcount, size_t r0, size_t c0, Prefetcher& ahead) {
    if constexpr (kCols > 0) {
      if (lay_.dv - c0 >= kCols) {
        OutputBlock<kRowVecs, kCols>(v, kcount, r0, c0, ahead);
        c0 += kCols;
      }
      OutputRest<kRowVecs, kCols / 2>(v, kcount, r0, c0, ahead);
    }
  }

  // One register block of AccumulateInLanes: columns c0 .. c0 + kCols, the
  // sums along the keys in order; one step of `ahead` a key.
  template <size_t kRowVecs, size_t kCols>
  HWY_INLINE void OutputBlock(const float* HWY_RESTRICT v, size_t kcount, size_t r0, size_t c0, Prefetcher& ahead) {
    const size_t N = hn::Lanes(d_);
    const size_t dv = lay_.dv;
    const float* HWY_RESTRICT st = st_ + r0;
    float* HWY_RESTRICT ot = ot_ + r0 + c0 * rowsp_;
    VF acc[kCols][kRowVecs];
    for (size_t i = 0; i < kRowVecs; ++i) {
      const VF alpha = hn::Load(d_, alpha_ + r0 + i * N);
      for (size_t c = 0; c < kCols; ++c) acc[c][i] = hn::Mul(hn::Load(d_, ot + c * rowsp_ + i * N), alpha);
    }
    for (size_t j = 0; j < kcount; ++j) {
      if (j % kTermsPerStep == 0) ahead.Step();
      VF p[kRowVecs];
      for (size_t i = 0; i < kRowVecs; ++i) p[i] = hn::Load(d_, st + j * rowsp_ + i * N);
      HWY_UNROLL(32)  // the accumulators stay in registers only when unrolled
      for (size_t c = 0; c < kCols; ++c) {
        const VF x = hn::Set(d_, v[j * dv + c0 + c]);
        for (size_t i = 0; i < kRowVecs; ++i) acc[c][i] = hn::MulAdd(p[i], x, acc[c][i]);
      }
    }
    for (size_t c = 0; c < kCols; ++c)
      for (size_t i = 0; i < kRowVecs; ++i) hn::Store(acc[c][i], d_, ot + c * rowsp_ + i * N);
  }

  // st_[j][r] = q_r · k_{j0 + j} for every row and j < kcount, with the lanes
  // over query rows (from qt_): each FMA takes one key element broadcast.
  // Register blocks of four or three vectors of rows (kWideRowBlocks), then
  // of up to two, by kColumnBlock / (vectors of rows) keys, then powers of
  // two for the rest of the block's keys
  // (ScoreKeysInLanes; compile-time sizes, as in AccumulateInLanes). k and v
  // are the slice's. d_k = 64 and 128 are compile-time constants too: with a
  // run-time row stride each of a block's keys needs a pointer of its own,
  // and 24 of them spilled (a reload from the stack per FMA).
  HWY_NOINLINE void ScoreColumns(const float* k, const float* v, size_t j0, size_t kcount, size_t k1) {
    switch (lay_.dk) {
      case 64: return ScoreColumnsOf<64>(k, v, j0, kcount, k1);
      case 128: return ScoreColumnsOf<128>(k, v, j0, kcount, k1);
      default: return ScoreColumnsOf<0>(k, v, j0, kcount, k1);
    }
  }

  // kDk: d_k when it is not 0. Vectors of rows in pairs; a last vector at
  // most half filled with real rows (half_tail_) is scored with half-width
  // vectors, paired with the odd full vector before it if there is one.
  template <size_t kDk>
  HWY_INLINE void ScoreColumnsOf(const float* k, const float* v, size_t j0, size_t kcount, size_t k1) {
    if constexpr (kDk != 0 && kDk % 2 == 0 && hn::MaxLanes(DF()) == 16) {
      if (pairs_) {
        if (half_tail_) return ScorePairs<kDk, true>(k, v, j0, kcount, k1);
        return ScorePairs<kDk, false>(k, v, j0, kcount, k1);
      }
    }
    const size_t full = rowsp_ / hn::Lanes(d_) - (half_tail_ ? 1 : 0);
    size_t v0 = 0;
    if constexpr (kWideRowBlocks) {
      for (; v0 + 4 <= full; v0 += 4) ScoreRowVectors<4, false, kDk>(k, v, j0, kcount, k1, v0);
      if (v0 + 3 <= full) {
        ScoreRowVectors<3, false, kDk>(k, v, j0, kcount, k1, v0);
        v0 += 3;
      }
    }
    for (; v0 + 2 <= full; v0 += 2) ScoreRowVectors<2, false, kDk>(k, v, j0, kcount, k1, v0);
    if (v0 < full) {
      if (half_tail_)
        ScoreRowVectors<1, true, kDk>(k, v, j0, kcount, k1, v0);
      else
        ScoreRowVectors<1, false, kDk>(k, v, j0, kcount, k1, v0);
    } else if (half_tail_) {
      ScoreRowVectors<0, true, kDk>(k, v, j0, kcount, k1, v0);
    }
  }

  template <size_t kRowVecs, bool kHalfTail, size_t kDk>
  HWY_INLINE void ScoreRowVectors(const float* k, const float* v, size_t j0, size_t kcount, size_t k1, size_t v0) {
    constexpr size_t kKeys = kColumnBlock / (kRowVecs + (kHalfTail ? 1 : 0));
    size_t j = 0;
    for (; j + kKeys <= kcount; j += kKeys) ScoreKeysInLanes<kRowVecs, kHalfTail, kKeys, kDk>(k, v, j0, j, k1, v0);
    ScoreRest<kRowVecs, kHalfTail, PowerOfTwoBelow(kKeys), kDk>(k, v, j0, j, kcount, k1, v0);
  }

  template <size_t kRowVecs, bool kHalfTail, size_t kKeys, size_t kDk>
  HWY_INLINE void ScoreRest(const float* k, const float* v, size_t j0, size_t j, size_t kcount, size_t k1,
                            size_t v0) {
    if constexpr (kKeys > 0) {
      if (kcount - j >= kKeys) {
        ScoreKeysInLanes<kRowVecs, kHalfTail, kKeys, kDk>(k, v, j0, j, k1, v0);
        j += kKeys;
      }
      ScoreRest<kRowVecs, kHalfTail, kKeys / 2, kDk>(k, v, j0, j, kcount, k1, v0);
    }
  }

  // Every key of the block by ScorePairKeys: kColumnBlock / 2 keys at a time
  // (kColumnBlock accumulators, half of them with kLowOnly: at 6-8 rows
  // twice the keys at a time took 1.08x the time against memory on 1 thread,
  // 1.01-1.02x on 2 and 0.98x in cache), then powers of two for the rest.
  template <size_t kDk, bool kLowOnly>
  HWY_INLINE void ScorePairs(const float* k, const float* v, size_t j0, size_t kcount, size_t k1) {
    constexpr size_t kKeys = kColumnBlock / 2;
    size_t j = 0;
    for (; j + kKeys <= kcount; j += kKeys) ScorePairKeys<kKeys, kDk, kLowOnly>(k, v, j0, j, k1);
    ScorePairRest<PowerOfTwoBelow(kKeys), kDk, kLowOnly>(k, v, j0, j, kcount, k1);
  }

  template <size_t kKeys, size_t kDk, bool kLowOnly>
  HWY_INLINE void ScorePairRest(const float* k, const float* v, size_t j0, size_t j, size_t kcount, size_t k1) {
    if constexpr (kKeys > 0) {
      if (kcount - j >= kKeys) {
        ScorePairKeys<kKeys, kDk, kLowOnly>(k, v, j0, j, k1);
        j += kKeys;
      }
      ScorePairRest<kKeys / 2, kDk, kLowOnly>(k, v, j0, j, kcount, k1);
    }
  }

  // One pair of terms (x, x + 1 = 2·x2, 2·x2 + 1) of ScorePairKeys' sums for
  // every key; the first pair initialises them (as in ScoreTerm). kLowOnly:
  // rows 0–7 only (lo; hi is not touched).
  template <size_t kKeys, bool kFirst, bool kLowOnly>
  HWY_INLINE void PairTerm(const float* HWY_RESTRICT qt, const float* HWY_RESTRICT kj, size_t dk, size_t x2,
                           VF (&lo)[kKeys], VF (&hi)[kLowOnly ? 1 : kKeys]) {
    const hn::Repartition<double, DF> dd;
    const VF qlo = hn::Load(d_, qt + x2 * 32);
    const VF qhi = kLowOnly ? qlo : hn::Load(d_, qt + x2 * 32 + 16);
    HWY_UNROLL(32)  // the accumulators stay in registers only when unrolled
    for (size_t t = 0; t < kKeys; ++t) {
      double pair;  // k[x], k[x + 1]: one 64-bit broadcast feeds both vectors of rows
      std::memcpy(&pair, kj + t * dk + 2 * x2, sizeof(pair));
      const VF kv = hn::BitCast(d_, hn::Set(dd, pair));
      lo[t] = kFirst ? hn::Mul(qlo, kv) : hn::MulAdd(qlo, kv, lo[t]);
      if constexpr (!kLowOnly) hi[t] = kFirst ? hn::Mul(qhi, kv) : hn::MulAdd(qhi, kv, hi[t]);
    }
  }

  // st_[j + t][0 .. 16) = dot products of key j0 + j + t (t < kKeys) with the
  // 16 rows of Qᵀ, on AVX-512 with d_k even (pairs_): each lane holds one row
  // and the even or the odd terms along x (rows 0–7 in one vector, 8–15 in
  // the other), so that one broadcast pair of key elements feeds two FMAs
  // where ScoreKeysInLanes' single vector of rows needs a broadcast per FMA.
  // Each dot product is the sum of its even-x and odd-x chains, each in order
  // along x; the two vectors become one of 16 rows by ConcatEven + ConcatOdd.
  // Prefetch as in ScoreKeysInLanes.
  // kLowOnly (up to 8 rows, half_tail_): rows 8–15 are padding, zero in Qᵀ,
  // so hi is left out and stored as the zeros it would hold: the same FMAs on
  // rows 0–7, the same bits, half the work. With hi computed, 6-8 rows took
  // 1.06-1.15x the time against 16384-65536 keys on 1 thread, 1.00-1.09x on
  // 2, 1.18x in cache (docs/performance-decode.md, "Up to 8 rows: half the
  // pairs").
  template <size_t kKeys, size_t kDk, bool kLowOnly>
  HWY_INLINE void ScorePairKeys(const float* k, const float* v, size_t j0, size_t j, size_t k1) {
    const size_t key = j0 + j;
    Prefetcher ahead(into_l2_);
    if (j0 == split_first_key_) ahead.Add(v + key * lay_.dv, kKeys * lay_.dv);
    if (key + kPanelKeys < k1)
      ahead.Add(k + (key + kPanelKeys) * kDk, (std::min(key + kKeys + kPanelKeys, k1) - key - kPanelKeys) * kDk);
    ahead.Spread(kDk / 2);
    const float* HWY_RESTRICT kj = k + key * kDk;
    const float* HWY_RESTRICT qt = qt_;
    VF lo[kKeys], hi[kLowOnly ? 1 : kKeys];
    ahead.Step();
    PairTerm<kKeys, true, kLowOnly>(qt, kj, kDk, 0, lo, hi);
    for (size_t x2 = 1; x2 < kDk / 2; ++x2) {
      ahead.Step();
      PairTerm<kKeys, false, kLowOnly>(qt, kj, kDk, x2, lo, hi);
    }
    ahead.Finish();
    float* HWY_RESTRICT st = st_ + j * rowsp_;
    for (size_t t = 0; t < kKeys; ++t) {
      VF h = hn::Zero(d_);  // with kLowOnly, what rows 8–15 would hold
      if constexpr (!kLowOnly) h = hi[t];
      hn::Store(hn::Add(hn::ConcatEven(d_, h, lo[t]), hn::ConcatOdd(d_, h, lo[t])), d_, st + t * rowsp_);
    }
  }

  using DH = hn::Half<DF>;
  using VH = hn::Vec<DH>;

  // One term x of ScoreKeysInLanes' sums: the first initialises them (q·k
  // rounds as 0 + q·k does, up to the sign of a zero). Zeroed first instead,
  // the accumulators were also zeroed in memory, a dead store of a register
  // block's size per block.
  template <size_t kRowVecs, bool kHalfTail, size_t kKeys, bool kFirst>
  HWY_INLINE void ScoreTerm(const float* HWY_RESTRICT qt, const float* HWY_RESTRICT kj, size_t dk, size_t x,
                            VF (&acc)[kKeys][kRowVecs > 0 ? kRowVecs : 1], VH (&tail)[kKeys]) {
    const size_t N = hn::Lanes(d_);
    const DH dh;
    VF qv[kRowVecs > 0 ? kRowVecs : 1];
    for (size_t i = 0; i < kRowVecs; ++i) qv[i] = hn::Load(d_, qt + x * rowsp_ + i * N);
    VH qh = hn::Zero(dh);
    if constexpr (kHalfTail) qh = hn::Load(dh, qt + x * rowsp_ + kRowVecs * N);
    HWY_UNROLL(32)  // the accumulators stay in registers only when unrolled
    for (size_t t = 0; t < kKeys; ++t) {
      const float kx = kj[t * dk + x];
      const VF kv = hn::Set(d_, kx);
      for (size_t i = 0; i < kRowVecs; ++i) acc[t][i] = kFirst ? hn::Mul(qv[i], kv) : hn::MulAdd(qv[i], kv, acc[t][i]);
      if constexpr (kHalfTail) {
        const VH kh = hn::Set(dh, kx);
        tail[t] = kFirst ? hn::Mul(qh, kh) : hn::MulAdd(qh, kh, tail[t]);
      }
    }
  }

  // st_[j + t][v0·N .. (v0 + kRowVecs)·N) (and the half vector after them
  // with kHalfTail) = dot products of key j0 + j + t (t < kKeys) with those
  // rows of Qᵀ, summed along x in order. While the
  // first vectors of rows are scored, the keys one block further are
  // prefetched (and in the first block of a split, the values of these keys,
  // which no P · V before fetched), spread over the steps along d
  // (Prefetcher): issued all at once they stall the core (against memory on
  // AVX2: 1.1–1.5× the time with the 64 keys' lines issued before the block;
  // at d = 128, 1.15–1.3× with each register block's issued before it; on
  // AVX-512 at d = 128, one line a step left two thirds of them to a burst
  // after the block, which took a third of the scoring time;
  // docs/performance-decode.md).
  template <size_t kRowVecs, bool kHalfTail, size_t kKeys, size_t kDk>
  HWY_INLINE void ScoreKeysInLanes(const float* k, const float* v, size_t j0, size_t j, size_t k1, size_t v0) {
    const size_t N = hn::Lanes(d_);
    const size_t dk = kDk != 0 ? kDk : lay_.dk;
    const size_t key = j0 + j;
    Prefetcher ahead(into_l2_);
    if (v0 == 0) {
      if (j0 == split_first_key_) ahead.Add(v + key * lay_.dv, kKeys * lay_.dv);
      if (key + kPanelKeys < k1)
        ahead.Add(k + (key + kPanelKeys) * dk, (std::min(key + kKeys + kPanelKeys, k1) - key - kPanelKeys) * dk);
      ahead.Spread(hwy::DivCeil(dk, kTermsPerStep));
    }
    const float* HWY_RESTRICT kj = k + key * dk;
    const float* HWY_RESTRICT qt = qt_ + v0 * N;
    VF acc[kKeys][kRowVecs > 0 ? kRowVecs : 1];
    VH tail[kKeys];
    ahead.Step();
    ScoreTerm<kRowVecs, kHalfTail, kKeys, true>(qt, kj, dk, 0, acc, tail);
    for (size_t x = 1; x < dk; ++x) {
      if (x % kTermsPerStep == 0) ahead.Step();
      ScoreTerm<kRowVecs, kHalfTail, kKeys, false>(qt, kj, dk, x, acc, tail);
    }
    ahead.Finish();
    float* HWY_RESTRICT st = st_ + j * rowsp_ + v0 * N;
    for (size_t t = 0; t < kKeys; ++t) {
      for (size_t i = 0; i < kRowVecs; ++i) hn::Store(acc[t][i], d_, st + t * rowsp_ + i * N);
      if constexpr (kHalfTail) hn::Store(tail[t], DH(), st + t * rowsp_ + kRowVecs * N);
    }
  }
#endif

  // Merges the partials of every row of a slice, in split order, and writes
  // out (and lse); rows fp32 cannot hold go to exact_row.
  void Merge(int64_t slice, int64_t splits, const DecodePartials& part) {
    const size_t dv = lay_.dv, dvp = lay_.dvp, nq = lay_.nq, nk = lay_.nk;
    const int64_t b = slice / p_.shape.heads, h = slice % p_.shape.heads;
    const auto slice_z = static_cast<size_t>(slice);
    const size_t N = hn::Lanes(d_);
    float* o = o_;
    for (size_t r = 0; r < rows_; ++r) {
      float row_max = kNegInf;
      bool exact = false;
      for (int64_t sp = 0; sp < splits; ++sp) {
        const size_t at = static_cast<size_t>(slice * splits + sp) * nq + r;
        row_max = std::max(row_max, part.m[at]);
        exact = exact || part.exact[at];
      }
      float l = 0.0f;
      std::fill(o, o + dvp, 0.0f);
      if (row_max != kNegInf && row_max < kInf) {
        for (int64_t sp = 0; sp < splits; ++sp) {
          const size_t at = static_cast<size_t>(slice * splits + sp) * nq + r;
          if (part.m[at] == kNegInf) continue;  // nothing readable in this split
          const float f = std::exp(part.m[at] - row_max);
          l += part.l[at] * f;
          const VF vf = hn::Set(d_, f);
          const float* po = part.o + at * dvp;
          for (size_t c = 0; c < dvp; c += N)
            hn::Store(hn::MulAdd(hn::Load(d_, po + c), vf, hn::Load(d_, o + c)), d_, o + c);
        }
      }
      float* out = a_.out + (slice_z * nq + r) * dv;
      float* lse = a_.lse ? a_.lse + slice_z * nq + r : nullptr;
      // A max of +inf or NaN, or a sum of inf or NaN: a logit beyond float.
      exact = exact || !(row_max < kInf) || !(l < kInf);
      if (!exact && l > 0.0f) {
        const VF vl = hn::Set(d_, l);
        VF nonfinite = hn::Zero(d_);
        for (size_t c = 0; c < dvp; c += N) {
          const VF x = hn::Div(hn::Load(d_, o + c), vl);
          hn::Store(x, d_, o + c);
          nonfinite = hn::Add(nonfinite, hn::Mul(x, hn::Zero(d_)));
        }
        std::copy(o, o + dv, out);
        exact = !hn::AllTrue(d_, hn::Eq(nonfinite, nonfinite));  // Σ p·v overflowed
        if (lse) *lse = row_max + std::log(l);
      } else if (!exact) {
        // No weight: an empty row under the zero policy, unless every readable logit is -inf.
        const auto limit = static_cast<size_t>(key_limit(p_, b, static_cast<int64_t>(r)));
        if (p_.mask) {
          const ExplicitMask& em = *p_.mask;
          const size_t mb = em.batch == 1 ? 0 : static_cast<size_t>(b);
          const size_t mh = em.heads == 1 ? 0 : static_cast<size_t>(h);
          const uint8_t* mrow = em.allowed.data() + ((mb * static_cast<size_t>(em.heads) + mh) * nq + r) * nk;
          exact = std::any_of(mrow, mrow + limit, [](uint8_t m) { return m != 0; });
        } else {
          exact = limit > 0;
        }
        std::fill(out, out + dv, 0.0f);
        if (lse) *lse = kNegInf;
      }
      if (exact)
        exact_row(p_, a_.q, a_.k, a_.v, b, h, static_cast<int64_t>(r), exact_acc_.data(), out, lse, nullptr);
    }
  }

 private:
  const KernelArgs& a_;
  const Problem& p_;
  const Layout& lay_;
  DF d_;
  size_t dkp_ = 0, rows_ = 0, rows4_ = 0;
  size_t rowsp_ = 0;  // rows padded to whole vectors: the row stride of qt_, st_ and ot_
  bool columns_ = false;    // lanes over rows, BlockInLanes (more than kColumnsMinRows rows)
  // Scores by ScoreFourKeys (forced only, see kColumnsMinRows). Its
  // blocks' values are then fetched during the P · V of the block before
  // (AfterThisBlock), not beside its keys while they are scored: four keys'
  // lines issued together stalled the core. 5-8 rows, d = 128, against
  // n_k = 65536: 0.89-0.94x the time on AVX-512; key by key (3-4 rows, and
  // AVX2 6-12) it took 1.02-1.09x, so it keeps fetching a key's values with
  // it (docs/performance-decode.md).
  bool four_keys_ = false;
  bool into_l2_ = false;  // KernelArgs::decode_prefetch_into_l2
  // columns_ with one vector of 16 rows and d_k = 64 or 128 on AVX-512: ScorePairs.
  bool pairs_ = false;
  bool half_tail_ = false;  // columns_: the last vector of rows is scored with half-width vectors
  bool pv_in_lanes_ = false;  // columns_: P · V on Oᵀ (AccumulateInLanes), not by rows
  bool v_in_order_ = false;  // one row of more than 8 vectors: AccumulateOneRowInOrder, no software prefetch
  size_t split_first_key_ = 0;  // the split being computed starts at this key
  int64_t packed_slice_ = -1;  // the slice whose query rows q_ and qt_ hold
  const float* next_k_ = nullptr;  // ExpectNext: the first keys and values of the next split
  const float* next_v_ = nullptr;
  size_t next_keys_ = 0;
  float* q_ = nullptr, *o_ = nullptr, *s_ = nullptr, *m_ = nullptr, *l_ = nullptr, *alpha_ = nullptr;
  // 2 or 3 rows with d_v of 4 or 8 whole vectors, scored key by key: P · V
  // in one AccumulateGroup pass, which scores the next block meanwhile (ScoreAhead).
  bool few_rows_ahead_ = false;
  float* s_next_ = nullptr;  // one row or few_rows_ahead_: the next block's dot products (NextScores)
  float* qt_ = nullptr, *st_ = nullptr, *ot_ = nullptr;  // rows in the lanes: Qᵀ, Sᵀ of a block, Oᵀ
  int64_t* limits_ = nullptr;
  uint8_t* exact_ = nullptr;
  std::vector<long double> exact_acc_;
};

// The decode path on `threads` threads: phase 1 hands out (slice, split) items
// through an atomic counter, phase 2 (after a barrier) the slices' merges.
// Returns false, having written nothing, when K or V holds a non-finite value.
bool RunDecode(const KernelArgs& a, int64_t threads) {
  const DF d;
  const Layout lay(a, d);
  const int64_t slices = a.problem->shape.batch * a.problem->shape.heads;
  const int64_t splits = a.splits_per_slice;
  DecodePartials partials(lay, slices, splits);
  std::vector<std::unique_ptr<DecodeWorker>> workers;
  for (int64_t t = 0; t < threads; ++t) workers.push_back(std::make_unique<DecodeWorker>(a, lay));

  std::atomic<int64_t> next_item{0}, next_slice{0};
  std::atomic<bool> finite{true};
  SpinBarrier sync(static_cast<std::ptrdiff_t>(threads));
  auto work = [&](DecodeWorker& worker) {
    for (int64_t i; (i = next_item.fetch_add(1, std::memory_order_relaxed)) < slices * splits;) {
      // Items go out in order, so a thread's next one is likely `threads` further.
      worker.ExpectNext(i + threads, slices * splits, splits);
      if (!worker.ProcessSplit(i / splits, i % splits, splits, partials))
        finite.store(false, std::memory_order_relaxed);
    }
    sync.arrive_and_wait();  // orders every store above before the loads below
    if (!finite.load(std::memory_order_relaxed)) return;
    for (int64_t s; (s = next_slice.fetch_add(1, std::memory_order_relaxed)) < slices;)
      worker.Merge(s, splits, partials);
  };
  RunOnThreads(workers, sync, work);
  return finite.load();
}

}  // namespace attncheck::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
