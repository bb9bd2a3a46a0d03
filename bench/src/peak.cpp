// Peak fp32 FMA probe. Compiled once per SIMD target (Highway foreach_target)
// and dispatched at run time, so the probe uses AVX-512 where the CPU has it.
#include <cstdint>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/peak.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attncheck::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Twelve independent accumulator chains: enough to cover FMA latency (4 cycles)
// times two FMA units with room to spare, and few enough to stay in registers
// with AVX2's 16. Each chain is a = a * m + c; FMAs are never reassociated
// (no -ffast-math), so the compiler cannot merge the chains. The fixed point
// c / (1 - m) keeps values normal, so no denormal slowdown.
float FmaChains(int64_t iterations) {
  const hn::ScalableTag<float> d;
  const auto m = hn::Set(d, 0.9999f);
  const auto c = hn::Set(d, 1e-4f);
  auto a0 = hn::Set(d, 0.10f), a1 = hn::Set(d, 0.11f), a2 = hn::Set(d, 0.12f);
  auto a3 = hn::Set(d, 0.13f), a4 = hn::Set(d, 0.14f), a5 = hn::Set(d, 0.15f);
  auto a6 = hn::Set(d, 0.16f), a7 = hn::Set(d, 0.17f), a8 = hn::Set(d, 0.18f);
  auto a9 = hn::Set(d, 0.19f), a10 = hn::Set(d, 0.20f), a11 = hn::Set(d, 0.21f);
  for (int64_t it = 0; it < iterations; ++it) {
    a0 = hn::MulAdd(a0, m, c);
    a1 = hn::MulAdd(a1, m, c);
    a2 = hn::MulAdd(a2, m, c);
    a3 = hn::MulAdd(a3, m, c);
    a4 = hn::MulAdd(a4, m, c);
    a5 = hn::MulAdd(a5, m, c);
    a6 = hn::MulAdd(a6, m, c);
    a7 = hn::MulAdd(a7, m, c);
    a8 = hn::MulAdd(a8, m, c);
    a9 = hn::MulAdd(a9, m, c);
    a10 = hn::MulAdd(a10, m, c);
    a11 = hn::MulAdd(a11, m, c);
  }
  const auto sum = hn::Add(hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)),
                                   hn::Add(hn::Add(a4, a5), hn::Add(a6, a7))),
                           hn::Add(hn::Add(a8, a9), hn::Add(a10, a11)));
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

// Flops of one FmaChains iteration: 12 chains × lanes × 2.
int64_t FlopsPerIteration() { return 12 * 2 * static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>())); }

const char* ProbeTarget() { return hwy::TargetName(HWY_TARGET); }

// Sums count floats with eight independent chains of aligned vector loads,
// so the loop is bound by the loads, not by the adds' latency; the floats
// before the first vector boundary and past the last whole eight vectors one
// by one. The bandwidth probe and the read floor (read_floor.cpp)
// both read with it.
double SumStream(const float* HWY_RESTRICT x, size_t count) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  auto s4 = hn::Zero(d), s5 = hn::Zero(d), s6 = hn::Zero(d), s7 = hn::Zero(d);
  // The floats before the first vector boundary one by one, so that no load
  // spans two cache lines: from a buffer 16 bytes past a 64-byte boundary
  // (glibc's malloc) unaligned vector loads read 1.14-1.25x slower
  // (docs/performance-decode.md).
  double total = 0.0;
  size_t i = 0;
  for (; i < count && reinterpret_cast<uintptr_t>(x + i) % (N * sizeof(float)) != 0; ++i) total += x[i];
  for (; i + 8 * N <= count; i += 8 * N) {
    s0 = hn::Add(s0, hn::Load(d, x + i));
    s1 = hn::Add(s1, hn::Load(d, x + i + N));
    s2 = hn::Add(s2, hn::Load(d, x + i + 2 * N));
    s3 = hn::Add(s3, hn::Load(d, x + i + 3 * N));
    s4 = hn::Add(s4, hn::Load(d, x + i + 4 * N));
    s5 = hn::Add(s5, hn::Load(d, x + i + 5 * N));
    s6 = hn::Add(s6, hn::Load(d, x + i + 6 * N));
    s7 = hn::Add(s7, hn::Load(d, x + i + 7 * N));
  }
  const auto sum = hn::Add(hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)), hn::Add(hn::Add(s4, s5), hn::Add(s6, s7)));
  total += hn::GetLane(hn::SumOfLanes(d, sum));
  for (; i < count; ++i) total += x[i];
  return total;
}

}  // namespace attncheck::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <hwy/aligned_allocator.h>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <new>
#include <thread>
#include <vector>

#include "attncheck/cpu.h"
#include "attncheck/peak.h"

namespace attncheck {
HWY_EXPORT(FmaChains);
HWY_EXPORT(FlopsPerIteration);
HWY_EXPORT(ProbeTarget);
HWY_EXPORT(SumStream);

namespace {
// Keeps the chains' results observable so the loop is not removed.
std::atomic<float> probe_sink{0.0f};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Timing {
  double wall_seconds = 0.0;  ///< from the common start until every thread is done
  double own_cpu_seconds = 0.0;  ///< the calling thread's CPU time for its own work(0)
};

// work(t) on `threads` threads released at once, the calling thread doing
// work(0); started threads inherit the calling thread's CPUs.
template <class Work>
Timing RunTogether(int threads, const Work& work) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) {
    workers.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      work(t);
    });
  }
  while (ready.load() < threads - 1) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = thread_cpu_seconds();
  go.store(true);
  work(0);
  Timing timing;
  timing.own_cpu_seconds = thread_cpu_seconds() - cpu_start;
  for (auto& w : workers) w.join();
  timing.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return timing;
}

}  // namespace

double measure_peak_fma_gflops(int threads, int one_thread_cpu) {
  threads = std::max(threads, 1);
  const OnCpu placed(threads == 1 ? one_thread_cpu : -1);
  const int64_t flops_per_iteration = HWY_DYNAMIC_DISPATCH(FlopsPerIteration)();
  // 1 GFLOP per thread and run: about 6 ms at 170 GFLOP/s; 32 runs, the first
  // of which also bring the clock up.
  const int64_t iterations = 1'000'000'000 / flops_per_iteration;
  const double flops_per_thread = static_cast<double>(flops_per_iteration * iterations);
  const int runs = 32;
  double best = 0.0;
  for (int run = 0; run < runs; ++run) {
    const Timing timing = RunTogether(threads, [&](int) {
      probe_sink.store(HWY_DYNAMIC_DISPATCH(FmaChains)(iterations), std::memory_order_relaxed);
    });
    // One thread: its own CPU time, so that other processes time-slicing the
    // core (this machine is shared) do not lower the limit. Several threads:
    // wall time, since their concurrency is what is being measured.
    const double seconds = threads == 1 ? timing.own_cpu_seconds : timing.wall_seconds;
    best = std::max(best, flops_per_thread * threads / seconds * 1e-9);
  }
  return best;
}

std::string peak_probe_target() { return HWY_DYNAMIC_DISPATCH(ProbeTarget)(); }

double fma_chains(double flops) {
  const int64_t per_iteration = HWY_DYNAMIC_DISPATCH(FlopsPerIteration)();
  const auto iterations = static_cast<int64_t>(flops / static_cast<double>(per_iteration) + 0.5);
  probe_sink.store(HWY_DYNAMIC_DISPATCH(FmaChains)(iterations), std::memory_order_relaxed);
  return static_cast<double>(iterations * per_iteration);
}

size_t read_bandwidth_buffer_bytes() {
  // 256 MiB: 8 × the L3 of a CCD of current desktop and server parts (32 MiB),
  // and small enough to map quickly (first touch costs about 10 s per GiB in
  // some virtual machines). sysconf's L3 size is not used: virtual machines
  // report made-up sizes. ATTNCHECK_BANDWIDTH_MIB overrides it (64 .. 65536).
  size_t mib = 256;
  if (const char* env = std::getenv("ATTNCHECK_BANDWIDTH_MIB")) {
    const long long value = std::atoll(env);
    if (value >= 64 && value <= 65536) mib = static_cast<size_t>(value);
  }
  return mib << 20;
}

namespace {

// The bandwidth probe's buffer, first touched by `threads` threads so that
// each maps its own pages before any timing.
hwy::AlignedFreeUniquePtr<float[]> ProbeBuffer(size_t count, int threads) {
  auto buffer = hwy::AllocateAligned<float>(count);
  if (!buffer) throw std::bad_alloc();
  const size_t part = hwy::DivCeil(count, static_cast<size_t>(threads));
  std::vector<std::thread> touch;
  for (int t = 0; t < threads; ++t)
    touch.emplace_back([&, t] {
      const size_t begin = std::min(count, static_cast<size_t>(t) * part);
      std::fill(buffer.get() + begin, buffer.get() + std::min(count, begin + part), 1.0f);
    });
  for (auto& w : touch) w.join();
  return buffer;
}

// Best of 5 runs of `threads` threads each reading its own contiguous share
// (a multiple of 1024 floats) of buffer[0 .. count); the calling thread is
// the first, on CPU `cpu` when one thread reads and cpu >= 0.
double ReadBandwidth(const float* buffer, size_t count, int threads, int cpu) {
  threads = std::max(threads, 1);
  const OnCpu placed(threads == 1 ? cpu : -1);
  const size_t share = count / static_cast<size_t>(threads) / 1024 * 1024;
  const int runs = 5;
  double best = 0.0;
  for (int run = 0; run < runs; ++run) {
    const double seconds = RunTogether(threads, [&](int t) {
                             const float* part = buffer + static_cast<size_t>(t) * share;
                             probe_sink.store(static_cast<float>(sum_floats(part, share)), std::memory_order_relaxed);
                           }).wall_seconds;
    best = std::max(best, static_cast<double>(share * sizeof(float)) * threads / seconds * 1e-9);
  }
  return best;
}

}  // namespace

std::vector<double> measure_read_bandwidth_gbps(const std::vector<int>& thread_counts, int one_thread_cpu) {
  const size_t count = read_bandwidth_buffer_bytes() / sizeof(float);
  int most = 1;
  for (int t : thread_counts) most = std::max(most, t);
  const auto buffer = ProbeBuffer(count, most);
  std::vector<double> results;
  for (int threads : thread_counts) results.push_back(ReadBandwidth(buffer.get(), count, threads, one_thread_cpu));
  return results;
}

std::vector<double> measure_read_bandwidth_by_cpu(const std::vector<int>& cpus) {
  const size_t count = read_bandwidth_buffer_bytes() / sizeof(float);
  const auto buffer = ProbeBuffer(count, 1);
  std::vector<double> results;
  for (int cpu : cpus) results.push_back(ReadBandwidth(buffer.get(), count, 1, cpu));
  return results;
}

double sum_floats(const float* x, size_t count) { return HWY_DYNAMIC_DISPATCH(SumStream)(x, count); }

double measure_read_bandwidth_gbps(int threads) { return measure_read_bandwidth_gbps(std::vector<int>{threads}).front(); }

}  // namespace attncheck
#endif  // HWY_ONCE
