// Compiles the kernels of attention-inl.h once per SIMD target and exports
// them for run-time dispatch (Highway: foreach_target.h re-includes this file
// with each target's attributes; no -march flags are involved).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "attention-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attncheck::detail::HWY_NAMESPACE {

void AttentionWorker(const KernelArgs& args, std::atomic<int64_t>* next) {
  Worker worker(args);
  worker.Run(*next);
}

int64_t KernelTarget() { return HWY_TARGET; }

}  // namespace attncheck::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attncheck::detail {

HWY_EXPORT(AttentionWorker);
HWY_EXPORT(KernelTarget);

void run_attention_worker(const KernelArgs& args, std::atomic<int64_t>& next) {
  HWY_DYNAMIC_DISPATCH(AttentionWorker)(args, &next);
}

int64_t dispatched_target() { return HWY_DYNAMIC_DISPATCH(KernelTarget)(); }

}  // namespace attncheck::detail
#endif  // HWY_ONCE
