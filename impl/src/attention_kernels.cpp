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
  return args.decode ? RunDecode(args, threads) : RunTiled(args, threads);
}

int64_t KernelTarget() { return HWY_TARGET; }

}  // namespace attncheck::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attncheck::detail {

HWY_EXPORT(Attention);
HWY_EXPORT(KernelTarget);

bool run_attention(const KernelArgs& args, int64_t threads) {
  return HWY_DYNAMIC_DISPATCH(Attention)(args, threads);
}

int64_t dispatched_target() { return HWY_DYNAMIC_DISPATCH(KernelTarget)(); }

}  // namespace attncheck::detail
#endif  // HWY_ONCE
