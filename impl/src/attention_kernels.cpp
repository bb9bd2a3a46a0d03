// Compiles the kernels of attention-inl.h (the tiled path) and decode-inl.h
// (the decode path) once per SIMD target and exports them for run-time
// dispatch (Highway: foreach_target.h re-includes this file with each target's
// attributes; no -march flags are involved).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "attention-inl.h"
#include "decode-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attncheck::detail::HWY_NAMESPACE {

bool Attention(const KernelArgs& args, int64_t threads) {
  CallArena::OfThisThread().Begin();
  return args.decode ? RunDecode(args, threads) : RunTiled(args, threads);
}

int64_t KernelTarget() { return HWY_TARGET; }

bool AllFinite(const float* x, size_t count) { return AllFiniteValues(DF(), x, count); }

void SoftmaxExpValues(const float* x, float* out, size_t count) {
  const DF d;
  const size_t N = hn::Lanes(d);
  HWY_ALIGN float tail[hn::MaxLanes(DF())] = {};
  size_t i = 0;
  for (; i + N <= count; i += N) hn::StoreU(SoftmaxExp(d, hn::LoadU(d, x + i)), d, out + i);
  if (i == count) return;
  std::copy(x + i, x + count, tail);
  hn::Store(SoftmaxExp(d, hn::Load(d, tail)), d, tail);
  std::copy(tail, tail + (count - i), out + i);
}

// SoftmaxExpBlock over blocks of four vectors (the tile's row takes
// kPanelKeys / N at once; the code is the same), the rest one by one.
void SoftmaxExpBlockValues(const float* x, float* out, size_t count) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + 4 * N <= count; i += 4 * N) {
    VF v[4];
    for (size_t c = 0; c < 4; ++c) v[c] = hn::LoadU(d, x + i + c * N);
    SoftmaxExpBlock(d, v);
    for (size_t c = 0; c < 4; ++c) hn::StoreU(v[c], d, out + i + c * N);
  }
  SoftmaxExpValues(x + i, out + i, count - i);
}

}  // namespace attncheck::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attncheck::detail {

HWY_EXPORT(Attention);
HWY_EXPORT(KernelTarget);
HWY_EXPORT(SoftmaxExpValues);
HWY_EXPORT(SoftmaxExpBlockValues);
HWY_EXPORT(AllFinite);

bool run_attention(const KernelArgs& args, int64_t threads) {
  return HWY_DYNAMIC_DISPATCH(Attention)(args, threads);
}

int64_t dispatched_target() { return HWY_DYNAMIC_DISPATCH(KernelTarget)(); }

bool all_finite_values(const float* x, size_t count) {
  return HWY_DYNAMIC_DISPATCH(AllFinite)(x, count);
}

void softmax_exp(const float* x, float* out, size_t count) {
  HWY_DYNAMIC_DISPATCH(SoftmaxExpValues)(x, out, count);
}

void softmax_exp_blocks(const float* x, float* out, size_t count) {
  HWY_DYNAMIC_DISPATCH(SoftmaxExpBlockValues)(x, out, count);
}

}  // namespace attncheck::detail
#endif  // HWY_ONCE
