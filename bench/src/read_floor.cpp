// The memory floor of one call (read_floor in peers.h): the bytes moved_bytes()
// counts, read once with the call's threads and summed with the bandwidth
// probe's loop (sum_floats), nothing else.
#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "attncheck/peak.h"
#include "attncheck/peers.h"
#include "thread_pool.h"

namespace attncheck {
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
    total += sum_floats(r.begin + first, n);
    count -= n;
    first = 0;
  }
  return total;
}

}  // namespace

void read_floor(const Problem& problem, const float* q, const float* k, const float* v, float* out, int threads) {
  check_floor_call(problem, q, k, v, out);  // sizes only: scanning the values would read K and V twice
  const std::vector<Range> ranges = ranges_read(problem, q, k, v);
  size_t floats = 0;
  for (const Range& r : ranges) floats += r.count;
  // Each share contiguous, so that it streams in address order; the shares
  // handed out through a counter on the fused path's thread pool (as
  // fma_floor's), so that handing out a call costs the floor what it costs
  // fused. Started anew for every call, the threads had made the 2-thread
  // floor of a 1-head n = 128 call slower than fused itself.
  const auto workers = static_cast<size_t>(std::max(threads, 1));
  const size_t share = (floats + workers - 1) / workers;
  std::vector<double> sums(workers, 0.0);
  std::atomic<size_t> next{0};
  detail::run_concurrently(
      static_cast<int64_t>(workers),
      [&](int64_t) {
        for (size_t t; (t = next.fetch_add(1)) < workers;)
          sums[t] = sum_part(ranges, t * share, std::min(share, floats - std::min(floats, t * share)));
      },
      [](int64_t) {});
  double total = 0.0;
  for (double s : sums) total += s;
  write_floor_output(problem, out, total);
}

void check_floor_call(const Problem& problem, const float* q, const float* k, const float* v, const float* out) {
  validate_problem(problem);
  const struct {
    const char* name;
    const void* data;
  } tensors[] = {{"Q", q}, {"K", k}, {"V", v}, {"out", out}};
  for (const auto& t : tensors)
    if (t.data == nullptr) throw InvalidInput(std::string(t.name) + ": null pointer");
}

void write_floor_output(const Problem& problem, float* out, double value) {
  const auto out_size = static_cast<size_t>(problem.shape.out_size());
  std::fill(out, out + out_size, 0.0f);
  if (out_size > 0) out[0] = static_cast<float>(value);
}

}  // namespace attncheck
