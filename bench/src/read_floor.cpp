// The memory floor of one call (read_floor in peers.h): the bytes moved_bytes()
// counts, read once with the call's threads and summed, nothing else. Its sum
// is compiled once per SIMD target (Highway foreach_target) and dispatched at
// run time, like the bandwidth probe.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/read_floor.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attncheck::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Σ x[0 .. count) with eight independent vector accumulators (as the
// bandwidth probe's loop), unaligned loads, the rest one by one.
double SumFloats(const float* HWY_RESTRICT x, size_t count) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  auto s4 = hn::Zero(d), s5 = hn::Zero(d), s6 = hn::Zero(d), s7 = hn::Zero(d);
  size_t i = 0;
  for (; i + 8 * N <= count; i += 8 * N) {
    s0 = hn::Add(s0, hn::LoadU(d, x + i));
    s1 = hn::Add(s1, hn::LoadU(d, x + i + N));
    s2 = hn::Add(s2, hn::LoadU(d, x + i + 2 * N));
    s3 = hn::Add(s3, hn::LoadU(d, x + i + 3 * N));
    s4 = hn::Add(s4, hn::LoadU(d, x + i + 4 * N));
    s5 = hn::Add(s5, hn::LoadU(d, x + i + 5 * N));
    s6 = hn::Add(s6, hn::LoadU(d, x + i + 6 * N));
    s7 = hn::Add(s7, hn::LoadU(d, x + i + 7 * N));
  }
  const auto sum = hn::Add(hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)), hn::Add(hn::Add(s4, s5), hn::Add(s6, s7)));
  double total = hn::GetLane(hn::SumOfLanes(d, sum));
  for (; i < count; ++i) total += x[i];
  return total;
}

}  // namespace attncheck::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "attncheck/peers.h"

namespace attncheck {
HWY_EXPORT(SumFloats);

namespace {

struct Range {
  const float* begin;
  size_t count;
};

// Q whole, then each slice's K and V rows up to the last key any query row of
// its batch element may read (as moved_bytes() counts them).
std::vector<Range> ranges_read(const Problem& p, const float* q, const float* k, const float* v) {
  const Shape& s = p.shape;
  std::vector<Range> ranges{{q, static_cast<size_t>(s.q_size())}};
  for (int64_t b = 0; b < s.batch; ++b) {
    int64_t last = 0;
    for (int64_t i = 0; i < s.n_q; ++i) last = std::max(last, key_limit(p, b, i));
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t slice = b * s.heads + h;
      ranges.push_back({k + slice * s.n_k * s.d_k, static_cast<size_t>(last * s.d_k)});
      ranges.push_back({v + slice * s.n_k * s.d_v, static_cast<size_t>(last * s.d_v)});
    }
  }
  return ranges;
}

// Σ of the floats [first, first + count) of the ranges laid end to end.
double sum_part(const std::vector<Range>& ranges, size_t first, size_t count) {
  double total = 0.0;
  for (const Range& r : ranges) {
    if (count == 0) break;
    if (first >= r.count) {
      first -= r.count;
      continue;
    }
    const size_t n = std::min(count, r.count - first);
    total += HWY_DYNAMIC_DISPATCH(SumFloats)(r.begin + first, n);
    count -= n;
    first = 0;
  }
  return total;
}

}  // namespace

void read_floor(const Problem& problem, const float* q, const float* k, const float* v, float* out, int threads) {
  validate_problem(problem);  // sizes only: scanning the values would read K and V twice
  const struct {
    const char* name;
    const void* data;
  } tensors[] = {{"Q", q}, {"K", k}, {"V", v}, {"out", out}};
  for (const auto& t : tensors)
    if (t.data == nullptr) throw InvalidInput(std::string(t.name) + ": null pointer");
  const std::vector<Range> ranges = ranges_read(problem, q, k, v);
  size_t floats = 0;
  for (const Range& r : ranges) floats += r.count;
  // Each thread a contiguous share, so that it streams in address order.
  const auto workers = static_cast<size_t>(std::max(threads, 1));
  const size_t share = (floats + workers - 1) / workers;
  std::vector<double> sums(workers, 0.0);
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < workers; ++t)
    helpers.emplace_back([&, t] { sums[t] = sum_part(ranges, t * share, std::min(share, floats - std::min(floats, t * share))); });
  sums[0] = sum_part(ranges, 0, std::min(share, floats));
  for (auto& h : helpers) h.join();
  double total = 0.0;
  for (double s : sums) total += s;
  const auto out_size = static_cast<size_t>(problem.shape.out_size());
  std::fill(out, out + out_size, 0.0f);
  if (out_size > 0) out[0] = static_cast<float>(total);
}

}  // namespace attncheck
#endif  // HWY_ONCE
