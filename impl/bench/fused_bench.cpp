// Micro-benchmark of the fused kernel alone, for tuning it:
// impl_fused_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// The comparative suite with the peers and the machine's peak is bench/.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "attncheck/attention.h"

namespace {

std::vector<float> normal_tensor(int64_t size, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> t(static_cast<size_t>(size));
  for (float& x : t) x = dist(gen);
  return t;
}

// Args: n, d, causal (0/1), threads, heads.
void BM_fused(benchmark::State& state) {
  attncheck::Problem p;
  const int64_t n = state.range(0), d = state.range(1);
  p.shape = {1, state.range(4), n, n, d, d};
  p.causal = state.range(2) ? attncheck::Causal::top_left : attncheck::Causal::none;
  const auto q = normal_tensor(p.shape.q_size(), 1);
  const auto k = normal_tensor(p.shape.k_size(), 2);
  const auto v = normal_tensor(p.shape.v_size(), 3);
  std::vector<float> out(static_cast<size_t>(p.shape.out_size()));
  attncheck::AttentionOptions options;
  options.threads = static_cast<int>(state.range(3));
  for (auto _ : state) {
    attncheck::attention(p, q.data(), k.data(), v.data(), out.data(), options);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // Useful flops: 4·n_q·n_k·d per head, only allowed pairs under the causal mask.
  const auto nf = static_cast<double>(n);
  const double pairs = state.range(2) ? nf * (nf + 1) / 2.0 : nf * nf;
  state.counters["GFLOPs"] = benchmark::Counter(4.0 * pairs * static_cast<double>(d) *
                                                    static_cast<double>(p.shape.heads) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(attncheck::active_target());
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t threads : {1, 2})
    for (int64_t causal : {0, 1})
      for (int64_t n : {256, 512, 1024, 2048, 4096}) b->Args({n, 64, causal, threads, 1});
  b->Args({4096, 64, 0, 1, 2});
  b->Args({4096, 64, 0, 2, 2});
}

BENCHMARK(BM_fused)->Apply(Args)->ArgNames({"n", "d", "causal", "threads", "heads"})->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
