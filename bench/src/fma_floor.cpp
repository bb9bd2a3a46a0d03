// The compute floor of one call (fma_floor in bench.h): the flops
// useful_flops() counts, done by the FMA probe's register-only chains on the
// fused path's thread pool, nothing else.
#include <algorithm>
#include <atomic>
#include <vector>

#include "attncheck/bench.h"
#include "attncheck/peak.h"
#include "attncheck/peers.h"
#include "thread_pool.h"

namespace attncheck {

void fma_floor(const Problem& problem, const float* q, const float* k, const float* v, float* out, int threads) {
  check_floor_call(problem, q, k, v, out);
  // Equal shares handed out through a counter, so that a share whose thread
  // the pool could not start is done by another.
  const int64_t shares = std::max(threads, 1);
  const double share_flops = useful_flops(problem) / static_cast<double>(shares);
  std::atomic<int64_t> next{0};
  std::vector<double> done(static_cast<size_t>(shares), 0.0);
  detail::run_concurrently(
      shares,
      [&](int64_t) {
        for (int64_t s; (s = next.fetch_add(1)) < shares;) done[static_cast<size_t>(s)] = fma_chains(share_flops);
      },
      [](int64_t) {});
  double total = 0.0;
  for (double flops : done) total += flops;
  write_floor_output(problem, out, total);
}

}  // namespace attncheck
