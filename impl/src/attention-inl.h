// Per-target kernels of the fused attention. attention_kernels.cpp includes
// this file once per instruction set through hwy/foreach_target.h, so the
// include guard toggles with HWY_TARGET_TOGGLE instead of #pragma once.
//
// Work is split into items (batch, head, chunk of kChunkRows query rows; when
// streaming on one thread or with two slices or more per thread, a chunk is
// the whole slice; in the packed phase up to 4 × kChunkRows, PackedChunkRows).
// For each item the keys are walked in panels of kPanelKeys; each panel meets
// each tile of kTileRows query rows:
//   1. scores  S[tile][panel] = Q_tile · Kᵀ_panel (Kᵀ packed per slice, so a
//      vector of keys is Σ_x broadcast(q[r][x]) · Kᵀ[x][keys]);
//   2. masks   only where the panel crosses a row's key limit or an explicit
//      mask is present; panels wholly past every row's limit are skipped;
//   3. softmax the logits S · (scale/τ), one multiplier applied by the same
//      fused multiply-subtract that removes the running max m (applied after
//      the dot product, not to Q: scaling Q first would round each term and
//      break ties and exact integer products that a naive fp32 computation
//      keeps); the online update keeps the running max m, running sum l, and
//      the factor alpha = exp(m_old - m_new) that rescales the partial output;
//   4. output  O_tile = alpha · O_tile + P · V_panel (lanes over d_v).
// Where Kᵀ comes from depends on n_q (RunTiled):
//   - up to kStreamMaxRows query rows (a few chunks per slice; streams_kv) the chunk packs
//     each panel itself right before using it, into a buffer of its own that
//     stays in cache (PackKtPanel: N × N blocks transposed in registers), while
//     the next panel's keys and values are prefetched; it checks K and V for
//     values that are not finite as it reads them, and the output is staged
//     and copied out only when none was found (RunStreamed);
//   - beyond, all threads first pack a group of slices (PackedGroup), then
//     compute its chunks: each panel is then read by many chunks.
// Nothing of size n_q × n_k exists: the extra memory is the packed Kᵀ (and V
// when d_v needs padding) of one group of slices, shared by the threads, or
// when streaming one panel per thread and the staged output; plus
// O(chunk rows · d) per thread (chunk rows at most kStreamMaxRows).
// Calls that takes_decode_path() picks (n_q <= 32, or <= kDecodeMaxRows
// against long rows) take the decode path instead (RunDecode, decode-inl.h):
// K and V streamed once in place, keys split into fixed blocks.
// Out of fp32 range (DESIGN.md, "Range"): a row whose running max becomes +inf,
// whose sum or output is not finite, whose every readable logit is -inf, or
// which has a readable dot product that overflowed (looked for only where
// max|q|·max|k|·d_k says one can) is recomputed in long double (exact_row).

#if defined(ATTNCHECK_IMPL_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNCHECK_IMPL_ATTENTION_INL_H_
#undef ATTNCHECK_IMPL_ATTENTION_INL_H_
#else
#define ATTNCHECK_IMPL_ATTENTION_INL_H_
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include <sanitizer/asan_interface.h>  // no-op macros unless built with AddressSanitizer

#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernel_args.h"
#include "thread_pool.h"

HWY_BEFORE_NAMESPACE();
namespace attncheck::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr size_t kPanelKeys = 64;    // keys per block: one packed Kᵀ panel [d_k][64]
constexpr size_t kTileRows = 16;     // query rows sharing one score tile
constexpr size_t kGroupRows = 4;     // rows per register block of the micro-kernels
// x86 below AVX-512 (AVX2, SSE4) has 16 vector registers; AVX-512, NEON and
// SVE have 32. The register blocks below are sized by it.
constexpr bool kSixteenVectorRegisters = HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3;
// Vectors per register block of the micro-kernels: a block holds
// kGroupRows × kGroupVecs accumulators plus kGroupVecs loaded vectors and a
// broadcast. 4 × 4 + 5 = 21 registers; with 16, 4 × 4 spilled and square
// prefill took 1.3–1.45× as long as with 4 × 2 (docs/performance.md). The
// vectors of a block are independent sums, so the width changes no result bit.
constexpr size_t kGroupVecs = kSixteenVectorRegisters ? 2 : 4;
constexpr size_t kChunk = static_cast<size_t>(kChunkRows);
static_assert(kChunk % kTileRows == 0 && kTileRows % kGroupRows == 0);
static_assert((kTileRows * sizeof(float)) % HWY_MAX_BYTES == 0,
              "the softmax handles a tile's rows in whole vectors");

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kInf = std::numeric_limits<float>::infinity();

// max |x| over count floats, count a multiple of the lanes.
HWY_INLINE float MaxAbs(DF d, const float* HWY_RESTRICT x, size_t count) {
  VF m = hn::Zero(d);
  for (size_t i = 0; i < count; i += hn::Lanes(d)) m = hn::Max(m, hn::Abs(hn::LoadU(d, x + i)));
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// s[r][0 .. kVecs·N) = Σ_x q[r][x] · kt[x][0 .. kVecs·N) for kGroupRows rows.
// q has row stride dk; kt and s have row stride kPanelKeys.
// The sum over x runs in blocks of kDotBlock terms whose partial sums are then
// added: the rounding error of an fp32 dot product grows with the size of its
// running sum, and the logits' error dominates the whole computation's. On
// N(0,1) inputs the mean error of one dot product is 0.63x one chain's at
// d_k = 64 and 0.50x at d_k = 128 with blocks of 16 (blocks of 8: 0.58x,
// 0.49x; 32: 0.78x at d_k = 64). The partial sums go through the L1-resident
// score tile; each block's add, load and store per accumulator is what the
// blocks cost: the score loop ran at 0.67-0.74 of the probed peak with blocks
// of 8, 0.75-0.81 with 16 and 0.82-0.87 as one chain. 16 is the longest block
// with which the fused error stays below a naive composition's in the impl
// test that compares them (docs/performance.md).
constexpr size_t kDotBlock = 16;
// Terms of the score loop per Ahead::Step(): the lines fetched ahead are
// spread this finely whatever the block length.
constexpr size_t kStepTerms = 8;
static_assert(kDotBlock % kStepTerms == 0);
static_assert(kDotBlock == 16, "DotBlock's HWY_UNROLL takes the block length as a literal");

// A prefetch into L1 (prefetcht0). Into L2 (prefetcht1) instead, on the AMD
// EPYC Zen 5 VM with the workers' buffers in a kept block (CallArena), the
// decode path took 1.02-1.11x the time at n_q = 4-16, d = 128, and
// 1.26-1.28x at n_q = 16, d = 64 (AVX2: 1.00-1.02x and 1.19x); no shape
// took longer into L1 by more than the noise, the tiled path neither. Earlier
// code had measured the opposite on the Intel AVX-512 VM (into L2 0.88-0.94x
// the time at n_q = 16-32) and on Zen 5 (0.93x at n_q = 16):
// docs/performance-decode.md, "Prefetch into L1 again". With a 32 KiB L1
// (the AMD EPYC Zen 4 VM) the decode path's 2-32 rows fetch into L2 instead
// (KernelArgs::decode_prefetch_into_l2): "A 32 KiB L1: fetch ahead into L2".
HWY_INLINE void PrefetchToL1(const void* p) { __builtin_prefetch(p, /*rw=*/0, /*locality=*/3); }
HWY_INLINE void PrefetchToL2(const void* p) { __builtin_prefetch(p, /*rw=*/0, /*locality=*/2); }
// Into L1, or into L2 where the lines fetched ahead would crowd L1 out
// (KernelArgs::decode_prefetch_into_l2).
HWY_INLINE void PrefetchLine(const void* p, bool into_l2) {
  if (into_l2) PrefetchToL2(p);
  else PrefetchToL1(p);
}

// Cache lines to fetch ahead (the next panel's keys and values when
// streaming; the next block's when decoding), spread over the steps of the
// loops that compute on the current one: issued all at once,
// or faster than memory delivers them, they fill the core's miss buffers and
// stall it.
class Prefetcher {
 public:
  Prefetcher() = default;
  explicit Prefetcher(bool into_l2) : into_l2_(into_l2) {}
  // Up to two ranges (the next panel's keys and values); more are ignored.
  void Add(const float* x, size_t count) {
    if (ranges_ == 2) return;
    begin_[ranges_] = reinterpret_cast<const char*>(x);
    end_[ranges_] = reinterpret_cast<const char*>(x + count);
    if (ranges_++ == 0) {
      next_ = begin_[0];
      stop_ = end_[0];
    }
  }
  // Spreads the lines added so far over `steps` calls of Step() (at least one
  // line a step), so that few are left for Finish() to issue in a burst.
  void Spread(size_t steps) {
    size_t lines = 0;
    for (size_t i = 0; i < ranges_; ++i) lines += static_cast<size_t>(end_[i] - begin_[i] + 63) / 64;
    per_step_ = std::max<size_t>(1, hwy::DivCeil(lines, std::max<size_t>(steps, 1)));
  }
  HWY_INLINE void Step() {
    for (size_t i = 0; i < per_step_; ++i) {
      if (next_ >= stop_ && !NextRange()) return;
      PrefetchLine(next_, into_l2_);
      next_ += 64;
    }
  }
  void Finish() {
    do {
      for (; next_ < stop_; next_ += 64) PrefetchLine(next_, into_l2_);
    } while (NextRange());
  }

 private:
  // Moves on to the next range; false (and no more lines a step) past the last.
  bool NextRange() {
    if (current_ + 1 >= ranges_) {
      per_step_ = 0;
      return false;
    }
    ++current_;
    next_ = begin_[current_];
    stop_ = end_[current_];
    return true;
  }

  const char* begin_[2] = {};
  const char* end_[2] = {};
  const char* next_ = nullptr;  // the next line of range current_, which ends at stop_
  const char* stop_ = nullptr;
  size_t ranges_ = 0, current_ = 0, per_step_ = 1;
  bool into_l2_ = false;
};

// The packed-group path reads panels packed before the phase: nothing to fetch.
struct NoPrefetch {
  HWY_INLINE void Step() {}
};

// acc[r][c] = Σ_{x0 <= x < x0+count} q[r][x] · kt[x][c·N ..]; count = kCount
// when it is not 0 (a whole block, unrolled). One step of `ahead` every
// kStepTerms terms.
template <size_t kVecs, size_t kCount, class Ahead>
HWY_INLINE void DotBlock(DF d, const float* HWY_RESTRICT q, size_t dk, size_t x0, size_t count,
                         const float* HWY_RESTRICT kt, VF (&acc)[kGroupRows][kVecs], Ahead& ahead) {
  const size_t N = hn::Lanes(d);
  for (size_t r = 0; r < kGroupRows; ++r)
    for (size_t c = 0; c < kVecs; ++c) acc[r][c] = hn::Zero(d);
  const size_t n = kCount != 0 ? kCount : count;
  HWY_UNROLL(16)  // kDotBlock
  for (size_t i = 0; i < n; ++i) {
    if (i % kStepTerms == 0) ahead.Step();
    const size_t x = x0 + i;
    const float* HWY_RESTRICT krow = kt + x * kPanelKeys;
    VF kv[kVecs];
    for (size_t c = 0; c < kVecs; ++c) kv[c] = hn::Load(d, krow + c * N);
    for (size_t r = 0; r < kGroupRows; ++r) {
      const VF qv = hn::Set(d, q[r * dk + x]);
      for (size_t c = 0; c < kVecs; ++c) acc[r][c] = hn::MulAdd(qv, kv[c], acc[r][c]);
    }
  }
}

template <size_t kVecs, class Ahead>
HWY_INLINE void ScoreGroup(DF d, const float* HWY_RESTRICT q, size_t dk,
                           const float* HWY_RESTRICT kt, float* HWY_RESTRICT s, Ahead& ahead) {
  const size_t N = hn::Lanes(d);
  VF acc[kGroupRows][kVecs];
  for (size_t x0 = 0; x0 < dk; x0 += kDotBlock) {
    if (x0 + kDotBlock <= dk)
      DotBlock<kVecs, kDotBlock>(d, q, dk, x0, kDotBlock, kt, acc, ahead);
    else
      DotBlock<kVecs, 0>(d, q, dk, x0, dk - x0, kt, acc, ahead);
    for (size_t r = 0; r < kGroupRows; ++r) {
      for (size_t c = 0; c < kVecs; ++c) {
        float* out = s + r * kPanelKeys + c * N;
        hn::Store(x0 == 0 ? acc[r][c] : hn::Add(hn::Load(d, out), acc[r][c]), d, out);
      }
    }
  }
}

// Scores of one tile (kTileRows rows) against one panel (kPanelKeys keys).
template <class Ahead>
HWY_INLINE void ScoreTile(DF d, const float* HWY_RESTRICT q, size_t dk,
                          const float* HWY_RESTRICT panel, float* HWY_RESTRICT s, Ahead& ahead) {
  const size_t N = hn::Lanes(d);
  const size_t vecs = kPanelKeys / N;
  for (size_t g = 0; g < kTileRows; g += kGroupRows) {
    const float* qg = q + g * dk;
    float* sg = s + g * kPanelKeys;
    size_t c = 0;
    for (; c + kGroupVecs <= vecs; c += kGroupVecs)
      ScoreGroup<kGroupVecs>(d, qg, dk, panel + c * N, sg + c * N, ahead);
    for (; c < vecs; ++c) ScoreGroup<1>(d, qg, dk, panel + c * N, sg + c * N, ahead);
  }
}

// Calls of Ahead::Step() in one ScoreTile (one per kStepTerms terms).
inline size_t ScoreTileSteps(DF d, size_t dk) {
  const size_t vecs = kPanelKeys / hn::Lanes(d);
  return (kTileRows / kGroupRows) * (vecs / kGroupVecs + vecs % kGroupVecs) * hwy::DivCeil(dk, kStepTerms);
}

// Sets to -inf every score of the tile whose key is not readable: at or past
// the row's key limit (vectorised: lane j of the panel is key j0 + j), or
// refused by the explicit mask (row stride n_k; read only below the limit).
// Rows of the tile past the chunk's end have limit 0, so they are fully masked.
HWY_INLINE void MaskTile(DF d, float* HWY_RESTRICT s, const int64_t* limits, int64_t j0,
                         const uint8_t* mask, size_t nk, size_t rows) {
  const size_t N = hn::Lanes(d);
  const hn::RebindToSigned<DF> di;
  const auto lane = hn::Iota(di, 0);
  const VF masked = hn::Set(d, kNegInf);
  for (size_t r = 0; r < kTileRows; ++r) {
    float* row = s + r * kPanelKeys;
    const int64_t readable = std::clamp<int64_t>(limits[r] - j0, 0, static_cast<int64_t>(kPanelKeys));
    const auto limit = hn::Set(di, static_cast<int32_t>(readable));
    for (size_t c = 0; c < kPanelKeys; c += N) {
      const auto key = hn::Add(lane, hn::Set(di, static_cast<int32_t>(c)));
      const auto below = hn::RebindMask(d, hn::Lt(key, limit));
      hn::Store(hn::IfThenElse(below, hn::Load(d, row + c), masked), d, row + c);
    }
    if (mask && r < rows) {
      const uint8_t* mrow = mask + r * nk;
      for (size_t j = 0; j < static_cast<size_t>(readable); ++j)
        if (mrow[j] == 0) row[j] = kNegInf;
    }
  }
}

// rows[0 .. N) hold partial values of N rows: returns the vector whose lane i
// is op over the lanes of rows[i] (log2(N) rounds, each combining adjacent
// lanes, the rows' values moved together by ConcatEven/ConcatOdd). One such
// reduction for N rows costs less than N reductions of one vector each, and
// leaves no row waiting on its own chain of shuffles. rows is overwritten.
template <class Op>
HWY_INLINE VF ReduceRows(DF d, VF* rows, const Op& op) {
#if HWY_TARGET != HWY_SCALAR
  for (size_t n = hn::Lanes(d); n > 1; n /= 2) {
    for (size_t i = 0; i < n / 2; ++i)
      rows[i] = op(hn::ConcatEven(d, rows[2 * i + 1], rows[2 * i]),
                   hn::ConcatOdd(d, rows[2 * i + 1], rows[2 * i]));
  }
#else
  (void)d;
  (void)op;
#endif
  return rows[0];
}

// v with its lanes in bit-reversed order. ReduceRows of such vectors adds the
// lanes in the order of hn::SumOfLanes (lanes N/2 apart first, then N/4 ...),
// so that a row's sum is the same as when each row was reduced on its own.
HWY_INLINE VF BitReverseLanes(DF d, VF v) {
#if HWY_TARGET != HWY_SCALAR
  constexpr size_t kMaxLanes = hn::MaxLanes(DF());
  const size_t N = hn::Lanes(d);
  HWY_ALIGN int32_t index[kMaxLanes];
  for (size_t j = 0; j < N; ++j) {
    size_t reversed = 0;
    for (size_t bit = 1, top = N / 2; bit < N; bit *= 2, top /= 2)
      if (j & bit) reversed |= top;
    index[j] = static_cast<int32_t>(reversed);
  }
  return hn::TableLookupLanes(v, hn::SetTableIndices(d, index));
#else
  (void)d;
  return v;
#endif
}

// e^r for r = x − n·ln2 (ln2 in two parts, so that r is nearly exact), |r| <= ln2/2:
// Horner on hn::Exp's (Cephes') coefficients. SoftmaxExp then scales it by 2^n.
HWY_INLINE VF ExpOfRemainder(DF d, VF x, VF n) {
  VF r = hn::MulAdd(n, hn::Set(d, -0.693145751953125f), x);
  r = hn::MulAdd(n, hn::Set(d, -1.428606765330187045e-6f), r);
  VF p = hn::Set(d, 0.000198527617612853646278381f);
  p = hn::MulAdd(p, r, hn::Set(d, 0.00139304355252534151077271f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.00833336077630519866943359f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.0416664853692054748535156f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.166666671633720397949219f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  return p;
}

// exp(x) for the softmax's arguments, x <= 0 (0 for -inf and NaN, as hn::Exp).
// AVX-512: x = n·ln2 + r, |r| <= ln2/2, e^r by Horner on hn::Exp's (Cephes')
// coefficients, and 2^n applied by VSCALEFPS, which rounds a result below
// float's normal range once, as a subnormal: 13 vector operations where
// hn::Exp takes about 24 (two multiplications by powers of two for that range).
// AVX2: the same n, r and polynomial; 2^n built in the exponent field and
// applied by one multiplication while every lane's 2^n is a normal float
// (x >= -87, nearly always), else by two as hn::Exp: 16 operations in the
// common case. Square prefill on the AMD EPYC Zen 3 VM took 0.88-0.96x the
// time with it (docs/performance.md, "AVX2: a cheaper exp, P · V in blocks of 4 × 3").
// kNormal: the caller has checked that every lane is >= -87 (SoftmaxExpBlock),
// so AVX2 takes the one-multiplication path without a branch.
template <bool kNormal = false>
HWY_INLINE VF SoftmaxExp(DF d, VF x) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  static_assert(hn::MaxLanes(DF()) == 16, "one __m512 per vector");
  // exp(-104) rounds to 0; -inf goes there, and so does NaN (x86 max returns
  // its second operand when either is NaN; impl_softmax_exp_tests checks it).
  x = hn::Max(x, hn::Set(d, -104.0f));
  const VF n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));
  const VF p = ExpOfRemainder(d, x, n);
  return VF{_mm512_scalef_ps(p.raw, n.raw)};
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
  const hn::RebindToSigned<DF> di;
  if constexpr (!kNormal) x = hn::Max(x, hn::Set(d, -104.0f));  // -inf and NaN too (the second operand), as above
  // n = x / ln 2 rounded to nearest even by adding 1.5 · 2^23: the low bits of
  // t then hold n, so that t << 23 is n << 23, the exponent field of 2^n.
  const VF shifter = hn::Set(d, 12582912.0f);
  const VF t = hn::Add(hn::Mul(x, hn::Set(d, 1.44269504088896341f)), shifter);
  const VF n = hn::Sub(t, shifter);
  const VF p = ExpOfRemainder(d, x, n);
  // n >= -126 (x >= -87): 2^n is a normal float, one multiplication.
  if (kNormal || HWY_LIKELY(hn::AllTrue(d, hn::Ge(x, hn::Set(d, -87.0f)))))
    return hn::Mul(p, hn::BitCast(d, hn::Add(hn::ShiftLeft<23>(hn::BitCast(di, t)), hn::Set(di, 127 << 23))));
  // Down to n = -150: 2^n as 2^(n - h) · 2^h, h = n / 2 (both normal), so
  // that only the second product rounds, as hn::Exp does.
  const auto ni = hn::ConvertTo(di, n);
  const auto h = hn::ShiftRight<1>(ni);
  const VF first = hn::Mul(p, hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::Sub(ni, h), hn::Set(di, 127)))));
  return hn::Mul(first, hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(h, hn::Set(di, 127)))));
#else
  return hn::Exp(d, x);
#endif
}

// x[c] = SoftmaxExp(x[c]) for kCount vectors, the same bits. On AVX2 one
// check that every lane of all of them is >= -87 (2^n normal) takes the
// one-multiplication path for the whole block: a check per vector had put
// each exp in a basic block of its own, ending in its branch, so that the
// compiler could not interleave their chains of dependent operations. A
// tile's row at once (SoftmaxTile): square prefill took 0.92-1.00x the time
// on the AMD EPYC Zen 3 VM, 0.97-0.98x in its calmest run (n = 1024-2048,
// d = 64 and 128, 1 and 2 threads; docs/performance.md, "AVX2: the
// softmax's exps a row at a time").
template <size_t kCount>
HWY_INLINE void SoftmaxExpBlock(DF d, VF (&x)[kCount]) {
#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
  // Each vector compared, not their minimum: x86's min drops a NaN in its
  // first operand, and NaN must take SoftmaxExp's path to 0.
  const VF normal = hn::Set(d, -87.0f);
  auto all_normal = hn::Ge(x[0], normal);
  for (size_t c = 1; c < kCount; ++c) all_normal = hn::And(all_normal, hn::Ge(x[c], normal));
  if (HWY_LIKELY(hn::AllTrue(d, all_normal))) {
    for (size_t c = 0; c < kCount; ++c) x[c] = SoftmaxExp</*kNormal=*/true>(d, x[c]);
    return;
  }
#endif
  for (size_t c = 0; c < kCount; ++c) x[c] = SoftmaxExp(d, x[c]);
}

// row[0 .. kPanelKeys) = exp(row · scale − shift), the row's vectors in one
// SoftmaxExpBlock; returns their sum by lanes, the vectors added in order.
// Masked scores are -inf; SoftmaxExp returns exactly 0 for them. The logit
// is rounded before the max is subtracted (not one fused multiply-
// subtract): shift is the rounded max logit, so the max's argument is exactly
// 0 and no argument exceeds it. With a fused s·multiplier − m the max's
// argument is the product's rounding error, which for logits past 2^31
// exceeds ±88 and sends exp to inf (NaN rows) or to 0 (all-zero rows).
HWY_INLINE VF ExpRow(DF d, float* HWY_RESTRICT row, VF scale, VF shift) {
  const size_t N = hn::Lanes(d);
  constexpr size_t kVecs = kPanelKeys / hn::MaxLanes(DF());  // N is MaxLanes on fixed-width targets
  VF p[kVecs];
  for (size_t c = 0; c < kVecs; ++c) p[c] = hn::Sub(hn::Mul(hn::Load(d, row + c * N), scale), shift);
  SoftmaxExpBlock(d, p);
  VF sum = hn::Zero(d);
  for (size_t c = 0; c < kVecs; ++c) {
    hn::Store(p[c], d, row + c * N);
    sum = hn::Add(sum, p[c]);
  }
  return sum;
}

// Online softmax over one tile: turns each row of dot products s into
// exp(s · multiplier - m_new), updates the running max m and sum l (in logit
// units), and leaves in alpha the factor by which the row's partial output
// must be rescaled. multiplier > 0, so the max of s gives the max logit.
// Rows are taken N at a time, their maxima and sums reduced together (ReduceRows).
HWY_INLINE void SoftmaxTile(DF d, float* HWY_RESTRICT s, float multiplier, float* HWY_RESTRICT m,
                            float* HWY_RESTRICT l, float* HWY_RESTRICT alpha) {
  constexpr size_t kMaxLanes = hn::MaxLanes(DF());
  const size_t N = hn::Lanes(d);
  constexpr size_t kVecs = kPanelKeys / kMaxLanes;  // vectors a row (N is kMaxLanes on fixed-width targets)
  const VF scale = hn::Set(d, multiplier);
  const VF neg_inf = hn::Set(d, kNegInf);
  HWY_ALIGN float m_new[kTileRows];
  for (size_t r0 = 0; r0 < kTileRows; r0 += N) {
    VF part[kMaxLanes];
    for (size_t i = 0; i < N; ++i) {
      const float* row = s + (r0 + i) * kPanelKeys;
      VF vmax = hn::Load(d, row);
      for (size_t c = 1; c < kVecs; ++c) vmax = hn::Max(vmax, hn::Load(d, row + c * N));
      part[i] = vmax;
    }
    const VF old_max = hn::Load(d, m + r0);
    const VF new_max = hn::Max(old_max, hn::Mul(ReduceRows(d, part, [](VF a, VF b) { return hn::Max(a, b); }), scale));
    hn::Store(new_max, d, m_new + r0);
    // alpha = exp(m_old - m_new): 0 on a row's first readable panel
    // (m_old = -inf), 1 while a row has read nothing (both -inf).
    const VF factor = SoftmaxExp(d, hn::Sub(old_max, new_max));
    hn::Store(hn::IfThenElse(hn::Eq(new_max, neg_inf), hn::Set(d, 1.0f), factor), d, alpha + r0);
  }
  for (size_t r0 = 0; r0 < kTileRows; r0 += N) {
    VF sums[kMaxLanes];
    for (size_t i = 0; i < N; ++i) {
      const size_t r = r0 + i;
      float* row = s + r * kPanelKeys;
      sums[i] = hn::Zero(d);
      if (m_new[r] == kNegInf) {  // nothing readable yet: no weights, output stays zero
        for (size_t c = 0; c < kVecs; ++c) hn::Store(hn::Zero(d), d, row + c * N);
        continue;
      }
      sums[i] = ExpRow(d, row, scale, hn::Set(d, m_new[r]));
    }
    for (size_t i = 0; i < N; ++i) sums[i] = BitReverseLanes(d, sums[i]);
    const VF row_sum = ReduceRows(d, sums, [](VF a, VF b) { return hn::Add(a, b); });
    hn::Store(hn::Add(hn::Mul(hn::Load(d, l + r0), hn::Load(d, alpha + r0)), row_sum), d, l + r0);
    hn::Store(hn::Load(d, m_new + r0), d, m + r0);
  }
}

// o[r][0 .. kVecs·N) = alpha[r] · o[r][...] + Σ_{j<kcount} p[r][j] · v[j][...]
// for kRows rows; p[r][j] is p[r · p_row + j · p_key] (the tiled path's
// score tile: p_row = kPanelKeys, p_key = 1), v has stride vs, o stride os.
// One step of `ahead` a key.
template <size_t kVecs, class Ahead, size_t kRows = kGroupRows>
HWY_INLINE void AccumulateGroup(DF d, const float* HWY_RESTRICT p, size_t p_row, size_t p_key, size_t kcount,
                                const float* HWY_RESTRICT v, size_t vs, float* HWY_RESTRICT o,
                                size_t os, const float* HWY_RESTRICT alpha, Ahead& ahead) {
  const size_t N = hn::Lanes(d);
  VF acc[kRows][kVecs];
  for (size_t r = 0; r < kRows; ++r) {
    const VF a = hn::Set(d, alpha[r]);
    for (size_t c = 0; c < kVecs; ++c) acc[r][c] = hn::Mul(hn::Load(d, o + r * os + c * N), a);
  }
  for (size_t j = 0; j < kcount; ++j) {
    ahead.Step();
    const float* HWY_RESTRICT vrow = v + j * vs;
    VF vv[kVecs];
    for (size_t c = 0; c < kVecs; ++c) vv[c] = hn::LoadU(d, vrow + c * N);
    for (size_t r = 0; r < kRows; ++r) {
      const VF pv = hn::Set(d, p[r * p_row + j * p_key]);
      for (size_t c = 0; c < kVecs; ++c) acc[r][c] = hn::MulAdd(pv, vv[c], acc[r][c]);
    }
  }
  for (size_t r = 0; r < kRows; ++r)
    for (size_t c = 0; c < kVecs; ++c) hn::Store(acc[r][c], d, o + r * os + c * N);
}

// Vectors of d_v per register block of P · V by rows (AccumulateRowGroup: the
// tiled path's AccumulateTile, the decode path's AccumulateRows) with 16
// vector registers: 4 × 3 accumulators, 3 loaded vectors and a broadcast fill
// them, and 12 independent sums keep both FMA units busy where 4 × 2 gave 8
// sums for FMAs of 4 cycles' latency. On the AMD EPYC Zen 3 VM (AVX2), square
// prefill n = 1024 took 0.95-0.99x the time with it (d = 64 and 128, 1
// thread; docs/performance.md, "AVX2: a cheaper exp, P · V in blocks of
// 4 × 3"). The score loop keeps 4 × 2: with 4 × 3 there too the call took
// 0.99-1.05x the time (its partial sums need registers too), and with 6 × 2
// (rows 6 + 6 + 4) 1.02-1.07x (docs/performance.md, "AVX2: where a square
// call's time goes").
constexpr size_t kOutputVecs = kSixteenVectorRegisters ? 3 : kGroupVecs;

// Width of the register block at vector c of d_v's `vecs` for P · V: kOutputVecs
// vectors, then three, two or one; with blocks of three, four vectors left
// take two blocks of two (three and one would leave one block with four sums
// only).
inline size_t OutputBlockWidth(size_t c, size_t vecs) {
  const size_t left = vecs - c;
  if (left >= kOutputVecs && !(kOutputVecs == 3 && left == 4)) return kOutputVecs;
  return std::min<size_t>(left, left == 3 ? 3 : 2);
}

// Register blocks (AccumulateGroup calls) of P · V over `vecs` vectors of d_v.
inline size_t OutputBlocks(size_t vecs) {
  size_t blocks = 0;
  for (size_t c = 0; c < vecs; c += OutputBlockWidth(c, vecs)) ++blocks;
  return blocks;
}

// AccumulateGroup over `vecs` whole vectors of d_v for kGroupRows rows, in
// blocks of OutputBlockWidth.
template <class Ahead>
HWY_INLINE void AccumulateRowGroup(DF d, const float* HWY_RESTRICT p, size_t p_row, size_t p_key, size_t kcount,
                                   const float* HWY_RESTRICT v, size_t vs, float* HWY_RESTRICT o, size_t os,
                                   size_t vecs, const float* HWY_RESTRICT alpha, Ahead& ahead) {
  const size_t N = hn::Lanes(d);
  for (size_t c = 0; c < vecs;) {
    const size_t width = OutputBlockWidth(c, vecs);
    if (width == kOutputVecs)
      AccumulateGroup<kOutputVecs>(d, p, p_row, p_key, kcount, v + c * N, vs, o + c * N, os, alpha, ahead);
    else if (width == 3)
      AccumulateGroup<3>(d, p, p_row, p_key, kcount, v + c * N, vs, o + c * N, os, alpha, ahead);
    else if (width == 2)
      AccumulateGroup<2>(d, p, p_row, p_key, kcount, v + c * N, vs, o + c * N, os, alpha, ahead);
    else
      AccumulateGroup<1>(d, p, p_row, p_key, kcount, v + c * N, vs, o + c * N, os, alpha, ahead);
    c += width;
  }
}

// The output update of one tile over one panel.
HWY_INLINE void AccumulateTile(DF d, const float* HWY_RESTRICT p, size_t kcount,
                               const float* HWY_RESTRICT v, size_t vs, float* HWY_RESTRICT o,
                               size_t dvp, const float* HWY_RESTRICT alpha) {
  NoPrefetch none;
  for (size_t g = 0; g < kTileRows; g += kGroupRows)
    AccumulateRowGroup(d, p + g * kPanelKeys, kPanelKeys, 1, kcount, v, vs, o + g * dvp, dvp, dvp / hn::Lanes(d),
                       alpha + g, none);
}

// The buffers of one call's workers (rows, scores, outputs, partials), carved
// from one block that the calling thread keeps for its next call, as
// CallScratch keeps its own (the block grows and never shrinks). Allocated
// and freed on every call, they cost a page fault per 4 KiB page whenever the
// allocator had returned them to the system: `attncheck bench` timed n = 512,
// d = 128 on 1 thread at 1.6 ms instead of 0.7 (docs/performance.md,
// "Workers' buffers kept between calls"). The
// block starts on a page boundary, so that where each buffer falls within a
// page (which sets of the caches its rows share with the others') is the
// same from one call and one run to the next.
class CallArena {
 public:
  static CallArena& OfThisThread() {
    thread_local CallArena arena;
    return arena;
  }

  CallArena() = default;
  CallArena(const CallArena&) = delete;
  CallArena& operator=(const CallArena&) = delete;
  ~CallArena() {
    if (block_) ASAN_UNPOISON_MEMORY_REGION(block_.get() + start_, capacity_);
  }

  // Empties the arena for a new call: pieces taken before are no longer
  // valid. A call that outgrew the block (its pieces past the block were
  // allocated one by one) leaves it grown to that call's whole size.
  void Begin() {
    overflow_.clear();
    if (needed_ > capacity_) {
      if (block_) ASAN_UNPOISON_MEMORY_REGION(block_.get() + start_, capacity_);
      block_.reset();  // release the old one first: the peak stays one block
      block_ = hwy::AllocateAligned<uint8_t>(needed_ + kPage);
      if (!block_) throw std::bad_alloc();
      capacity_ = needed_;
      start_ = (kPage - reinterpret_cast<uintptr_t>(block_.get()) % kPage) % kPage;
    }
    // Under AddressSanitizer the block is poisoned but for the pieces handed
    // out, which it separates by a red zone: a kernel that overruns one of
    // its buffers is caught as it was when each was an allocation of its own.
    if (block_) ASAN_POISON_MEMORY_REGION(block_.get() + start_, capacity_);
    used_ = 0;
    needed_ = 0;
  }

  // count values of T on a 64-byte boundary, uninitialised, valid until the
  // next Begin().
  template <typename T>
  T* Take(size_t count) {
    const size_t size = std::max<size_t>(count, 1) * sizeof(T);
    const size_t bytes = hwy::RoundUpTo(size, kAlign) + kRedZone;
    needed_ += bytes;
    if (used_ + bytes <= capacity_) {
      T* piece = reinterpret_cast<T*>(block_.get() + start_ + used_);
      ASAN_UNPOISON_MEMORY_REGION(piece, size);
      used_ += bytes;
      return piece;
    }
    overflow_.push_back(hwy::AllocateAligned<uint8_t>(bytes));
    if (!overflow_.back()) throw std::bad_alloc();
    return reinterpret_cast<T*>(overflow_.back().get());
  }

 private:
  static constexpr size_t kAlign = 64, kPage = 4096;
#if defined(__SANITIZE_ADDRESS__)
  static constexpr size_t kRedZone = kAlign;
#else
  static constexpr size_t kRedZone = 0;
#endif
  hwy::AlignedFreeUniquePtr<uint8_t[]> block_;
  std::vector<hwy::AlignedFreeUniquePtr<uint8_t[]>> overflow_;
  size_t capacity_ = 0, start_ = 0, used_ = 0, needed_ = 0;
};

// count values of T from the calling thread's CallArena: only on the thread
// that called attention() (the workers' buffers are made there, before the
// threads start), which Begin()s the arena at the start of each call.
template <typename T>
T* Allocate(size_t count) {
  return CallArena::OfThisThread().Take<T>(count);
}

// Sizes of one call, shared by every part of it.
struct Layout {
  Layout(const KernelArgs& a, DF d) {
    const Shape& sh = a.problem->shape;
    dk = static_cast<size_t>(sh.d_k);
    dv = static_cast<size_t>(sh.d_v);
    nq = static_cast<size_t>(sh.n_q);
    nk = static_cast<size_t>(sh.n_k);
    dvp = hwy::DivCeil(dv, hn::Lanes(d)) * hn::Lanes(d);
    panels = hwy::DivCeil(nk, kPanelKeys);
    // V is copied into aligned panels when its rows are not whole aligned
    // vectors: d_v not a multiple of the lanes, or the caller's V not aligned
    // to a vector (a std::vector or NumPy buffer is often 16-byte aligned).
    // P·V loads every value of V once per tile, and a load that straddles two
    // cache lines costs two: with V 16 bytes off, n = 128 and 1024 (d = 64,
    // 1 thread) took 1.06-1.16x the time of an aligned V.
    const auto v_address = reinterpret_cast<uintptr_t>(a.v);
    copy_v = dvp != dv || v_address % (hn::Lanes(d) * sizeof(float)) != 0;
    // Every partial sum of an fp32 dot product is at most Σ|q_x k_x|·(1+u)^(d_k+2)
    // <= d_k·max|q|·max|k|·e^((d_k+2)·u); below this bound (with u doubled) none overflows.
    overflow_free = static_cast<double>(std::numeric_limits<float>::max()) /
                    std::exp(static_cast<double>(dk + 2) * 0x1p-23) / static_cast<double>(dk);
  }
  size_t dk = 0, dv = 0, dvp = 0, nq = 0, nk = 0, panels = 0;
  bool copy_v = false;  ///< P·V reads V from aligned, padded panels (PadVPanel)
  double overflow_free = 0.0;  ///< max|q|·max|k| below which no fp32 dot product overflows
};

// Independent chains of the checks below (max |k|, finite values): one chain
// waits out the latency of each operation. With four, the streamed tiled path
// (n_q = 64, d = 128, against n_k = 1024-16384) took 0.955-0.97x the time.
constexpr size_t kCheckChains = 4;  // the sums below are combined as a tree of four

// Whether count floats are all finite (x·0 + sum is NaN exactly where x is ±inf or NaN).
HWY_INLINE bool AllFiniteValues(DF d, const float* HWY_RESTRICT x, size_t count) {
  const size_t N = hn::Lanes(d);
  const VF zero = hn::Zero(d);
  VF sums[kCheckChains];
  for (VF& sum : sums) sum = zero;
  size_t i = 0;
  for (; i + kCheckChains * N <= count; i += kCheckChains * N)
    for (size_t c = 0; c < kCheckChains; ++c) sums[c] = hn::MulAdd(hn::LoadU(d, x + i + c * N), zero, sums[c]);
  for (; i + N <= count; i += N) sums[0] = hn::MulAdd(hn::LoadU(d, x + i), zero, sums[0]);
  const VF nonfinite = hn::Add(hn::Add(sums[0], sums[1]), hn::Add(sums[2], sums[3]));
  bool finite = hn::AllTrue(d, hn::Eq(nonfinite, nonfinite));
  for (; i < count; ++i) finite = finite && std::isfinite(x[i]);
  return finite;
}

#if HWY_TARGET != HWY_SCALAR
// Transposes the N × N block rows[0 .. N) in registers: log2(N) rounds that
// each put the even lanes of every pair of rows in the first half of the rows
// and the odd lanes in the second (each round rotates the bits of the index
// row·N + column right by one; log2(N) rounds swap row and column).
HWY_INLINE void TransposeBlock(DF d, VF* rows) {
  constexpr size_t kN = hn::MaxLanes(DF());
  VF next[kN];
  for (size_t round = 1; round < kN; round *= 2) {
    for (size_t i = 0; i < kN / 2; ++i) {
      next[i] = hn::ConcatEven(d, rows[2 * i + 1], rows[2 * i]);
      next[kN / 2 + i] = hn::ConcatOdd(d, rows[2 * i + 1], rows[2 * i]);
    }
    for (size_t i = 0; i < kN; ++i) rows[i] = next[i];
  }
}
#endif

// Packs panel pi of one slice's K ([n_k][d_k], row-major) as Kᵀ [d_k][kPanelKeys]
// (keys past n_k zero), N × N blocks transposed in registers. Returns max |k|
// over the panel; clears `finite` when one of its keys holds a value that is not.
HWY_INLINE float PackKtPanel(DF d, const float* HWY_RESTRICT k, size_t nk, size_t dk, size_t pi,
                             float* HWY_RESTRICT panel, bool& finite) {
  const size_t key0 = pi * kPanelKeys;
  size_t simd_columns = 0;  // columns [0, simd_columns) of every key go through registers
  const VF zero = hn::Zero(d);
  VF maxima[kCheckChains], sums[kCheckChains];  // max |k| and the finite check (AllFiniteValues)
  for (size_t c = 0; c < kCheckChains; ++c) maxima[c] = sums[c] = zero;
#if HWY_TARGET != HWY_SCALAR
  constexpr size_t kN = hn::MaxLanes(DF());
  static_assert(kPanelKeys % kN == 0 && kN % kCheckChains == 0);
  if (key0 + kPanelKeys <= nk && hn::Lanes(d) == kN) {
    simd_columns = dk / kN * kN;
    for (size_t j = 0; j < kPanelKeys; j += kN) {
      const float* HWY_RESTRICT kj = k + (key0 + j) * dk;
      for (size_t x = 0; x < simd_columns; x += kN) {
        VF rows[kN];
        for (size_t i = 0; i < kN; ++i) {
          rows[i] = hn::LoadU(d, kj + i * dk + x);
          maxima[i % kCheckChains] = hn::Max(maxima[i % kCheckChains], hn::Abs(rows[i]));
          sums[i % kCheckChains] = hn::MulAdd(rows[i], zero, sums[i % kCheckChains]);
        }
        TransposeBlock(d, rows);
        for (size_t i = 0; i < kN; ++i) hn::Store(rows[i], d, panel + (x + i) * kPanelKeys + j);
      }
    }
  }
#endif
  const VF vmax = hn::Max(hn::Max(maxima[0], maxima[1]), hn::Max(maxima[2], maxima[3]));
  const VF nonfinite = hn::Add(hn::Add(sums[0], sums[1]), hn::Add(sums[2], sums[3]));
  float kmax = hn::GetLane(hn::MaxOfLanes(d, vmax));
  bool ok = hn::AllTrue(d, hn::Eq(nonfinite, nonfinite));
  for (size_t j = 0; j < kPanelKeys; ++j) {
    const size_t key = key0 + j;
    for (size_t x = simd_columns; x < dk; ++x) {
      const float value = key < nk ? k[key * dk + x] : 0.0f;
      panel[x * kPanelKeys + j] = value;
      kmax = std::max(kmax, std::abs(value));
      ok = ok && std::isfinite(value);
    }
  }
  if (!ok) finite = false;
  return kmax;
}

// Keys [pi·kPanelKeys, +kPanelKeys) of one slice's V ([n_k][d_v]) with rows
// padded to dvp columns (zeros past d_v and past n_k), for the register
// blocks of AccumulateTile, which load whole vectors.
inline void PadVPanel(const float* HWY_RESTRICT v, const Layout& lay, size_t pi, float* HWY_RESTRICT out) {
  const DF d;
  const size_t N = hn::Lanes(d);
  if (lay.dvp == lay.dv && (pi + 1) * kPanelKeys <= lay.nk) {  // a whole panel, nothing to pad
    const float* HWY_RESTRICT rows = v + pi * kPanelKeys * lay.dv;
    for (size_t i = 0; i < kPanelKeys * lay.dv; i += N) hn::Store(hn::LoadU(d, rows + i), d, out + i);
    return;
  }
  for (size_t j = 0; j < kPanelKeys; ++j) {
    const size_t key = pi * kPanelKeys + j;
    for (size_t c = 0; c < lay.dvp; ++c)
      out[j * lay.dvp + c] = key < lay.nk && c < lay.dv ? v[key * lay.dv + c] : 0.0f;
  }
}

// The calling thread's scratch, kept for its next call (it grows and never
// shrinks, like the peers' scratch): the packed Kᵀ of a group of slices, or
// the staged output when streaming. A fresh allocation of tens of MB per call
// costs a page fault per 4 KiB page on first touch, which on virtual machines
// took several times longer than the attention itself (n_q = 64, n_k = 16384,
// 8 heads, d = 128: 160–280 ms instead of about 60 ms).
inline float* CallScratch(size_t count) {
  thread_local hwy::AlignedFreeUniquePtr<float[]> buffer;
  thread_local size_t size = 0;
  if (size < count) {
    buffer.reset();  // release the old one first: the peak stays one buffer
    buffer = hwy::AllocateAligned<float>(count);
    if (!buffer) throw std::bad_alloc();
    size = count;
  }
  return buffer.get();
}

// Whether the values of K and V of panel pi of a slice are all finite.
inline bool PanelFinite(const KernelArgs& a, const Layout& lay, int64_t slice, size_t pi) {
  const DF d;
  const auto z = static_cast<size_t>(slice);
  const size_t key0 = pi * kPanelKeys, keys = std::min(kPanelKeys, lay.nk - key0);
  return AllFiniteValues(d, a.k + (z * lay.nk + key0) * lay.dk, keys * lay.dk) &&
         AllFiniteValues(d, a.v + (z * lay.nk + key0) * lay.dv, keys * lay.dv);
}

// Kᵀ of a group of consecutive slices in panels [d_k][kPanelKeys] (keys past
// n_k zero), and V copied to aligned rows of dvp columns when its own rows are
// not whole aligned vectors (Layout::copy_v). Shared by all workers: each
// slice is packed once, whatever the number of threads, and the group is as
// small as keeps the threads busy.
class PackedGroup {
 public:
  // shared: Kᵀ goes to the calling thread's scratch (the threads' common
  // group); otherwise to the call's arena (one thread's own copy).
  PackedGroup(const KernelArgs& a, const Layout& lay, int64_t slices, bool shared = true)
      : a_(a), lay_(lay), kt_size_(lay.panels * kPanelKeys * lay.dk) {
    const size_t kt_floats = std::max<size_t>(static_cast<size_t>(slices) * kt_size_, 1);
    kt_ = shared ? CallScratch(kt_floats) : Allocate<float>(kt_floats);
    kmax_ = Allocate<float>(static_cast<size_t>(slices) * lay.panels);
    if (lay.copy_v) {
      v_size_ = lay.panels * kPanelKeys * lay.dvp;
      vpad_ = Allocate<float>(static_cast<size_t>(slices) * v_size_);
    }
  }

  void SetFirstSlice(int64_t first) { first_ = first; }

  // Packs panel pi of a slice of the current group; false when one of the
  // panel's values of K or V is not finite.
  bool PackPanel(int64_t slice, size_t pi) {
    const size_t dk = lay_.dk, dv = lay_.dv, nk = lay_.nk;
    const float* k = a_.k + static_cast<size_t>(slice) * nk * dk;
    const float* v = a_.v + static_cast<size_t>(slice) * nk * dv;
    bool finite = true;
    kmax_[Offset(slice) * lay_.panels + pi] =
        PackKtPanel(DF(), k, nk, dk, pi, KtMutable(slice) + pi * dk * kPanelKeys, finite);
    const size_t keys = std::min(kPanelKeys, nk - pi * kPanelKeys);
    finite = finite && AllFiniteValues(DF(), v + pi * kPanelKeys * dv, keys * dv);
    if (vpad_) PadVPanel(v, lay_, pi, vpad_ + Offset(slice) * v_size_ + pi * kPanelKeys * lay_.dvp);
    return finite;
  }

  // Panel pi of a slice that no row reads: its keys are only checked, not
  // packed (its Kᵀ is left unset); false when one of them is not finite.
  bool CheckUnreadPanel(int64_t slice, size_t pi) {
    kmax_[Offset(slice) * lay_.panels + pi] = 0.0f;
    return PanelFinite(a_, lay_, slice, pi);
  }

  const float* Kt(int64_t slice) const { return kt_ + Offset(slice) * kt_size_; }
  /// max |k| over the keys of panel pi.
  float KMax(int64_t slice, size_t pi) const { return kmax_[Offset(slice) * lay_.panels + pi]; }
  const float* V(int64_t slice) const {
    if (vpad_) return vpad_ + Offset(slice) * v_size_;
    return a_.v + static_cast<size_t>(slice) * lay_.nk * lay_.dv;
  }
  size_t VStride() const { return vpad_ ? lay_.dvp : lay_.dv; }

 private:
  size_t Offset(int64_t slice) const { return static_cast<size_t>(slice - first_); }
  float* KtMutable(int64_t slice) { return kt_ + Offset(slice) * kt_size_; }

  const KernelArgs& a_;
  const Layout& lay_;
  size_t kt_size_ = 0, v_size_ = 0;
  int64_t first_ = 0;
  float* kt_ = nullptr;  // CallScratch of the calling thread
  float* vpad_ = nullptr, *kmax_ = nullptr;
};

// One worker's buffers for a chunk of query rows (chunk_rows, a multiple of
// kTileRows), allocated before the workers start and reused for every chunk.
// A row's result does not depend on the chunk size: tiles start at multiples
// of kTileRows whatever it is, and every tile is computed alike.
class Worker {
 public:
  Worker(const KernelArgs& args, const Layout& lay, size_t chunk_rows)
      : a_(args), p_(*args.problem), lay_(lay), chunk_rows_(chunk_rows) {
    q_ = Allocate<float>(chunk_rows * lay.dk);
    o_ = Allocate<float>(chunk_rows * lay.dvp);
    s_ = Allocate<float>(kTileRows * kPanelKeys);
    m_ = Allocate<float>(chunk_rows);
    l_ = Allocate<float>(chunk_rows);
    alpha_ = Allocate<float>(chunk_rows);
    limits_ = Allocate<int64_t>(chunk_rows);
    tile_qmax_ = Allocate<float>(chunk_rows / kTileRows);
    exact_ = Allocate<uint8_t>(chunk_rows);
    exact_acc_.resize(lay.dv);
  }

  // Streaming (packed == nullptr): the panel buffers this worker packs into.
  void AllocatePanels() {
    kt_panel_ = Allocate<float>(lay_.dk * kPanelKeys);
    if (lay_.copy_v) v_panel_ = Allocate<float>(kPanelKeys * lay_.dvp);
  }

  // Computes chunk `chunk` of slice `slice` and writes its rows of a_.out
  // (and a_.lse). With packed == nullptr it streams: packs each Kᵀ panel
  // itself, checks every value of K and V it reads, and returns false
  // (writing nothing) when one is not finite.
  bool ProcessChunk(int64_t slice, int64_t chunk, const PackedGroup* packed) {
    const size_t dk = lay_.dk, dv = lay_.dv, dvp = lay_.dvp, nq = lay_.nq, nk = lay_.nk;
    const int64_t heads = p_.shape.heads;
    const int64_t b = slice / heads;
    const int64_t h = slice % heads;
    const size_t r0 = static_cast<size_t>(chunk) * chunk_rows_;
    const size_t rows = std::min(chunk_rows_, nq - r0);
    const size_t tiles = hwy::DivCeil(rows, kTileRows);
    const size_t slice_z = static_cast<size_t>(slice);
    const float* kt = packed ? packed->Kt(slice) : nullptr;
    const float* k = a_.k + slice_z * nk * dk;  // streaming: K and V as the caller holds them
    const float* v = packed ? packed->V(slice) : a_.v + slice_z * nk * dv;
    const size_t vs = packed ? packed->VStride() : (v_panel_ ? dvp : dv);
    // The chunk's Q rows; rows past its end are zero (and discarded).
    const float* q = a_.q + (slice_z * nq + r0) * dk;
    for (size_t r = 0; r < tiles * kTileRows; ++r)
      for (size_t x = 0; x < dk; ++x) q_[r * dk + x] = r < rows ? q[r * dk + x] : 0.0f;
    for (size_t r = 0; r < tiles * kTileRows; ++r) {
      limits_[r] = r < rows ? key_limit(p_, b, static_cast<int64_t>(r0 + r)) : 0;
      m_[r] = kNegInf;
      l_[r] = 0.0f;
      exact_[r] = 0;
    }
    for (size_t t = 0; t < tiles; ++t)
      tile_qmax_[t] = MaxAbs(d_, q_ + t * kTileRows * dk, kTileRows * dk);
    std::fill(o_, o_ + tiles * kTileRows * dvp, 0.0f);

    const uint8_t* mask = nullptr;
    if (p_.mask) {
      const ExplicitMask& em = *p_.mask;
      const size_t mb = em.batch == 1 ? 0 : static_cast<size_t>(b);
      const size_t mh = em.heads == 1 ? 0 : static_cast<size_t>(h);
      mask = em.allowed.data() + ((mb * static_cast<size_t>(em.heads) + mh) * nq + r0) * nk;
    }

    const int64_t chunk_hi = *std::max_element(limits_, limits_ + rows);
    for (size_t pi = 0; pi < lay_.panels; ++pi) {
      const int64_t j0 = static_cast<int64_t>(pi * kPanelKeys);
      const size_t kcount = std::min(kPanelKeys, nk - pi * kPanelKeys);
      const float* panel = nullptr;
      const float* vpanel = nullptr;
      Prefetcher ahead;
      float kmax = 0.0f;
      if (packed) {
        panel = kt + pi * dk * kPanelKeys;
        vpanel = v + pi * kPanelKeys * vs;
        kmax = packed->KMax(slice, pi);
      } else {
        // Every value of K and V is checked once the call is done (the output
        // is staged until then, RunStreamed): a chunk checks the panels it
        // reads as it packs them, and chunk 0 of each slice also scans the
        // panels it does not read, in case no other chunk reads them either.
        bool finite = true;
        const float* vkeys = v + pi * kPanelKeys * dv;
        if (j0 >= chunk_hi) {
          if (chunk == 0 && !PanelFinite(a_, lay_, slice, pi)) return false;
          continue;
        }
        kmax = PackKtPanel(d_, k, nk, dk, pi, kt_panel_, finite);
        if (!finite || !AllFiniteValues(d_, vkeys, kcount * dv)) return false;
        panel = kt_panel_;
        vpanel = vkeys;
        if (v_panel_) {
          PadVPanel(v, lay_, pi, v_panel_);
          vpanel = v_panel_;
        }
        // The next panel's keys and values, fetched while this one is computed.
        // Spread over the score loops of every tile: one line a step put
        // them all in the first two tiles' loops at n_q = 64, faster than
        // memory delivers, and stalled the loop (n_q = 64 and 256 against
        // n_k = 16384: 1.1-1.2x the time).
        if (pi + 1 < lay_.panels) {
          const size_t next = std::min(kPanelKeys, nk - (pi + 1) * kPanelKeys);
          ahead.Add(k + (pi + 1) * kPanelKeys * dk, next * dk);
          ahead.Add(v + (pi + 1) * kPanelKeys * dv, next * dv);
          ahead.Spread(tiles * ScoreTileSteps(d_, dk));
        }
      }
      for (size_t t = 0; t < tiles; ++t) {
        const size_t tr0 = t * kTileRows;
        const size_t trows = std::min(kTileRows, rows - tr0);
        const int64_t* lim = limits_ + tr0;
        const int64_t lo = *std::min_element(lim, lim + trows);
        const int64_t hi = *std::max_element(lim, lim + trows);
        if (j0 >= hi) continue;  // causal or padded: no row of the tile reads this panel
        if (packed) {
          NoPrefetch none;
          ScoreTile(d_, q_ + tr0 * dk, dk, panel, s_, none);
        } else {
          ScoreTile(d_, q_ + tr0 * dk, dk, panel, s_, ahead);
        }
        if (static_cast<double>(tile_qmax_[t]) * kmax >= lay_.overflow_free)
          FindOverflow(lim, j0, mask ? mask + tr0 * nk + pi * kPanelKeys : nullptr, trows, exact_ + tr0);
        if (mask || j0 + static_cast<int64_t>(kPanelKeys) > lo)
          MaskTile(d_, s_, lim, j0, mask ? mask + tr0 * nk + pi * kPanelKeys : nullptr, nk,
                   trows);
        SoftmaxTile(d_, s_, a_.multiplier, m_ + tr0, l_ + tr0, alpha_ + tr0);
        AccumulateTile(d_, s_, kcount, vpanel, vs, o_ + tr0 * dvp, dvp,
                       alpha_ + tr0);
      }
      ahead.Finish();
    }

    float* out = a_.out + (slice_z * nq + r0) * dv;
    const size_t N = hn::Lanes(d_);
    for (size_t r = 0; r < rows; ++r) {
      float* o = o_ + r * dvp;
      const float l = l_[r];
      float* lse = a_.lse ? a_.lse + slice_z * nq + r0 + r : nullptr;
      // A max of +inf or NaN, or a sum of inf or NaN: a logit beyond float.
      bool exact = exact_[r] || !(m_[r] < kInf) || !(l < kInf);
      if (!exact && l > 0.0f) {
        const VF vl = hn::Set(d_, l);
        VF nonfinite = hn::Zero(d_);  // x·0 is NaN exactly where x is ±inf or NaN
        for (size_t c = 0; c < dvp; c += N) {
          const VF x = hn::Div(hn::Load(d_, o + c), vl);
          nonfinite = hn::Add(nonfinite, hn::Mul(x, hn::Zero(d_)));
          if (c + N <= dv) {  // a whole vector straight to the output
            hn::StoreU(x, d_, out + r * dv + c);
          } else {  // the last columns through the row's buffer (zeros past d_v)
            hn::Store(x, d_, o + c);
            std::copy(o + c, o + dv, out + r * dv + c);
          }
        }
        // Not finite: Σ p·v overflowed (values of V near the float limit).
        exact = !hn::AllTrue(d_, hn::Eq(nonfinite, nonfinite));
        if (lse) *lse = m_[r] + std::log(l);
      } else if (!exact) {
        // No weight: an empty row under the zero policy, unless every readable logit is -inf.
        exact = HasReadableKey(r, mask ? mask + r * nk : nullptr);
        for (size_t c = 0; c < dv; ++c) out[r * dv + c] = 0.0f;
        if (lse) *lse = kNegInf;
      }
      if (exact)
        exact_row(p_, a_.q, a_.k, a_.v, b, h, static_cast<int64_t>(r0 + r), exact_acc_.data(),
                  out + r * dv, lse, nullptr);
    }
    return true;
  }


 private:
  // Marks the rows of the tile with a readable score that is not finite: a dot
  // product beyond float, whose logit may still be ordinary (a small scale/τ)
  // and which no running max or sum reveals when it is -inf. Before MaskTile,
  // so the explicit mask decides what is readable.
  void FindOverflow(const int64_t* limits, int64_t j0, const uint8_t* mask, size_t rows,
                    uint8_t* exact) const {
    const float* s = s_;
    const size_t N = hn::Lanes(d_);
    for (size_t r = 0; r < rows; ++r) {
      VF nonfinite = hn::Zero(d_);  // x·0 is NaN exactly where x is ±inf or NaN
      for (size_t c = 0; c < kPanelKeys; c += N)
        nonfinite = hn::Add(nonfinite, hn::Mul(hn::Load(d_, s + r * kPanelKeys + c), hn::Zero(d_)));
      if (hn::AllTrue(d_, hn::Eq(nonfinite, nonfinite))) continue;  // every score finite
      const int64_t readable = std::clamp<int64_t>(limits[r] - j0, 0, static_cast<int64_t>(kPanelKeys));
      for (size_t j = 0; j < static_cast<size_t>(readable); ++j)
        if ((!mask || mask[r * lay_.nk + j]) && !std::isfinite(s[r * kPanelKeys + j])) exact[r] = 1;
    }
  }

  // Whether row r of the chunk may read any key (mask: its row of the explicit mask).
  bool HasReadableKey(size_t r, const uint8_t* mask) const {
    const auto limit = static_cast<size_t>(limits_[r]);
    if (!mask) return limit > 0;
    return std::any_of(mask, mask + limit, [](uint8_t m) { return m != 0; });
  }

  const KernelArgs& a_;
  const Problem& p_;
  const Layout& lay_;
  const size_t chunk_rows_;
  DF d_;
  float* q_ = nullptr, *o_ = nullptr, *s_ = nullptr, *m_ = nullptr, *l_ = nullptr, *alpha_ = nullptr, *tile_qmax_ = nullptr;
  float* kt_panel_ = nullptr, *v_panel_ = nullptr;  ///< streaming: the panel being read
  int64_t* limits_ = nullptr;
  uint8_t* exact_ = nullptr;  ///< rows to recompute in long double
  std::vector<long double> exact_acc_;            ///< exact_row's scratch, d_v values
};

// Runs work(*workers[t]) on `threads` threads, the caller's being the first
// (thread_pool.h). A thread that cannot start leaves `sync`, so the others do its share.
template <class Worker, class Barrier, class Work>
void RunOnThreads(std::vector<std::unique_ptr<Worker>>& workers, Barrier& sync, const Work& work) {
  run_concurrently(
      static_cast<int64_t>(workers.size()), [&](int64_t t) { work(*workers[static_cast<size_t>(t)]); },
      [&](int64_t missing) {
        for (; missing > 0; --missing) sync.arrive_and_drop();
      });
}

// Streaming (streams_kv: n_q <= kStreamMaxRows): the chunks of every slice handed out one
// at a time through an atomic counter, each packing its own panels. The rows
// go to a staging buffer (the calling thread's scratch), copied to the output
// only when no chunk met a value of K or V that is not finite: on bad input
// nothing is written.
bool RunStreamed(const KernelArgs& a, const Layout& lay, int64_t threads) {
  const int64_t slices = a.problem->shape.batch * a.problem->shape.heads;
  // One chunk per slice, so that each panel is packed once, on one thread or
  // when there are slices enough for every thread; chunks of kChunkRows otherwise.
  const size_t chunk_rows =
      whole_slices_per_thread(a.problem->shape, threads) ? hwy::DivCeil(lay.nq, kTileRows) * kTileRows : kChunk;
  const auto chunks = static_cast<int64_t>(hwy::DivCeil(lay.nq, chunk_rows));
  const size_t out_size = static_cast<size_t>(slices) * lay.nq * lay.dv;
  const size_t lse_size = a.lse ? static_cast<size_t>(slices) * lay.nq : 0;
  // A single chunk reads (and checks) every value of K and V before it writes
  // a row, so it writes the output itself; of several, one that meets a bad
  // value may come after others have written theirs.
  const bool staging_needed = slices * chunks > 1;
  float* staging = staging_needed ? CallScratch(out_size + lse_size) : nullptr;
  KernelArgs staged = a;
  if (staging_needed) {
    staged.out = staging;
    staged.lse = a.lse ? staging + out_size : nullptr;
  }

  std::vector<std::unique_ptr<Worker>> workers;
  for (int64_t t = 0; t < threads; ++t) {
    workers.push_back(std::make_unique<Worker>(staged, lay, chunk_rows));
    workers.back()->AllocatePanels();
  }
  std::atomic<int64_t> next{0};
  std::atomic<bool> not_finite{false};
  SpinBarrier sync(static_cast<std::ptrdiff_t>(threads));  // left by threads that cannot start
  // Once every chunk is computed and K and V were found finite, each thread
  // copies out the rows of the chunks it computed, still in its own cache: one
  // thread copying them all, half from the other core's cache, took 1.06-1.16x
  // the time at n = 128-256, 8 heads, on 2 threads (docs/performance.md).
  std::vector<const Worker*> computed_by(staging_needed ? static_cast<size_t>(slices * chunks) : 0);
  // Item i is chunk chunk_of(i) of slice i / chunks: last chunks first, as
  // under a causal mask they cost the most.
  auto chunk_of = [&](int64_t i) { return chunks - 1 - i % chunks; };
  auto copy_out = [&](int64_t i) {
    const size_t r0 = static_cast<size_t>(chunk_of(i)) * chunk_rows;
    const size_t row = static_cast<size_t>(i / chunks) * lay.nq + r0, rows = std::min(chunk_rows, lay.nq - r0);
    std::copy(staging + row * lay.dv, staging + (row + rows) * lay.dv, a.out + row * lay.dv);
    if (a.lse) std::copy(staging + out_size + row, staging + out_size + row + rows, a.lse + row);
  };
  auto work = [&](Worker& worker) {
    for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < slices * chunks;) {
      if (not_finite.load(std::memory_order_relaxed)) break;
      if (!worker.ProcessChunk(i / chunks, chunk_of(i), nullptr)) not_finite.store(true, std::memory_order_relaxed);
      if (staging_needed) computed_by[static_cast<size_t>(i)] = &worker;
    }
    if (!staging_needed) return;
    sync.arrive_and_wait();  // every chunk computed (or given up on bad input)
    if (not_finite.load(std::memory_order_relaxed)) return;
    for (int64_t i = 0; i < slices * chunks; ++i)
      if (computed_by[static_cast<size_t>(i)] == &worker) copy_out(i);
  };
  RunOnThreads(workers, sync, work);
  return !not_finite.load();
}

// Query rows per chunk of the packed phase: up to 256, as long as every
// thread gets four chunks or more. Each chunk reads every packed panel of its
// slice, from L2 or beyond once Kᵀ and V outgrow it, so a bigger chunk reads
// each panel for more rows (on the AVX-512 VM, n = 4096, d = 128, 1 thread:
// 0.56 of peak with 64 rows, 0.61 with 256); fewer than four chunks a thread
// balanced causal rows badly. A row's result does not depend on the chunk size.
constexpr size_t kPackedChunkMax = 4 * kChunk;
inline size_t PackedChunkRows(size_t nq, int64_t slices, int64_t threads) {
  for (size_t rows = kPackedChunkMax; rows > kChunk; rows /= 2)
    if (slices * static_cast<int64_t>(hwy::DivCeil(nq, rows)) >= 4 * threads) return rows;
  return kChunk;
}

// One slice on several threads (packs_per_thread): every thread packs the
// whole slice into a copy of its own, checking every value of K and V before
// it computes (and writes) a row, then takes chunks through an atomic counter.
// No barrier, and no panel written by one core and read by another. Panels
// that no row reads (causal, padding) are only checked.
bool RunPackedPerThread(const KernelArgs& a, const Layout& lay, int64_t threads) {
  const size_t chunk_rows = PackedChunkRows(lay.nq, 1, threads);
  const auto chunks = static_cast<int64_t>(hwy::DivCeil(lay.nq, chunk_rows));
  int64_t read_end = 0;  // the keys some row reads end before it
  for (int64_t r = 0; r < a.problem->shape.n_q; ++r) read_end = std::max(read_end, key_limit(*a.problem, 0, r));
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::unique_ptr<PackedGroup>> copies;
  for (int64_t t = 0; t < threads; ++t) {
    workers.push_back(std::make_unique<Worker>(a, lay, chunk_rows));
    copies.push_back(std::make_unique<PackedGroup>(a, lay, 1, /*shared=*/false));
  }
  std::atomic<int64_t> next{0};
  std::atomic<bool> not_finite{false};
  run_concurrently(
      threads,
      [&](int64_t t) {
        PackedGroup& packed = *copies[static_cast<size_t>(t)];
        bool finite = true;
        for (size_t pi = 0; pi < lay.panels; ++pi)
          finite = (static_cast<int64_t>(pi * kPanelKeys) < read_end ? packed.PackPanel(0, pi)
                                                                     : packed.CheckUnreadPanel(0, pi)) &&
                   finite;
        if (!finite) {
          not_finite.store(true, std::memory_order_relaxed);
          return;
        }
        // last chunks first: under a causal mask they cost the most
        for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < chunks;)
          workers[static_cast<size_t>(t)]->ProcessChunk(0, chunks - 1 - i, &packed);
      },
      [](int64_t) {});
  return !not_finite.load();
}

// The tiled path on `threads` threads (the caller's included). One slice
// whose Kᵀ is small is packed by every thread for itself (RunPackedPerThread).
// Otherwise, up to kStreamMaxRows query rows it streams (RunStreamed) unless
// streams_kv() says packing once pays. Otherwise slices are
// taken in groups; for each group all workers first pack its panels, then
// compute its chunks, both handed out one at a time through an atomic counter
// (so a thread that finishes early takes more), with a barrier after each
// phase. The first packing phase also checks every value of K and V of the
// later groups, so that a value that is not finite ends the call before any
// row is written (false; attention() then names it). Every chunk is computed
// by the same instructions whichever thread takes it, so the output is
// bitwise identical for any thread count.
bool RunTiled(const KernelArgs& a, int64_t threads) {
  const DF d;
  const Layout lay(a, d);
  if (packs_per_thread(a.problem->shape, threads)) return RunPackedPerThread(a, lay, threads);
  if (streams_kv(a.problem->shape, threads)) return RunStreamed(a, lay, threads);
  const int64_t slices = a.problem->shape.batch * a.problem->shape.heads;
  const size_t chunk_rows = PackedChunkRows(lay.nq, slices, threads);
  const auto chunks = static_cast<int64_t>(hwy::DivCeil(lay.nq, chunk_rows));
  const auto panels = static_cast<int64_t>(lay.panels);
  // Enough chunks per group for about four per thread, and no more: long
  // sequences pack one slice at a time, short ones several.
  const int64_t group = std::clamp<int64_t>(hwy::DivCeil(4 * threads, chunks), 1, slices);
  const int64_t groups = hwy::DivCeil(slices, group);
  const int64_t checked_only = (slices - group) * panels;  // the later groups' panels

  PackedGroup packed(a, lay, group);
  std::vector<std::unique_ptr<Worker>> workers;
  for (int64_t t = 0; t < threads; ++t) workers.push_back(std::make_unique<Worker>(a, lay, chunk_rows));

  // Phase state, changed only by the barrier's completion step.
  int64_t current = 0;
  bool packing = true;
  std::atomic<int64_t> next{0};
  std::atomic<bool> not_finite{false};
  auto end_of_phase = [&]() noexcept {
    next.store(0, std::memory_order_relaxed);
    if (not_finite.load(std::memory_order_relaxed)) current = groups;  // nothing written yet
    if (!packing) {
      ++current;
      packed.SetFirstSlice(current * group);
    }
    packing = !packing;
  };
  SpinBarrier sync(static_cast<std::ptrdiff_t>(threads), end_of_phase);

  auto work = [&](Worker& worker) {
    while (current < groups) {
      const int64_t first = current * group;
      const int64_t count = std::min(group, slices - first);
      const int64_t packed_items = count * panels;
      const int64_t items = packing ? packed_items + (first == 0 ? checked_only : 0) : count * chunks;
      for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < items;) {
        if (packing) {
          const bool finite = i < packed_items
                                  ? packed.PackPanel(first + i / panels, static_cast<size_t>(i % panels))
                                  : PanelFinite(a, lay, group + (i - packed_items) / panels,
                                                static_cast<size_t>((i - packed_items) % panels));
          if (!finite) not_finite.store(true, std::memory_order_relaxed);
        } else  // last chunks first: under a causal mask they cost the most
          worker.ProcessChunk(first + i / chunks, chunks - 1 - i % chunks, &packed);
      }
      sync.arrive_and_wait();
    }
  };

  RunOnThreads(workers, sync, work);
  return !not_finite.load();
}

}  // namespace attncheck::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
