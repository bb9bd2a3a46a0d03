// Per-target kernels of the fused attention. attention_kernels.cpp includes
// this file once per instruction set through hwy/foreach_target.h, so the
// include guard toggles with HWY_TARGET_TOGGLE instead of #pragma once.
//
// Work is split into items (batch, head, chunk of kChunkRows query rows). For
// each item the keys are walked in panels of kPanelKeys; each panel meets each
// tile of kTileRows query rows:
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
// Nothing of size n_q × n_k exists: the extra memory is the packed Kᵀ (and V
// when d_v needs padding) of one group of slices, shared by the threads, plus
// O(kChunkRows · d) per thread.
// Calls with n_q <= kDecodeMaxRows take the decode path instead (RunDecode,
// below): K and V streamed once in place, keys split into fixed blocks.
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
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernel_args.h"

HWY_BEFORE_NAMESPACE();
namespace attncheck::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr size_t kPanelKeys = 64;    // keys per block: one packed Kᵀ panel [d_k][64]
constexpr size_t kTileRows = 16;     // query rows sharing one score tile
constexpr size_t kGroupRows = 4;     // rows per register block of the micro-kernels
constexpr size_t kGroupVecs = 4;     // vectors per register block of the micro-kernels
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
// running sum, and the logits' error dominates the whole computation's. At
// d_k = 64, blocks of 8 keep the max error on N(0,1) inputs at 0.55-0.8× a
// naive fp32 composition's (16: up to 0.97×, 32: above it) and cost no
// measurable time (the partial sums go through the L1-resident score tile).
constexpr size_t kDotBlock = 8;

template <size_t kVecs>
HWY_INLINE void ScoreGroup(DF d, const float* HWY_RESTRICT q, size_t dk,
                           const float* HWY_RESTRICT kt, float* HWY_RESTRICT s) {
  const size_t N = hn::Lanes(d);
  for (size_t x0 = 0; x0 < dk; x0 += kDotBlock) {
    const size_t x1 = std::min(dk, x0 + kDotBlock);
    VF acc[kGroupRows][kVecs];
    for (size_t r = 0; r < kGroupRows; ++r)
      for (size_t c = 0; c < kVecs; ++c) acc[r][c] = hn::Zero(d);
    for (size_t x = x0; x < x1; ++x) {
      const float* HWY_RESTRICT krow = kt + x * kPanelKeys;
      VF kv[kVecs];
      for (size_t c = 0; c < kVecs; ++c) kv[c] = hn::Load(d, krow + c * N);
      for (size_t r = 0; r < kGroupRows; ++r) {
        const VF qv = hn::Set(d, q[r * dk + x]);
        for (size_t c = 0; c < kVecs; ++c) acc[r][c] = hn::MulAdd(qv, kv[c], acc[r][c]);
      }
    }
    for (size_t r = 0; r < kGroupRows; ++r) {
      for (size_t c = 0; c < kVecs; ++c) {
        float* out = s + r * kPanelKeys + c * N;
        hn::Store(x0 == 0 ? acc[r][c] : hn::Add(hn::Load(d, out), acc[r][c]), d, out);
      }
    }
  }
}

// Scores of one tile (kTileRows rows) against one panel (kPanelKeys keys).
HWY_INLINE void ScoreTile(DF d, const float* HWY_RESTRICT q, size_t dk,
                          const float* HWY_RESTRICT panel, float* HWY_RESTRICT s) {
  const size_t N = hn::Lanes(d);
  const size_t vecs = kPanelKeys / N;
  for (size_t g = 0; g < kTileRows; g += kGroupRows) {
    const float* qg = q + g * dk;
    float* sg = s + g * kPanelKeys;
    size_t c = 0;
    for (; c + kGroupVecs <= vecs; c += kGroupVecs)
      ScoreGroup<kGroupVecs>(d, qg, dk, panel + c * N, sg + c * N);
    for (; c < vecs; ++c) ScoreGroup<1>(d, qg, dk, panel + c * N, sg + c * N);
  }
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

// Online softmax over one tile: turns each row of dot products s into
// exp(s · multiplier - m_new), updates the running max m and sum l (in logit
// units), and leaves in alpha the factor by which the row's partial output
// must be rescaled. multiplier > 0, so the max of s gives the max logit.
HWY_INLINE void SoftmaxTile(DF d, float* HWY_RESTRICT s, float multiplier, float* HWY_RESTRICT m,
                            float* HWY_RESTRICT l, float* HWY_RESTRICT alpha) {
  const size_t N = hn::Lanes(d);
  const size_t vecs = kPanelKeys / N;
  HWY_ALIGN float m_new[kTileRows];
  HWY_ALIGN float row_sum[kTileRows];
  for (size_t r = 0; r < kTileRows; ++r) {
    const float* row = s + r * kPanelKeys;
    VF vmax = hn::Load(d, row);
    for (size_t c = 1; c < vecs; ++c) vmax = hn::Max(vmax, hn::Load(d, row + c * N));
    m_new[r] = std::max(m[r], hn::GetLane(hn::MaxOfLanes(d, vmax)) * multiplier);
  }
  // alpha = exp(m_old - m_new) for N rows at once: 0 on a row's first
  // readable panel (m_old = -inf), 1 while a row has read nothing (both -inf).
  for (size_t r = 0; r < kTileRows; r += N) {
    const VF old_max = hn::Load(d, m + r);
    const VF new_max = hn::Load(d, m_new + r);
    const VF factor = hn::Exp(d, hn::Sub(old_max, new_max));
    hn::Store(hn::IfThenElse(hn::Eq(new_max, hn::Set(d, kNegInf)), hn::Set(d, 1.0f), factor), d,
              alpha + r);
  }
  for (size_t r = 0; r < kTileRows; ++r) {
    float* row = s + r * kPanelKeys;
    if (m_new[r] == kNegInf) {  // nothing readable yet: no weights, output stays zero
      for (size_t c = 0; c < vecs; ++c) hn::Store(hn::Zero(d), d, row + c * N);
      row_sum[r] = 0.0f;
      continue;
    }
    const VF shift = hn::Set(d, m_new[r]);
    const VF scale = hn::Set(d, multiplier);
    VF sum = hn::Zero(d);
    for (size_t c = 0; c < vecs; ++c) {
      // Masked scores are -inf; hn::Exp returns exactly 0 for them. The logit
      // is rounded before the max is subtracted (not one fused multiply-
      // subtract): m is the rounded max logit, so the max's argument is exactly
      // 0 and no argument exceeds it. With a fused s·multiplier − m the max's
      // argument is the product's rounding error, which for logits past 2^31
      // exceeds ±88 and sends exp to inf (NaN rows) or to 0 (all-zero rows).
      const VF p = hn::Exp(d, hn::Sub(hn::Mul(hn::Load(d, row + c * N), scale), shift));
      hn::Store(p, d, row + c * N);
      sum = hn::Add(sum, p);
    }
    row_sum[r] = hn::GetLane(hn::SumOfLanes(d, sum));
  }
  for (size_t r = 0; r < kTileRows; ++r) {
    l[r] = l[r] * alpha[r] + row_sum[r];
    m[r] = m_new[r];
  }
}

// o[r][0 .. kVecs·N) = alpha[r] · o[r][...] + Σ_{j<kcount} p[r][j] · v[j][...]
// for kGroupRows rows. p has row stride kPanelKeys, v stride vs, o stride os.
template <size_t kVecs>
HWY_INLINE void AccumulateGroup(DF d, const float* HWY_RESTRICT p, size_t kcount,
                                const float* HWY_RESTRICT v, size_t vs, float* HWY_RESTRICT o,
                                size_t os, const float* HWY_RESTRICT alpha) {
  const size_t N = hn::Lanes(d);
  VF acc[kGroupRows][kVecs];
  for (size_t r = 0; r < kGroupRows; ++r) {
    const VF a = hn::Set(d, alpha[r]);
    for (size_t c = 0; c < kVecs; ++c) acc[r][c] = hn::Mul(hn::Load(d, o + r * os + c * N), a);
  }
  for (size_t j = 0; j < kcount; ++j) {
    const float* HWY_RESTRICT vrow = v + j * vs;
    VF vv[kVecs];
    for (size_t c = 0; c < kVecs; ++c) vv[c] = hn::LoadU(d, vrow + c * N);
    for (size_t r = 0; r < kGroupRows; ++r) {
      const VF pv = hn::Set(d, p[r * kPanelKeys + j]);
      for (size_t c = 0; c < kVecs; ++c) acc[r][c] = hn::MulAdd(pv, vv[c], acc[r][c]);
    }
  }
  for (size_t r = 0; r < kGroupRows; ++r)
    for (size_t c = 0; c < kVecs; ++c) hn::Store(acc[r][c], d, o + r * os + c * N);
}

// The output update of one tile over one panel, d_v in register blocks.
HWY_INLINE void AccumulateTile(DF d, const float* HWY_RESTRICT p, size_t kcount,
                               const float* HWY_RESTRICT v, size_t vs, float* HWY_RESTRICT o,
                               size_t dvp, const float* HWY_RESTRICT alpha) {
  const size_t N = hn::Lanes(d);
  const size_t vecs = dvp / N;
  for (size_t g = 0; g < kTileRows; g += kGroupRows) {
    const float* pg = p + g * kPanelKeys;
    float* og = o + g * dvp;
    size_t c = 0;
    for (; c + kGroupVecs <= vecs; c += kGroupVecs)
      AccumulateGroup<kGroupVecs>(d, pg, kcount, v + c * N, vs, og + c * N, dvp, alpha + g);
    switch (vecs - c) {
      case 3: AccumulateGroup<3>(d, pg, kcount, v + c * N, vs, og + c * N, dvp, alpha + g); break;
      case 2: AccumulateGroup<2>(d, pg, kcount, v + c * N, vs, og + c * N, dvp, alpha + g); break;
      case 1: AccumulateGroup<1>(d, pg, kcount, v + c * N, vs, og + c * N, dvp, alpha + g); break;
      default: break;
    }
  }
}

template <typename T>
hwy::AlignedFreeUniquePtr<T[]> Allocate(size_t count) {
  auto ptr = hwy::AllocateAligned<T>(std::max<size_t>(count, 1));
  if (!ptr) throw std::bad_alloc();
  return ptr;
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
    // Every partial sum of an fp32 dot product is at most Σ|q_x k_x|·(1+u)^(d_k+2)
    // <= d_k·max|q|·max|k|·e^((d_k+2)·u); below this bound (with u doubled) none overflows.
    overflow_free = static_cast<double>(std::numeric_limits<float>::max()) /
                    std::exp(static_cast<double>(dk + 2) * 0x1p-23) / static_cast<double>(dk);
  }
  size_t dk = 0, dv = 0, dvp = 0, nq = 0, nk = 0, panels = 0;
  double overflow_free = 0.0;  ///< max|q|·max|k| below which no fp32 dot product overflows
};

// Kᵀ of a group of consecutive slices in panels [d_k][kPanelKeys] (keys past
// n_k zero), and V padded to dvp columns when d_v is not a multiple of the
// lanes. Shared by all workers: each slice is packed once, whatever the number
// of threads, and the group is as small as keeps the threads busy.
// The packed Kᵀ of the calling thread, kept for its next call (it grows and
// never shrinks, like the peers' scratch): a fresh allocation of tens of MB
// per call costs a page fault per 4 KiB page on first touch, which on virtual
// machines took several times longer than the attention itself (n_q = 64,
// n_k = 16384, 8 heads, d = 128: 160–280 ms instead of about 60 ms).
inline float* PackedKtScratch(size_t count) {
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

class PackedGroup {
 public:
  PackedGroup(const KernelArgs& a, const Layout& lay, int64_t slices)
      : a_(a), lay_(lay), kt_size_(lay.panels * kPanelKeys * lay.dk) {
    kt_ = PackedKtScratch(std::max<size_t>(static_cast<size_t>(slices) * kt_size_, 1));
    kmax_ = Allocate<float>(static_cast<size_t>(slices) * lay.panels);
    if (lay.dvp != lay.dv) {
      v_size_ = lay.panels * kPanelKeys * lay.dvp;
      vpad_ = Allocate<float>(static_cast<size_t>(slices) * v_size_);
    }
  }

  void SetFirstSlice(int64_t first) { first_ = first; }

  // Packs panel pi of a slice of the current group.
  void PackPanel(int64_t slice, size_t pi) {
    const size_t dk = lay_.dk, dv = lay_.dv, dvp = lay_.dvp, nk = lay_.nk;
    const float* k = a_.k + static_cast<size_t>(slice) * nk * dk;
    float* panel = KtMutable(slice) + pi * dk * kPanelKeys;
    for (size_t j = 0; j < kPanelKeys; ++j) {
      const size_t key = pi * kPanelKeys + j;
      for (size_t x = 0; x < dk; ++x) panel[x * kPanelKeys + j] = key < nk ? k[key * dk + x] : 0.0f;
    }
    kmax_[Offset(slice) * lay_.panels + pi] = MaxAbs(DF(), panel, dk * kPanelKeys);
    if (!vpad_) return;
    const float* v = a_.v + static_cast<size_t>(slice) * nk * dv;
    float* vp = vpad_.get() + Offset(slice) * v_size_;
    for (size_t key = pi * kPanelKeys; key < (pi + 1) * kPanelKeys; ++key)
      for (size_t c = 0; c < dvp; ++c) vp[key * dvp + c] = key < nk && c < dv ? v[key * dv + c] : 0.0f;
  }

  const float* Kt(int64_t slice) const { return kt_ + Offset(slice) * kt_size_; }
  /// max |k| over the keys of panel pi.
  float KMax(int64_t slice, size_t pi) const { return kmax_[Offset(slice) * lay_.panels + pi]; }
  const float* V(int64_t slice) const {
    if (vpad_) return vpad_.get() + Offset(slice) * v_size_;
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
  float* kt_ = nullptr;  // PackedKtScratch of the calling thread
  hwy::AlignedFreeUniquePtr<float[]> vpad_, kmax_;
};

// One worker's buffers for a chunk of query rows, allocated before the
// workers start and reused for every chunk.
class Worker {
 public:
  Worker(const KernelArgs& args, const Layout& lay) : a_(args), p_(*args.problem), lay_(lay) {
    q_ = Allocate<float>(kChunk * lay.dk);
    o_ = Allocate<float>(kChunk * lay.dvp);
    s_ = Allocate<float>(kTileRows * kPanelKeys);
    m_ = Allocate<float>(kChunk);
    l_ = Allocate<float>(kChunk);
    alpha_ = Allocate<float>(kChunk);
    limits_ = Allocate<int64_t>(kChunk);
    tile_qmax_ = Allocate<float>(kChunk / kTileRows);
    exact_ = Allocate<uint8_t>(kChunk);
    exact_acc_.resize(lay.dv);
  }

  void ProcessChunk(int64_t slice, int64_t chunk, const PackedGroup& packed) {
    const size_t dk = lay_.dk, dv = lay_.dv, dvp = lay_.dvp, nq = lay_.nq, nk = lay_.nk;
    const int64_t heads = p_.shape.heads;
    const int64_t b = slice / heads;
    const int64_t h = slice % heads;
    const size_t r0 = static_cast<size_t>(chunk) * kChunk;
    const size_t rows = std::min(kChunk, nq - r0);
    const size_t tiles = hwy::DivCeil(rows, kTileRows);
    const size_t slice_z = static_cast<size_t>(slice);
    const float* kt = packed.Kt(slice);
    const float* v = packed.V(slice);
    const size_t vs = packed.VStride();
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
      tile_qmax_[t] = MaxAbs(d_, q_.get() + t * kTileRows * dk, kTileRows * dk);
    std::fill(o_.get(), o_.get() + tiles * kTileRows * dvp, 0.0f);

    const uint8_t* mask = nullptr;
    if (p_.mask) {
      const ExplicitMask& em = *p_.mask;
      const size_t mb = em.batch == 1 ? 0 : static_cast<size_t>(b);
      const size_t mh = em.heads == 1 ? 0 : static_cast<size_t>(h);
      mask = em.allowed.data() + ((mb * static_cast<size_t>(em.heads) + mh) * nq + r0) * nk;
    }

    for (size_t pi = 0; pi < lay_.panels; ++pi) {
      const int64_t j0 = static_cast<int64_t>(pi * kPanelKeys);
      const size_t kcount = std::min(kPanelKeys, nk - pi * kPanelKeys);
      const float* panel = kt + pi * dk * kPanelKeys;
      const float* vpanel = v + pi * kPanelKeys * vs;
      for (size_t t = 0; t < tiles; ++t) {
        const size_t tr0 = t * kTileRows;
        const size_t trows = std::min(kTileRows, rows - tr0);
        const int64_t* lim = limits_.get() + tr0;
        const int64_t lo = *std::min_element(lim, lim + trows);
        const int64_t hi = *std::max_element(lim, lim + trows);
        if (j0 >= hi) continue;  // causal or padded: no row of the tile reads this panel
        ScoreTile(d_, q_.get() + tr0 * dk, dk, panel, s_.get());
        if (static_cast<double>(tile_qmax_[t]) * packed.KMax(slice, pi) >= lay_.overflow_free)
          FindOverflow(lim, j0, mask ? mask + tr0 * nk + pi * kPanelKeys : nullptr, trows, exact_.get() + tr0);
        if (mask || j0 + static_cast<int64_t>(kPanelKeys) > lo)
          MaskTile(d_, s_.get(), lim, j0, mask ? mask + tr0 * nk + pi * kPanelKeys : nullptr, nk,
                   trows);
        SoftmaxTile(d_, s_.get(), a_.multiplier, m_.get() + tr0, l_.get() + tr0, alpha_.get() + tr0);
        AccumulateTile(d_, s_.get(), kcount, vpanel, vs, o_.get() + tr0 * dvp, dvp,
                       alpha_.get() + tr0);
      }
    }

    float* out = a_.out + (slice_z * nq + r0) * dv;
    const size_t N = hn::Lanes(d_);
    for (size_t r = 0; r < rows; ++r) {
      float* o = o_.get() + r * dvp;
      const float l = l_[r];
      float* lse = a_.lse ? a_.lse + slice_z * nq + r0 + r : nullptr;
      // A max of +inf or NaN, or a sum of inf or NaN: a logit beyond float.
      bool exact = exact_[r] || !(m_[r] < kInf) || !(l < kInf);
      if (!exact && l > 0.0f) {
        const VF vl = hn::Set(d_, l);
        VF nonfinite = hn::Zero(d_);  // x·0 is NaN exactly where x is ±inf or NaN
        for (size_t c = 0; c < dvp; c += N) {
          const VF x = hn::Div(hn::Load(d_, o + c), vl);
          hn::Store(x, d_, o + c);
          nonfinite = hn::Add(nonfinite, hn::Mul(x, hn::Zero(d_)));
        }
        std::copy(o, o + dv, out + r * dv);
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
  }


 private:
  // Marks the rows of the tile with a readable score that is not finite: a dot
  // product beyond float, whose logit may still be ordinary (a small scale/τ)
  // and which no running max or sum reveals when it is -inf. Before MaskTile,
  // so the explicit mask decides what is readable.
  void FindOverflow(const int64_t* limits, int64_t j0, const uint8_t* mask, size_t rows,
                    uint8_t* exact) const {
    const float* s = s_.get();
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
  DF d_;
  hwy::AlignedFreeUniquePtr<float[]> q_, o_, s_, m_, l_, alpha_, tile_qmax_;
  hwy::AlignedFreeUniquePtr<int64_t[]> limits_;
  hwy::AlignedFreeUniquePtr<uint8_t[]> exact_;  ///< rows to recompute in long double
  std::vector<long double> exact_acc_;            ///< exact_row's scratch, d_v values
};

// ---------------------------------------------------------------------------
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

// Above this many query rows the decode path scores with the lanes over rows
// (ScoreColumns); up to it, along d (DotFourRows, DotRow).
constexpr size_t kColumnsMinRows = 8;

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
// Four dot products s[i·ss] = q_i · k (i < 4, q_i = q + i·qs, padded and
// aligned): k is loaded once for the four rows, and the four sums are reduced
// together (two interleaving steps leave lane 4b + i of each 128-bit block b
// holding a partial sum of row i), instead of one horizontal sum each.
HWY_INLINE void DotFourRows(DF d, const float* HWY_RESTRICT q, size_t qs, const float* HWY_RESTRICT k,
                            size_t dk, float* HWY_RESTRICT s, size_t ss) {
  const size_t N = hn::Lanes(d);
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t x = 0;
  for (; x + N <= dk; x += N) {
    const VF kv = hn::LoadU(d, k + x);
    a0 = hn::MulAdd(hn::Load(d, q + x), kv, a0);
    a1 = hn::MulAdd(hn::Load(d, q + qs + x), kv, a1);
    a2 = hn::MulAdd(hn::Load(d, q + 2 * qs + x), kv, a2);
    a3 = hn::MulAdd(hn::Load(d, q + 3 * qs + x), kv, a3);
  }
  const VF t01 = hn::Add(hn::InterleaveLower(d, a0, a1), hn::InterleaveUpper(d, a0, a1));
  const VF t23 = hn::Add(hn::InterleaveLower(d, a2, a3), hn::InterleaveUpper(d, a2, a3));
  const hn::Repartition<double, DF> dd;
  const auto lo = hn::InterleaveLower(dd, hn::BitCast(dd, t01), hn::BitCast(dd, t23));
  const auto hi = hn::InterleaveUpper(dd, hn::BitCast(dd, t01), hn::BitCast(dd, t23));
  HWY_ALIGN float sums[HWY_MAX_BYTES / sizeof(float)];
  hn::Store(hn::Add(hn::BitCast(d, lo), hn::BitCast(d, hi)), d, sums);
  for (size_t i = 0; i < 4; ++i) {
    float sum = sums[i];
    for (size_t b = 4; b < N; b += 4) sum += sums[b + i];
    for (size_t t = x; t < dk; ++t) sum += q[i * qs + t] * k[t];
    s[i * ss] = sum;
  }
}
#endif

// One query row's o[0 .. kVecs·N) = alpha · o + Σ_{j<kcount} p[j] · v[j][...]
// (v stride vs): the single-row decode step, up to 8 vectors of a V row at a
// time so that V is read in address order.
template <size_t kVecs>
HWY_INLINE void AccumulateOneRow(DF d, const float* HWY_RESTRICT p, size_t kcount,
                                 const float* HWY_RESTRICT v, size_t vs, float* HWY_RESTRICT o,
                                 float alpha) {
  const size_t N = hn::Lanes(d);
  VF acc[kVecs];
  const VF a = hn::Set(d, alpha);
  for (size_t c = 0; c < kVecs; ++c) acc[c] = hn::Mul(hn::Load(d, o + c * N), a);
  for (size_t j = 0; j < kcount; ++j) {
    const VF pv = hn::Set(d, p[j]);
    const float* HWY_RESTRICT vrow = v + j * vs;
    for (size_t c = 0; c < kVecs; ++c) acc[c] = hn::MulAdd(pv, hn::LoadU(d, vrow + c * N), acc[c]);
  }
  for (size_t c = 0; c < kVecs; ++c) hn::Store(acc[c], d, o + c * N);
}

// Whether count floats are all finite (x·0 is NaN exactly where x is ±inf or NaN).
HWY_INLINE bool AllFinite(DF d, const float* HWY_RESTRICT x, size_t count) {
  const size_t N = hn::Lanes(d);
  VF acc = hn::Zero(d);
  size_t i = 0;
  for (; i + N <= count; i += N) acc = hn::Add(acc, hn::Mul(hn::LoadU(d, x + i), hn::Zero(d)));
  bool finite = hn::AllTrue(d, hn::Eq(acc, acc));
  for (; i < count; ++i) finite = finite && std::isfinite(x[i]);
  return finite;
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
  hwy::AlignedFreeUniquePtr<float[]> m, l, o;
  hwy::AlignedFreeUniquePtr<uint8_t[]> exact;
};

class DecodeWorker {
 public:
  DecodeWorker(const KernelArgs& args, const Layout& lay)
      : a_(args), p_(*args.problem), lay_(lay) {
    const size_t N = hn::Lanes(d_);
    dkp_ = hwy::DivCeil(lay.dk, N) * N;
    rows_ = lay.nq;
    rows4_ = hwy::DivCeil(rows_, kGroupRows) * kGroupRows;
    q_ = Allocate<float>(rows4_ * dkp_);
#if HWY_TARGET != HWY_SCALAR
    columns_ = rows_ > kColumnsMinRows;
    if (columns_) qt_ = Allocate<float>(hwy::DivCeil(rows_, N) * N * lay.dk);
#endif
    o_ = Allocate<float>(rows4_ * lay.dvp);
    s_ = Allocate<float>(rows4_ * kPanelKeys);
    m_ = Allocate<float>(rows4_);
    l_ = Allocate<float>(rows4_);
    alpha_ = Allocate<float>(rows4_);
    limits_ = Allocate<int64_t>(rows4_);
    exact_ = Allocate<uint8_t>(rows4_);
    exact_acc_.resize(lay.dv);
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
    for (size_t r = 0; r < rows4_; ++r) {
      for (size_t x = 0; x < dkp_; ++x) q_[r * dkp_ + x] = r < rows_ && x < dk ? q[r * dk + x] : 0.0f;
      limits_[r] = r < rows_ ? key_limit(p_, b, static_cast<int64_t>(r)) : 0;
      m_[r] = kNegInf;
      l_[r] = 0.0f;
      exact_[r] = 0;
    }
    if (columns_) {  // Qᵀ in blocks of N rows: qt_[(block · dk + x) · N + lane]
      for (size_t r0 = 0; r0 < rows_; r0 += N)
        for (size_t x = 0; x < dk; ++x)
          for (size_t lane = 0; lane < N; ++lane)
            qt_[r0 * dk + x * N + lane] = r0 + lane < rows_ ? q[(r0 + lane) * dk + x] : 0.0f;
    }
    std::fill(o_.get(), o_.get() + rows4_ * dvp, 0.0f);
    const uint8_t* mask = nullptr;
    if (p_.mask) {
      const ExplicitMask& em = *p_.mask;
      const size_t mb = em.batch == 1 ? 0 : static_cast<size_t>(b);
      const size_t mh = em.heads == 1 ? 0 : static_cast<size_t>(h);
      mask = em.allowed.data() + (mb * static_cast<size_t>(em.heads) + mh) * nq * nk;
    }
    const int64_t hi = *std::max_element(limits_.get(), limits_.get() + rows_);
    const auto k0 = static_cast<size_t>(split * kSplitKeys);
    const size_t kend = std::min(nk, k0 + static_cast<size_t>(kSplitKeys));
    // Keys at or past every row's limit are read by no row (causal, padding);
    // they are only validated.
    const size_t k1 = std::clamp(static_cast<size_t>(std::max<int64_t>(hi, 0)), k0, kend);
    bool finite = true;
    if (k1 < kend)
      finite = AllFinite(d_, k + k1 * dk, (kend - k1) * dk) && AllFinite(d_, v + k1 * dv, (kend - k1) * dv);
    const size_t dv_vecs = dv / N;
    for (size_t j0 = k0; j0 < k1; j0 += kPanelKeys) {
      const size_t kcount = std::min(kPanelKeys, k1 - j0);
      // 1. Dot products along d; lanes past kcount and padding rows are -inf.
      // Software prefetch, spread over the keys: this block's V row j (step 4
      // reads V in column blocks, not in address order) and the next block's K
      // row j, so that both streams keep the memory busy.
      const bool prefetch_k = j0 + kPanelKeys < k1;
      for (size_t j = 0; j < kcount; ++j) {
        const char* vrow = reinterpret_cast<const char*>(v + (j0 + j) * dv);
        for (size_t c = 0; c < dv * sizeof(float); c += 64) hwy::Prefetch(vrow + c);
        if (prefetch_k && j0 + kPanelKeys + j < k1) {
          const char* krow = reinterpret_cast<const char*>(k + (j0 + kPanelKeys + j) * dk);
          for (size_t c = 0; c < dk * sizeof(float); c += 64) hwy::Prefetch(krow + c);
        }
        if (columns_) continue;  // scored below, eight keys at a time
        const float* kj = k + (j0 + j) * dk;
        size_t r = 0;
#if HWY_TARGET != HWY_SCALAR
        for (; r + 4 <= rows_; r += 4)
          DotFourRows(d_, q_.get() + r * dkp_, dkp_, kj, dk, s_.get() + r * kPanelKeys + j, kPanelKeys);
#endif
        for (; r < rows_; ++r) s_[r * kPanelKeys + j] = DotRow(d_, q_.get() + r * dkp_, kj, dk);
      }
#if HWY_TARGET != HWY_SCALAR
      if (columns_) ScoreColumns(k + j0 * dk, kcount, dk);
#endif
      for (size_t r = 0; r < rows4_; ++r) {
        float* srow = s_.get() + r * kPanelKeys;
        std::fill(srow + (r < rows_ ? kcount : 0), srow + kPanelKeys, kNegInf);
      }
      // 2. Overflowed readable dot products, then masks.
      for (size_t r = 0; r < rows_; ++r) {
        float* srow = s_.get() + r * kPanelKeys;
        const uint8_t* mrow = mask ? mask + r * nk + j0 : nullptr;
        const int64_t readable =
            std::clamp<int64_t>(limits_[r] - static_cast<int64_t>(j0), 0, static_cast<int64_t>(kcount));
        VF nonfinite = hn::Zero(d_);  // x·0 is NaN exactly where x is ±inf or NaN
        for (size_t c = 0; c < kPanelKeys; c += N)
          nonfinite = hn::Add(nonfinite, hn::Mul(hn::Load(d_, srow + c), hn::Zero(d_)));
        if (!hn::AllTrue(d_, hn::Eq(nonfinite, nonfinite))) {  // lanes past kcount are -inf
          for (size_t j = 0; j < kcount; ++j) {
            if (std::isfinite(srow[j])) continue;
            if (r == 0 && !AllFinite(d_, k + (j0 + j) * dk, dk)) finite = false;  // bad input
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
        float* srow = s_.get() + r * kPanelKeys;
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
        const VF shift = hn::Set(d_, m_new);
        VF sum = hn::Zero(d_);
        for (size_t c = 0; c < kPanelKeys; c += N) {
          const VF pv = hn::Exp(d_, hn::Sub(hn::Mul(hn::Load(d_, srow + c), scale), shift));
          hn::Store(pv, d_, srow + c);
          sum = hn::Add(sum, pv);
        }
        l_[r] = l_[r] * alpha_[r] + hn::GetLane(hn::SumOfLanes(d_, sum));
        m_[r] = m_new;
      }
      // 4. o = alpha·o + P · V over the block's keys, V read in place.
      const float* vblock = v + j0 * dv;
      if (rows_ == 1) {  // one row: no padding rows, wider column blocks
        size_t c = 0;
        for (; c + 8 <= dv_vecs; c += 8)
          AccumulateOneRow<8>(d_, s_.get(), kcount, vblock + c * N, dv, o_.get() + c * N, alpha_[0]);
        for (; c + 4 <= dv_vecs; c += 4)
          AccumulateOneRow<4>(d_, s_.get(), kcount, vblock + c * N, dv, o_.get() + c * N, alpha_[0]);
        for (; c < dv_vecs; ++c)
          AccumulateOneRow<1>(d_, s_.get(), kcount, vblock + c * N, dv, o_.get() + c * N, alpha_[0]);
        for (size_t col = dv_vecs * N; col < dv; ++col) {  // columns past the last whole vector
          float acc = o_[col] * alpha_[0];
          for (size_t j = 0; j < kcount; ++j) acc += s_[j] * vblock[j * dv + col];
          o_[col] = acc;
        }
        continue;
      }
      for (size_t g = 0; g < rows4_; g += kGroupRows) {
        const float* pg = s_.get() + g * kPanelKeys;
        float* og = o_.get() + g * dvp;
        size_t c = 0;
        for (; c + kGroupVecs <= dv_vecs; c += kGroupVecs)
          AccumulateGroup<kGroupVecs>(d_, pg, kcount, vblock + c * N, dv, og + c * N, dvp, alpha_.get() + g);
        switch (dv_vecs - c) {
          case 3: AccumulateGroup<3>(d_, pg, kcount, vblock + c * N, dv, og + c * N, dvp, alpha_.get() + g); break;
          case 2: AccumulateGroup<2>(d_, pg, kcount, vblock + c * N, dv, og + c * N, dvp, alpha_.get() + g); break;
          case 1: AccumulateGroup<1>(d_, pg, kcount, vblock + c * N, dv, og + c * N, dvp, alpha_.get() + g); break;
          default: break;
        }
        for (size_t r = g; r < g + kGroupRows; ++r) {  // columns past the last whole vector
          for (size_t col = dv_vecs * N; col < dv; ++col) {
            float acc = o_[r * dvp + col] * alpha_[r];
            for (size_t j = 0; j < kcount; ++j) acc += s_[r * kPanelKeys + j] * vblock[j * dv + col];
            o_[r * dvp + col] = acc;
          }
        }
      }
    }
    // Row 0 has added p·v for every key of [k0, k1): a non-finite value shows.
    if (k1 > k0 && !AllFinite(d_, o_.get(), dv))
      finite = finite && AllFinite(d_, v + k0 * dv, (k1 - k0) * dv);
    const size_t base = static_cast<size_t>(slice * splits + split) * nq;
    for (size_t r = 0; r < rows_; ++r) {
      out.m[base + r] = m_[r];
      out.l[base + r] = l_[r];
      out.exact[base + r] = exact_[r];
      std::copy(o_.get() + r * dvp, o_.get() + (r + 1) * dvp, out.o.get() + (base + r) * dvp);
    }
    return finite;
  }

#if HWY_TARGET != HWY_SCALAR
  // s_[r][j] = q_r · k_j for every row and j < kcount, with the lanes over
  // query rows (N rows per vector, from qt_) and eight keys at a time: each
  // FMA takes one key element broadcast, and no horizontal sums are needed.
  // Sums run along x in order, one accumulator per (row, key).
  HWY_NOINLINE void ScoreColumns(const float* HWY_RESTRICT k, size_t kcount, size_t dk) {
    const size_t N = hn::Lanes(d_);
    constexpr size_t kKeys = 8;
    HWY_ALIGN float cols[kKeys * HWY_MAX_BYTES / sizeof(float)];
    for (size_t r0 = 0; r0 < rows_; r0 += N) {
      const float* HWY_RESTRICT qt = qt_.get() + r0 * dk;
      const size_t lanes = std::min(N, rows_ - r0);
      for (size_t j = 0; j < kcount; j += kKeys) {
        const size_t keys = std::min(kKeys, kcount - j);
        const float* HWY_RESTRICT kj = k + j * dk;
        VF acc[kKeys];
        for (size_t t = 0; t < kKeys; ++t) acc[t] = hn::Zero(d_);
        if (keys == kKeys) {
          for (size_t x = 0; x < dk; ++x) {
            const VF qv = hn::Load(d_, qt + x * N);
            for (size_t t = 0; t < kKeys; ++t) acc[t] = hn::MulAdd(qv, hn::Set(d_, kj[t * dk + x]), acc[t]);
          }
        } else {
          for (size_t x = 0; x < dk; ++x) {
            const VF qv = hn::Load(d_, qt + x * N);
            for (size_t t = 0; t < keys; ++t) acc[t] = hn::MulAdd(qv, hn::Set(d_, kj[t * dk + x]), acc[t]);
          }
        }
        for (size_t t = 0; t < keys; ++t) hn::Store(acc[t], d_, cols + t * N);
        for (size_t lane = 0; lane < lanes; ++lane) {
          float* HWY_RESTRICT srow = s_.get() + (r0 + lane) * kPanelKeys + j;
          for (size_t t = 0; t < keys; ++t) srow[t] = cols[t * N + lane];
        }
      }
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
    float* o = o_.get();
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
          const float* po = part.o.get() + at * dvp;
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
  bool columns_ = false;  // scores by ScoreColumns (more than kColumnsMinRows rows)
  hwy::AlignedFreeUniquePtr<float[]> q_, qt_, o_, s_, m_, l_, alpha_;
  hwy::AlignedFreeUniquePtr<int64_t[]> limits_;
  hwy::AlignedFreeUniquePtr<uint8_t[]> exact_;
  std::vector<long double> exact_acc_;
};

// Runs work(*workers[t]) on `threads` threads, the caller's being the first.
// A thread that cannot start leaves `sync`, so the others do its share.
template <class Worker, class Barrier, class Work>
void RunOnThreads(std::vector<std::unique_ptr<Worker>>& workers, Barrier& sync, const Work& work) {
  const auto threads = static_cast<int64_t>(workers.size());
  std::vector<std::thread> pool;
  try {
    for (int64_t t = 1; t < threads; ++t) pool.emplace_back(work, std::ref(*workers[t]));
  } catch (...) {
    for (auto missing = threads - 1 - static_cast<int64_t>(pool.size()); missing > 0; --missing)
      sync.arrive_and_drop();
  }
  work(*workers[0]);
  for (auto& thread : pool) thread.join();
}

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
  std::barrier sync(static_cast<std::ptrdiff_t>(threads));
  auto work = [&](DecodeWorker& worker) {
    for (int64_t i; (i = next_item.fetch_add(1, std::memory_order_relaxed)) < slices * splits;)
      if (!worker.ProcessSplit(i / splits, i % splits, splits, partials))
        finite.store(false, std::memory_order_relaxed);
    sync.arrive_and_wait();  // orders every store above before the loads below
    if (!finite.load(std::memory_order_relaxed)) return;
    for (int64_t s; (s = next_slice.fetch_add(1, std::memory_order_relaxed)) < slices;)
      worker.Merge(s, splits, partials);
  };
  RunOnThreads(workers, sync, work);
  return finite.load();
}

// The whole call on `threads` threads (the caller's included). Slices are
// taken in groups; for each group all workers first pack its panels, then
// compute its chunks, both handed out one at a time through an atomic counter
// (so a thread that finishes early takes more), with a barrier after each
// phase. Every chunk is computed by the same instructions whichever thread
// takes it, so the output is bitwise identical for any thread count.
bool RunAttention(const KernelArgs& a, int64_t threads) {
  if (a.decode) return RunDecode(a, threads);
  const DF d;
  const Layout lay(a, d);
  const int64_t slices = a.problem->shape.batch * a.problem->shape.heads;
  const int64_t chunks = a.chunks_per_slice;
  const auto panels = static_cast<int64_t>(lay.panels);
  // Enough chunks per group for about four per thread, and no more: long
  // sequences pack one slice at a time, short ones several.
  const int64_t group = std::clamp<int64_t>(hwy::DivCeil(4 * threads, chunks), 1, slices);
  const int64_t groups = hwy::DivCeil(slices, group);

  PackedGroup packed(a, lay, group);
  std::vector<std::unique_ptr<Worker>> workers;
  for (int64_t t = 0; t < threads; ++t) workers.push_back(std::make_unique<Worker>(a, lay));

  // Phase state, changed only by the barrier's completion step.
  int64_t current = 0;
  bool packing = true;
  std::atomic<int64_t> next{0};
  auto end_of_phase = [&]() noexcept {
    next.store(0, std::memory_order_relaxed);
    if (!packing) {
      ++current;
      packed.SetFirstSlice(current * group);
    }
    packing = !packing;
  };
  std::barrier sync(static_cast<std::ptrdiff_t>(threads), end_of_phase);

  auto work = [&](Worker& worker) {
    while (current < groups) {
      const int64_t first = current * group;
      const int64_t count = std::min(group, slices - first);
      const int64_t items = count * (packing ? panels : chunks);
      for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < items;) {
        if (packing)
          packed.PackPanel(first + i / panels, static_cast<size_t>(i % panels));
        else  // last chunks first: under a causal mask they cost the most
          worker.ProcessChunk(first + i / chunks, chunks - 1 - i % chunks, packed);
      }
      sync.arrive_and_wait();
    }
  };

  RunOnThreads(workers, sync, work);
  return true;
}

}  // namespace attncheck::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
