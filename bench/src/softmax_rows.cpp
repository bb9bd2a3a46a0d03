// The OpenBLAS peer's row softmax, compiled once per SIMD target (Highway
// foreach_target) and dispatched at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/softmax_rows.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <limits>

HWY_BEFORE_NAMESPACE();
namespace attncheck::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void SoftmaxRows(float* s, int64_t rows, int64_t stride) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * stride;
    auto vmax = neg_inf;
    for (int64_t j = 0; j < stride; j += lanes) vmax = hn::Max(vmax, hn::LoadU(d, row + j));
    const auto row_max = hn::MaxOfLanes(d, vmax);
    if (hn::GetLane(row_max) == -std::numeric_limits<float>::infinity()) {
      for (int64_t j = 0; j < stride; j += lanes) hn::StoreU(hn::Zero(d), d, row + j);
      continue;
    }
    auto vsum = hn::Zero(d);
    for (int64_t j = 0; j < stride; j += lanes) {
      const auto x = hn::LoadU(d, row + j);
      const auto readable = hn::Ne(x, neg_inf);
      // Masked entries get exp of 0 computed and then replaced by an exact 0.
      const auto e = hn::IfThenElseZero(readable, hn::Exp(d, hn::IfThenElseZero(readable, hn::Sub(x, row_max))));
      hn::StoreU(e, d, row + j);
      vsum = hn::Add(vsum, e);
    }
    const auto inv = hn::Div(hn::Set(d, 1.0f), hn::SumOfLanes(d, vsum));
    for (int64_t j = 0; j < stride; j += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, row + j), inv), d, row + j);
  }
}

}  // namespace attncheck::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "softmax_rows.h"

namespace attncheck::detail {
HWY_EXPORT(SoftmaxRows);

int64_t softmax_stride(int64_t n_k) {
  // 64 floats = 256 bytes covers the widest Highway vector on any target.
  constexpr int64_t block = 64;
  return (n_k + block - 1) / block * block;
}

void softmax_rows(float* s, int64_t rows, int64_t stride) {
  HWY_DYNAMIC_DISPATCH(SoftmaxRows)(s, rows, stride);
}

}  // namespace attncheck::detail
#endif  // HWY_ONCE
