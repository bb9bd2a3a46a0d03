// Time per (batch, head) slice of the reference at n_q = n_k = d_k = d_v = 64,
// in each scalar type. The property suite runs the 50-digit reference on
// hundreds of small cases, so its time per slice bounds that suite's speed.
#include <benchmark/benchmark.h>

#include <string>

#include "attncheck/reference.h"

namespace {

using namespace attncheck;

template <class T>
void BM_ReferenceSlice(benchmark::State& state) {
  const int64_t n = state.range(0);
  Problem p;
  p.shape = {1, 1, n, n, n, n};
  std::vector<float> q(static_cast<size_t>(p.shape.q_size())), k(q.size()), v(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = static_cast<float>(static_cast<int>(i * 7 % 17) - 8) / 8;
    k[i] = static_cast<float>(static_cast<int>(i * 5 % 13) - 6) / 6;
    v[i] = static_cast<float>(static_cast<int>(i * 3 % 11) - 5) / 5;
  }
  for (auto _ : state) {
    std::vector<T> out = reference_attention<T>(p, q, k, v);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(p.shape.n_q == 64 ? "one 64x64x64 slice" : canonical_name(p));
  state.counters["slices/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK_TEMPLATE(BM_ReferenceSlice, double)->Arg(64)->Arg(16)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_ReferenceSlice, long double)->Arg(64)->Arg(16)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_ReferenceSlice, mp50)->Arg(64)->Arg(16)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_ReferenceSlice, mp100)->Arg(64)->Arg(16)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // The conditions a report prints beside these times.
  benchmark::AddCustomContext("reference_multiprecision",
                              std::string("MPFR ") + mpfr_get_version() +
                                  " (mp50: 50 decimal digits, mp100: 100)");
  benchmark::AddCustomContext("reference_slice", "one (batch, head) slice, n_q = n_k = d_k = d_v");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
