#include <benchmark/benchmark.h>
#include <cblas.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <new>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <random>
#include <thread>

#include "attncheck/attention.h"
#include "attncheck/bench.h"
#include "attncheck/cpu.h"
#include "attncheck/peak.h"
#include "attncheck/peers.h"
#include "attncheck/registry.h"

namespace attncheck {
namespace {

[[noreturn]] void fail(const std::string& message) { throw InvalidInput(message); }

// The floors (read-floor, fma-floor) compute no attention: they are what the others are judged against.
bool is_floor(const std::string& impl) { return impl == "read-floor" || impl == "fma-floor"; }

// How an implementation spreads work over the threads it is given.
int64_t threads_used(const std::string& impl, const Problem& p, int64_t threads) {
  if (impl == "reference-double") return 1;
  if (impl == "naive-eigen") return std::min(threads, p.shape.batch * p.shape.heads);
  return threads;
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

// Google Benchmark names a family instance "<family>/<args>/real_time". The
// families are registered as "<impl>/d:<d>/mask:<m>/threads:<t>" with the
// argument named n; this moves n next to the implementation, giving
// "<impl>/n:<n>/d:<d>/mask:<m>/threads:<t>", and drops "real_time". A cross
// family "<impl>/n_q:<q>/d:..." with the argument n_k becomes
// "<impl>/n_q:<q>/n_k:<k>/d:...". The aggregates over n or n_k (BigO, RMS)
// have no args and keep the family name.
void canonicalise(benchmark::BenchmarkName& name) {
  name.time_type.clear();
  // From the right: an implementation name may hold slashes (plugin:/path/lib.so).
  const auto slash = name.function_name.rfind("/d:");
  if (slash == std::string::npos || name.args.empty()) return;
  name.args += name.function_name.substr(slash);
  name.function_name.resize(slash);
}

// A reporter that renames the runs (canonicalise) and remembers the failed ones.
template <class Reporter>
class CanonicalNames : public Reporter {
 public:
  using Reporter::Reporter;
  void ReportRuns(const std::vector<benchmark::BenchmarkReporter::Run>& runs) override {
    std::vector<benchmark::BenchmarkReporter::Run> renamed(runs);
    for (auto& run : renamed) {
      canonicalise(run.run_name);
      if (run.error_occurred) failures.push_back(run.benchmark_name() + ": " + run.error_message);
      if (progress_total > 0 && run.run_type == benchmark::BenchmarkReporter::Run::RT_Iteration)
        finished.insert(run.run_name.str());
    }
    for (const auto& run : renamed) {
      // A call's time for the summary against the floors: the median of the
      // repetitions, or the one run; the compute time the implementation
      // reported when it did (its wall time includes the isolation).
      const bool single = run.run_type == benchmark::BenchmarkReporter::Run::RT_Iteration && run.repetitions <= 1;
      if (run.error_occurred || !(single || run.aggregate_name == "median")) continue;
      const auto compute = run.counters.find("compute_seconds");
      seconds[run.run_name.str()] = compute != run.counters.end()
                                        ? compute->second.value
                                        : run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
      const auto over_roofline = run.counters.find("over_roofline");
      if (over_roofline != run.counters.end())
        paired[run.run_name.str()] = {run.counters.at("over_read_floor").value,
                                      run.counters.at("over_fma_floor").value, over_roofline->second.value,
                                      run.counters.at("read_floor_seconds").value,
                                      run.counters.at("fma_floor_seconds").value};
    }
    Reporter::ReportRuns(renamed);
    if (progress_total > 0 && !renamed.empty() &&
        renamed.front().run_type == benchmark::BenchmarkReporter::Run::RT_Iteration) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (on_progress) on_progress(finished.size(), progress_total, renamed.front().run_name.str());
      else fmt::print(stderr, "  [{}/{} benchmarks, {:.0f} s elapsed]\n", finished.size(), progress_total, elapsed);
    }
  }
  std::vector<std::string> failures;
  std::map<std::string, double> seconds;  ///< a call's time by benchmark name (floor_summary)
  std::map<std::string, PairedFloors> paired;  ///< ratios to the paired floors by name (paired_floor_summary)
  size_t progress_total = 0;  ///< benchmarks to run; 0: no progress lines
  std::function<void(size_t, size_t, const std::string&)> on_progress;  ///< BenchOptions::on_progress
  std::set<std::string> finished;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

// The part of a benchmark name after n: "d:<d>/mask:<m>/threads:<t>".
std::string family_suffix(int64_t d, const std::string& mask, int64_t threads) {
  return fmt::format("d:{}/mask:{}/threads:{}", d, mask, threads);
}

// The machine's limits measured before the benchmarks run.
struct Limits {
  double peak_gflops = 0.0;     ///< FMA peak of one core
  double peak_all = 0.0;        ///< FMA peak of all_threads threads together, GFLOP/s
  double bandwidth_1 = 0.0;     ///< read bandwidth, GB/s, 1 thread
  double bandwidth_all = 0.0;   ///< read bandwidth, GB/s, all_threads threads
  int all_threads = 1;          ///< the threads of the all-threads probes: one per CPU
  /// The CPU of the 1-thread benchmarks and probes (-1: not placed).
  int cpu = -1;
  /// The 1-thread read bandwidth on each CPU the process may use (probe_cpus,
  /// before the benchmarks only).
  std::vector<std::pair<int, double>> bandwidth_by_cpu;
  /// The read bandwidth a call on `threads` threads can reach: the 1-thread
  /// figure for 1, the all-threads figure for more (the machine's roof).
  double bandwidth(int64_t threads) const { return threads <= 1 ? bandwidth_1 : bandwidth_all; }
  /// The FMA peak a call on `threads` threads can reach, GFLOP/s: one core's
  /// for 1, the all-threads probe's for as many threads as CPUs or more (the
  /// CPUs together, which on the development VM did 0.92-0.96 of the two
  /// CPUs' 1-thread figures summed, and no more however many threads share
  /// them), its share in between.
  double peak(int64_t threads) const {
    if (threads <= 1) return peak_gflops;
    if (threads >= all_threads) return peak_all;
    return peak_all * static_cast<double>(threads) / all_threads;
  }
};

// Most CPUs whose 1-thread read bandwidth is probed one by one (about 0.1 s each).
constexpr size_t kMaxProbedCpus = 64;

// The 1-thread read bandwidth on each CPU the process may use, printed: the
// CPUs of a virtual machine can differ by far more than one CPU's runs vary
// (1.2-1.5x between the two of the development VM, whichever was slower
// changing within the hour; docs/performance-decode.md). Empty with one CPU,
// or more than kMaxProbedCpus.
std::vector<std::pair<int, double>> probe_cpus() {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2 || cpus.size() > kMaxProbedCpus) return {};
  const std::vector<double> each = measure_read_bandwidth_by_cpu(cpus);
  std::vector<std::pair<int, double>> result;
  std::vector<std::string> parts;
  for (size_t i = 0; i < cpus.size(); ++i) {
    result.emplace_back(cpus[i], each[i]);
    parts.push_back(fmt::format("CPU {} {:.1f}", cpus[i], each[i]));
  }
  fmt::print("1-thread read bandwidth by CPU, GB/s: {}\n", fmt::join(parts, ", "));
  return result;
}

// The CPU of the 1-thread runs and probes: the one asked for, else the one
// that read fastest (the least disturbed), else the first the process may use.
int one_thread_cpu(const BenchOptions& options, const std::vector<std::pair<int, double>>& by_cpu) {
  if (options.cpu >= 0) return options.cpu;
  if (!by_cpu.empty())
    return std::max_element(by_cpu.begin(), by_cpu.end(), [](const auto& a, const auto& b) {
             return a.second < b.second;
           })->first;
  const std::vector<int> cpus = allowed_cpus();
  return cpus.empty() ? -1 : cpus.front();
}

// The probes, printed. A busy machine lowers them, so they run before and
// after the benchmarks and the JSON keeps the higher of each (the stricter roof).
// The 1-thread probes run on `cpu`, the CPU of the 1-thread benchmarks.
Limits measure_limits(const char* when, int cpu) {
  Limits limits;
  limits.cpu = cpu;
  limits.peak_gflops = measure_peak_fma_gflops(1, cpu);
  limits.all_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  limits.peak_all =
      limits.all_threads == 1 ? limits.peak_gflops : measure_peak_fma_gflops(limits.all_threads);
  const std::vector<double> bandwidth = measure_read_bandwidth_gbps(
      limits.all_threads == 1 ? std::vector<int>{1} : std::vector<int>{1, limits.all_threads}, cpu);
  limits.bandwidth_1 = bandwidth[0];
  limits.bandwidth_all = limits.all_threads == 1 ? bandwidth[0] : bandwidth[1];
  const std::string placed = cpu >= 0 ? fmt::format(" on CPU {}", cpu) : "";
  fmt::print("{}: peak fp32 FMA throughput {:.1f} GFLOP/s per core ({}, best of 32 runs{}), {:.1f} on {} "
             "together; read bandwidth {:.1f} GB/s on 1 thread{}, {:.1f} GB/s on {} ({} MiB streamed, best of 5 "
             "runs)\n",
             when, limits.peak_gflops, peak_probe_target(), placed, limits.peak_all, limits.all_threads,
             limits.bandwidth_1, placed, limits.bandwidth_all, limits.all_threads,
             read_bandwidth_buffer_bytes() >> 20);
  std::fflush(stdout);
  return limits;
}

// Rewrites the bench JSON with the higher of the probes taken before and
// after the runs: the context's roofs (both probes are kept beside them) and
// every fraction computed against them. The console's fractions used the
// probes taken before.
void raise_roofs_in_json(const std::string& path, const Limits& before, const Limits& after) {
  nlohmann::json doc;
  {
    std::ifstream in(path);
    doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }
  if (doc.is_discarded() || !doc.contains("context")) return;  // Google Benchmark wrote nothing usable
  Limits best = before;
  best.peak_gflops = std::max(before.peak_gflops, after.peak_gflops);
  best.peak_all = std::max(before.peak_all, after.peak_all);
  best.bandwidth_1 = std::max(before.bandwidth_1, after.bandwidth_1);
  best.bandwidth_all = std::max(before.bandwidth_all, after.bandwidth_all);
  auto& context = doc["context"];
  const auto figure = [](double x) { return fmt::format("{:.2f}", x); };
  context["peak_fma_gflops"] = figure(best.peak_gflops);
  context["peak_fma_gflops_all_threads"] = figure(best.peak_all);
  context["read_bandwidth_gbps_1_thread"] = figure(best.bandwidth_1);
  context["read_bandwidth_gbps_all_threads"] = figure(best.bandwidth_all);
  context["limits_probed"] = "before and after the benchmarks; the higher of each is the roof";
  context["peak_fma_gflops_before"] = figure(before.peak_gflops);
  context["peak_fma_gflops_after"] = figure(after.peak_gflops);
  context["peak_fma_gflops_all_threads_before"] = figure(before.peak_all);
  context["peak_fma_gflops_all_threads_after"] = figure(after.peak_all);
  context["read_bandwidth_gbps_1_thread_before"] = figure(before.bandwidth_1);
  context["read_bandwidth_gbps_1_thread_after"] = figure(after.bandwidth_1);
  context["read_bandwidth_gbps_all_threads_before"] = figure(before.bandwidth_all);
  context["read_bandwidth_gbps_all_threads_after"] = figure(after.bandwidth_all);
  // The threads each run used, from its iterations (an aggregate's own
  // threads_used is a mean or a spread of them).
  std::map<std::string, double> used;
  for (const auto& b : doc["benchmarks"])
    if (b.value("run_type", "") == "iteration" && b.contains("threads_used"))
      used[b.value("run_name", "")] = b["threads_used"].get<double>();
  for (auto& b : doc["benchmarks"]) {
    const auto threads = used.find(b.value("run_name", ""));
    if (threads == used.end() || b.value("aggregate_name", "") == "cv") continue;  // cv is a ratio: unchanged
    if (b.contains("peak_fraction"))
      b["peak_fraction"] = b["peak_fraction"].get<double>() * before.peak(static_cast<int64_t>(threads->second)) /
                           best.peak(static_cast<int64_t>(threads->second));
    if (b.contains("bandwidth_fraction"))
      b["bandwidth_fraction"] = b["bandwidth_fraction"].get<double>() * before.bandwidth(static_cast<int64_t>(threads->second)) /
                                best.bandwidth(static_cast<int64_t>(threads->second));
  }
  std::ofstream(path) << doc.dump(2) << '\n';
}

void add_context(const BenchOptions& options, const Limits& limits) {
  const double peak_gflops = limits.peak_gflops;
  benchmark::AddCustomContext("read_bandwidth_gbps_1_thread", fmt::format("{:.2f}", limits.bandwidth_1));
  benchmark::AddCustomContext("read_bandwidth_gbps_all_threads", fmt::format("{:.2f}", limits.bandwidth_all));
  benchmark::AddCustomContext("read_bandwidth_threads", std::to_string(limits.all_threads));
  benchmark::AddCustomContext("read_bandwidth_buffer_bytes", std::to_string(read_bandwidth_buffer_bytes()));
  if (limits.cpu >= 0) benchmark::AddCustomContext("one_thread_cpu", std::to_string(limits.cpu));
  if (!limits.bandwidth_by_cpu.empty()) {
    std::vector<std::string> parts;
    for (const auto& [cpu, gbps] : limits.bandwidth_by_cpu) parts.push_back(fmt::format("{}:{:.2f}", cpu, gbps));
    benchmark::AddCustomContext("read_bandwidth_gbps_1_thread_by_cpu", fmt::format("{}", fmt::join(parts, ",")));
  }
  // The decode path fetches ahead into L2 with an L1 below 48 KiB (impl/src/kernel_args.h).
  benchmark::AddCustomContext("l1_data_cache_bytes", std::to_string(std::max(0L, ::sysconf(_SC_LEVEL1_DCACHE_SIZE))));
  benchmark::AddCustomContext("batch", std::to_string(options.batch));
  benchmark::AddCustomContext("heads", std::to_string(options.heads));
  benchmark::AddCustomContext("tensor_offset_bytes", std::to_string(options.tensor_offset));
  benchmark::AddCustomContext("peak_fma_gflops", fmt::format("{:.2f}", peak_gflops));
  benchmark::AddCustomContext("peak_fma_gflops_all_threads", fmt::format("{:.2f}", limits.peak_all));
  benchmark::AddCustomContext("peak_fma_threads", std::to_string(limits.all_threads));
  benchmark::AddCustomContext("peak_probe_target", peak_probe_target());
  benchmark::AddCustomContext("simd_target", active_target());
  benchmark::AddCustomContext("compiler", ATTNCHECK_COMPILER);
  benchmark::AddCustomContext("cxx_flags", ATTNCHECK_CXX_FLAGS);
  benchmark::AddCustomContext("build_type", ATTNCHECK_BUILD_TYPE);
  benchmark::AddCustomContext("cpu_model", cpu_model());
  benchmark::AddCustomContext("attncheck_version", ATTNCHECK_VERSION);
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
}

// n_q = 0: a square family over n = n_q = n_k; otherwise a cross family of
// that n_q over n_k.
void register_family(const BenchImplementation& impl, const BenchOptions& options, int64_t n_q,
                     const std::vector<int64_t>& sizes, int64_t d, const std::string& mask,
                     int64_t threads, const Limits& limits) {
  // Named "<impl>/d:<d>/mask:<m>/threads:<t>" with the argument n, or
  // "<impl>/n_q:<n_q>/d:..." with the argument n_k; canonicalise() turns each
  // instance's name into bench_name().
  const std::string family = n_q == 0 ? impl.name + "/" + family_suffix(d, mask, threads)
                                      : fmt::format("{}/n_q:{}/{}", impl.name, n_q, family_suffix(d, mask, threads));
  auto* bench = benchmark::RegisterBenchmark(
      family.c_str(), [impl, options, n_q, d, mask, threads, limits](benchmark::State& state) {
        // A 1-thread call runs on this thread alone: on the CPU of the
        // 1-thread probes. exec: children serve every thread count and stay
        // where they started, so they are not placed.
        const bool placed = threads == 1 && impl.name.rfind("exec:", 0) != 0;
        std::optional<OnCpu> on_cpu;
        try {
          on_cpu.emplace(placed ? limits.cpu : -1);
        } catch (const std::system_error& e) {  // the CPU went away since the probes ran
          state.SkipWithError(e.what());
          return;
        }
        const int64_t n = state.range(0);
        const Problem problem = n_q == 0 ? bench_problem(options, n, d, mask)
                                         : bench_problem(options, n_q, n, d, mask);
        const Shape& s = problem.shape;
        std::mt19937 rng(20240601);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        auto tensor = [&](int64_t size) {
          BenchTensor t(size, options.tensor_offset);
          std::generate(t.data(), t.data() + size, [&] { return normal(rng); });
          return t;
        };
        const BenchTensor q_tensor = tensor(s.q_size()), k_tensor = tensor(s.k_size()), v_tensor = tensor(s.v_size());
        BenchTensor out_tensor(s.out_size(), options.tensor_offset);
        const float *q = q_tensor.data(), *k = k_tensor.data(), *v = v_tensor.data();
        float* out = out_tensor.data();
        // One untimed call first: it warms caches and scratch memory, and a
        // failure (bad input, out of memory) is reported before the timing
        // loop starts; Google Benchmark crashes if an exception leaves the loop.
        try {
          impl.run(problem, q, k, v, out, static_cast<int>(threads));
        } catch (const std::bad_alloc&) {
          state.SkipWithError("out of memory");
          return;
        } catch (const std::exception& e) {
          state.SkipWithError(e.what());
          return;
        }
        // With paired floors: the implementation's wall time and each floor's, summed over the calls;
        // the floors too are called once untimed first.
        const bool paired = options.paired_floors && !is_floor(impl.name);
        if (paired) {
          try {
            read_floor(problem, q, k, v, out, static_cast<int>(threads));
            fma_floor(problem, q, k, v, out, static_cast<int>(threads));
          } catch (const std::exception& e) {
            state.SkipWithError(("paired floors: " + std::string(e.what())).c_str());
            return;
          }
        }
        // The compute time the implementation reports for each call, if it reports one for every call.
        double compute_total = 0.0;
        int64_t compute_calls = 0;
        double wall_total = 0.0, read_total = 0.0, fma_total = 0.0;
        using Clock = std::chrono::steady_clock;
        const auto since = [](Clock::time_point start) {
          return std::chrono::duration<double>(Clock::now() - start).count();
        };
        for (auto _ : state) {
          const auto start = Clock::now();
          const auto compute = impl.run(problem, q, k, v, out, static_cast<int>(threads));
          if (compute) {
            compute_total += *compute;
            ++compute_calls;
          }
          benchmark::DoNotOptimize(out);
          benchmark::ClobberMemory();
          if (!paired) continue;
          const double wall = since(start);
          wall_total += wall;
          state.SetIterationTime(wall);
          const auto read_start = Clock::now();
          read_floor(problem, q, k, v, out, static_cast<int>(threads));
          read_total += since(read_start);
          const auto fma_start = Clock::now();
          fma_floor(problem, q, k, v, out, static_cast<int>(threads));
          fma_total += since(fma_start);
          benchmark::ClobberMemory();
        }
        const bool all_computed =
            compute_calls > 0 && compute_calls == static_cast<int64_t>(state.iterations()) && compute_total > 0;
        state.SetComplexityN(n);
        const double flops = useful_flops(problem);
        const int64_t used = threads_used(impl.name, problem, threads);
        const double peak = limits.peak(used) * 1e9;
        const double bytes = moved_bytes(problem);
        using benchmark::Counter;
        if (impl.name != "read-floor") {  // it computes no attention: bytes only
          state.counters["flops"] = Counter(flops, Counter::kIsIterationInvariantRate);
          state.counters["gflops"] = Counter(flops * 1e-9, Counter::kIsIterationInvariantRate);
          state.counters["peak_fraction"] = Counter(flops / peak, Counter::kIsIterationInvariantRate);
        }
        state.counters["threads_used"] = static_cast<double>(used);  // the threads the roofs are scaled to
        // Where a placed run ran ("CPU 0"); none where the calling thread was free to move.
        if (const int cpu = confined_cpu(); cpu >= 0) state.SetLabel(fmt::format("CPU {}", cpu));
        // Bytes moved per second (K and V read once, Q read, O written) and
        // the fraction of the read bandwidth measured with as many threads.
        if (impl.name != "fma-floor") {  // it reads nothing: flops only
          state.counters["bytes"] = Counter(bytes, Counter::kIsIterationInvariantRate);
          state.counters["gbytes_per_s"] = Counter(bytes * 1e-9, Counter::kIsIterationInvariantRate);
          if (limits.bandwidth(used) > 0)
            state.counters["bandwidth_fraction"] =
                Counter(bytes / (limits.bandwidth(used) * 1e9), Counter::kIsIterationInvariantRate);
        }
        // The implementation's own compute time per call, and the rates it
        // gives, beside the wall-time ones (which include the isolation).
        if (all_computed) {
          const double compute = compute_total / static_cast<double>(compute_calls);
          state.counters["compute_seconds"] = compute;
          state.counters["compute_gflops"] = flops * 1e-9 / compute;
          state.counters["compute_gbytes_per_s"] = bytes * 1e-9 / compute;
        }
        // The floors timed beside it, and its own time (the compute time it
        // reported, else its wall time) over theirs.
        if (paired && read_total > 0 && fma_total > 0) {
          const double own = all_computed ? compute_total : wall_total;
          const auto calls = static_cast<double>(state.iterations());
          state.counters["read_floor_seconds"] = read_total / calls;
          state.counters["fma_floor_seconds"] = fma_total / calls;
          state.counters["over_read_floor"] = own / read_total;
          state.counters["over_fma_floor"] = own / fma_total;
          state.counters["over_roofline"] = own / std::max(read_total, fma_total);
        }
      });
  bench->ArgName(n_q == 0 ? "n" : "n_k")->Unit(benchmark::kMillisecond)
      ->Complexity(n_q == 0 ? benchmark::oNSquared : benchmark::oN);
  // Paired floors run between the implementation's calls: its time is the one taken around each call.
  if (options.paired_floors && !is_floor(impl.name)) bench->UseManualTime();
  else bench->UseRealTime();
  for (int64_t n : sizes) bench->Arg(n);
}

}  // namespace

BenchImplementation find_bench_implementation(const std::string& name) {
  using Peer = void (*)(const Problem&, const float*, const float*, const float*, float*, int);
  const auto direct = [](Peer peer) -> BenchFunction {
    return [peer](const Problem& p, const float* q, const float* k, const float* v, float* out, int threads) {
      peer(p, q, k, v, out, threads);
      return std::optional<double>();
    };
  };
  if (name == "fused") {
    return {name, direct([](const Problem& p, const float* q, const float* k, const float* v, float* out,
                            int threads) {
              AttentionOptions options;
              options.threads = threads;
              attention(p, q, k, v, out, options);
            })};
  }
  if (name == "naive-eigen") return {name, direct(naive_eigen_attention)};
  if (name == "naive-openblas") return {name, direct(naive_openblas_attention)};
  if (name == "read-floor") return {name, direct(read_floor)};
  if (name == "fma-floor") return {name, direct(fma_floor)};
  if (name == "reference-double") {
    return {name,
            direct([](const Problem& p, const float* q, const float* k, const float* v, float* out, int) {
              reference_double_attention(p, q, k, v, out);
            }),
            512};
  }
  // Everything else through the registry: plugin:PATH, exec:SPEC and the
  // like. Their wall time includes the isolation (a fork per plugin call, a
  // pipe round trip for exec:); the compute time they report, if any, does not.
  std::shared_ptr<Implementation> impl;
  try {
    impl = make_implementation(name);
  } catch (const InvalidInput&) {
    for (const char* prefix : {"plugin:", "exec:", "fused:"})
      if (name.rfind(prefix, 0) == 0) throw;  // its own error names the problem
    fail(fmt::format("option --impl: unknown implementation '{}'; known: {}, fused:METHOD, plugin:PATH, exec:COMMAND",
                     name, fmt::join(bench_implementation_names(), ", ")));
  }
  return {name, [impl](const Problem& p, const float* q, const float* k, const float* v, float* out,
                       int threads) {
            const Shape& s = p.shape;
            const auto size = [](int64_t n) { return static_cast<size_t>(n); };
            impl->forward(p, {q, size(s.q_size())}, {k, size(s.k_size())}, {v, size(s.v_size())},
                          {out, size(s.out_size())}, {}, threads);
            return impl->last_compute_seconds();
          }};
}

namespace {

// "<impl>/<shape>" split into the two: the shape from the right, since an
// implementation name may hold slashes. Empty without a shape.
std::pair<std::string, std::string> split_benchmark_name(const std::string& name) {
  size_t at = std::string::npos;
  for (const char* start : {"/n:", "/n_q:"}) {
    const size_t found = name.rfind(start);
    if (found != std::string::npos && (at == std::string::npos || found > at)) at = found;
  }
  if (at == std::string::npos) return {};
  return {name.substr(0, at), name.substr(at + 1)};
}

// The thread count a benchmark name ends with ("/threads:<t>"), and the name without it; 0 when absent.
std::pair<std::string, int> split_threads(const std::string& name) {
  const size_t at = name.rfind("/threads:");
  if (at == std::string::npos) return {name, 0};
  try {
    return {name.substr(0, at), std::stoi(name.substr(at + 9))};
  } catch (const std::exception&) {
    return {name, 0};
  }
}

}  // namespace

std::vector<std::string> thread_scaling_summary(const std::map<std::string, double>& seconds,
                                                const std::map<std::string, PairedFloors>& paired) {
  std::map<std::string, double> one;  // 1-thread time by name without its thread count
  for (const auto& [name, time] : seconds)
    if (const auto [base, threads] = split_threads(name); threads == 1) one[base] = time;
  // A benchmark's time on 1 thread and on `threads`, when both ran.
  const auto times = [&](const std::string& impl, const std::string& shape,
                         int threads) -> std::optional<std::pair<double, double>> {
    const auto many = seconds.find(fmt::format("{}/{}/threads:{}", impl, shape, threads));
    const auto single = one.find(impl + "/" + shape);
    if (many == seconds.end() || single == one.end() || many->second <= 0) return std::nullopt;
    return std::pair{single->second, many->second};
  };
  std::vector<std::string> lines;
  for (const auto& [name, time] : seconds) {
    const auto [base, threads] = split_threads(name);
    const auto [impl, shape] = split_benchmark_name(base);
    if (threads <= 1 || impl.empty() || is_floor(impl)) continue;
    const auto own = times(impl, shape, threads);
    if (!own) continue;
    const double speedup = own->first / own->second;
    std::string line = fmt::format("{}: {:.2f}x the 1-thread speed", name, speedup);
    double slower_one = 0, slower_many = 0;
    // The floors paired with this implementation's own runs at both counts, else the floors' rows.
    const auto one_paired = paired.find(fmt::format("{}/{}/threads:1", impl, shape));
    const auto many_paired = paired.find(name);
    const bool own_floors = one_paired != paired.end() && many_paired != paired.end();
    for (const char* floor : {"read-floor", "fma-floor"}) {
      const bool read = std::string(floor) == "read-floor";
      const auto f = own_floors ? std::optional(std::pair{
                                      read ? one_paired->second.read_seconds : one_paired->second.fma_seconds,
                                      read ? many_paired->second.read_seconds : many_paired->second.fma_seconds})
                                : times(floor, shape, threads);
      if (!f || f->second <= 0) continue;
      line += fmt::format(", {} {:.2f}x", floor, f->first / f->second);
      slower_one = std::max(slower_one, f->first);
      slower_many = std::max(slower_many, f->second);
    }
    if (slower_many > 0) line += fmt::format("; over the roofline's {:.2f}", speedup / (slower_one / slower_many));
    lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> floor_summary(const std::map<std::string, double>& seconds) {
  std::map<std::string, double> read, fma;  // floor time by shape
  for (const auto& [name, time] : seconds) {
    const auto [impl, shape] = split_benchmark_name(name);
    if (impl == "read-floor") read[shape] = time;
    if (impl == "fma-floor") fma[shape] = time;
  }
  std::vector<std::string> lines;
  for (const auto& [name, time] : seconds) {
    const auto [impl, shape] = split_benchmark_name(name);
    if (impl.empty() || is_floor(impl)) continue;
    const auto r = read.find(shape);
    const auto f = fma.find(shape);
    if (r == read.end() && f == fma.end()) continue;
    std::string line = name + ":";
    if (r != read.end()) line += fmt::format(" × read floor {:.2f}", time / r->second);
    if (f != fma.end()) line += fmt::format(" × FMA floor {:.2f}", time / f->second);
    if (r != read.end() && f != fma.end())
      line += fmt::format(" × slower floor {:.2f}", time / std::max(r->second, f->second));
    lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> paired_floor_summary(const std::map<std::string, PairedFloors>& ratios) {
  std::vector<std::string> lines;
  for (const auto& [name, r] : ratios)
    lines.push_back(fmt::format("{}: × read floor {:.2f} × FMA floor {:.2f} × slower floor {:.2f}", name,
                                r.over_read, r.over_fma, r.over_roofline));
  return lines;
}

std::vector<std::string> bench_implementation_names() {
  return {"fused", "naive-eigen", "naive-openblas", "reference-double", "read-floor", "fma-floor"};
}

double moved_bytes(const Problem& p) {
  const Shape& s = p.shape;
  double keys = 0.0;  // K and V rows read, over batch elements (then times heads)
  for (int64_t b = 0; b < s.batch; ++b) {
    int64_t last = 0;
    for (int64_t i = 0; i < s.n_q; ++i) last = std::max(last, key_limit(p, b, i));
    keys += static_cast<double>(last);
  }
  const auto heads = static_cast<double>(s.heads);
  return 4.0 * (static_cast<double>(s.q_size() + s.out_size()) +
                keys * heads * static_cast<double>(s.d_k + s.d_v));
}

double useful_flops(const Problem& p) {
  const Shape& s = p.shape;
  double pairs = 0.0;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.n_q; ++i) {
        const int64_t limit = key_limit(p, b, i);
        if (!p.mask) {
          pairs += static_cast<double>(limit);
          continue;
        }
        for (int64_t j = 0; j < limit; ++j) pairs += allowed(p, b, h, i, j) ? 1.0 : 0.0;
      }
    }
  }
  return pairs * 2.0 * static_cast<double>(s.d_k + s.d_v);
}

std::vector<int64_t> parse_positive_list(const std::string& text, const std::string& option) {
  std::vector<int64_t> values;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const bool digits = !item.empty() && item.size() <= 12 &&
                        std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoll(item) <= 0)
      fail(fmt::format("option {}: '{}' is not a comma-separated list of positive integers "
                       "(bad entry '{}')",
                       option, text, item));
    values.push_back(std::stoll(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return values;
}

void check_bench_options(const BenchOptions& o) {
  if (o.impls.empty()) fail("option --impl: no implementation given");
  for (const auto& name : o.impls) find_bench_implementation(name);
  if (o.n_q.empty() != o.n_k.empty())
    fail(fmt::format("option {}: cross shapes need both --n-q and --n-k", o.n_q.empty() ? "--n-k" : "--n-q"));
  if (o.n.empty() && o.n_q.empty()) fail("option --n: the list is empty (and no --n-q/--n-k)");
  const std::pair<const char*, const std::vector<int64_t>*> lists[] = {
      {"--n", &o.n}, {"--n-q", &o.n_q}, {"--n-k", &o.n_k}, {"--d", &o.d}, {"--threads", &o.threads}};
  for (const auto& [option, list] : lists) {
    const bool may_be_empty = list == &o.n || list == &o.n_q || list == &o.n_k;
    if (list->empty() && !may_be_empty) fail(fmt::format("option {}: the list is empty", option));
    for (int64_t x : *list)
      if (x <= 0) fail(fmt::format("option {}: {} is not a positive integer", option, x));
  }
  for (int64_t t : o.threads)
    if (t > 1024) fail(fmt::format("option --threads: {} is more than 1024", t));
  if (o.masks.empty()) fail("option --mask: no mask given");
  for (const auto& m : o.masks)
    if (m != "none" && m != "causal")
      fail(fmt::format("option --mask: '{}' is not one of none, causal", m));
  if (o.batch <= 0) fail(fmt::format("option --batch: {} is not a positive integer", o.batch));
  if (o.heads <= 0) fail(fmt::format("option --heads: {} is not a positive integer", o.heads));
  if (o.repetitions <= 0)
    fail(fmt::format("option --repetitions: {} is not a positive integer", o.repetitions));
  if (o.tensor_offset < 0 || o.tensor_offset >= 64 || o.tensor_offset % 4 != 0)
    fail(fmt::format("option --tensor-offset: {} is not a multiple of 4 from 0 to 60 (bytes past a 64-byte boundary)",
                     o.tensor_offset));
  if (o.cpu != -1) {
    const std::vector<int> cpus = allowed_cpus();
    if (cpus.empty()) fail("option --cpu: this system does not say which CPUs the process may run on");
    if (std::find(cpus.begin(), cpus.end(), o.cpu) == cpus.end())
      fail(fmt::format("option --cpu: {} is not a CPU this process may run on ({})", o.cpu, cpu_list(cpus)));
  }
  if (!(std::isfinite(o.min_time) && o.min_time > 0))
    fail(fmt::format("option --min-time: {} is not a positive number of seconds", o.min_time));
  for (int64_t d : o.d) {
    for (int64_t n : o.n) validate_problem(bench_problem(o, n, d, "none"));
    for (int64_t nq : o.n_q)
      for (int64_t nk : o.n_k) validate_problem(bench_problem(o, nq, nk, d, "none"));
  }

  if (!o.json_path.empty()) {
    namespace fs = std::filesystem;
    const fs::path path(o.json_path);
    std::error_code ec;
    if (fs::is_directory(path, ec))
      fail(fmt::format("option --json: '{}' is a directory", o.json_path));
    const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
    if (!fs::is_directory(dir, ec))
      fail(fmt::format("option --json: directory '{}' does not exist", dir.string()));
    if (::access(dir.c_str(), W_OK) != 0)
      fail(fmt::format("option --json: directory '{}' is not writable", dir.string()));
    if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0)
      fail(fmt::format("option --json: '{}' is not writable", o.json_path));
  }
}

BenchTensor::BenchTensor(int64_t size, int64_t offset_bytes)
    : raw_(std::make_unique<float[]>(static_cast<size_t>(size) + (64 + static_cast<size_t>(offset_bytes)) / sizeof(float))) {
  const auto address = reinterpret_cast<uintptr_t>(raw_.get());
  const size_t to_boundary = (64 - address % 64) % 64;  // new float[] is aligned to at least 4 bytes
  data_ = raw_.get() + (to_boundary + static_cast<size_t>(offset_bytes)) / sizeof(float);
}

std::string bench_name(const std::string& impl, int64_t n, int64_t d, const std::string& mask,
                       int64_t threads) {
  return fmt::format("{}/n:{}/{}", impl, n, family_suffix(d, mask, threads));
}

std::string bench_name(const std::string& impl, int64_t n_q, int64_t n_k, int64_t d,
                       const std::string& mask, int64_t threads) {
  return fmt::format("{}/n_q:{}/n_k:{}/{}", impl, n_q, n_k, family_suffix(d, mask, threads));
}

Problem bench_problem(const BenchOptions& options, int64_t n_q, int64_t n_k, int64_t d,
                      const std::string& mask) {
  Problem p;
  p.shape = {options.batch, options.heads, n_q, n_k, d, d};
  p.causal = mask == "causal" ? Causal::bottom_right : Causal::none;
  return p;
}

Problem bench_problem(const BenchOptions& options, int64_t n, int64_t d, const std::string& mask) {
  Problem p;
  p.shape = {options.batch, options.heads, n, n, d, d};
  p.causal = mask == "causal" ? Causal::top_left : Causal::none;
  return p;
}

size_t run_benchmarks(const BenchOptions& options) {
  check_bench_options(options);
  std::vector<BenchImplementation> impls;
  for (const auto& name : options.impls) impls.push_back(find_bench_implementation(name));

  const std::vector<std::pair<int, double>> by_cpu = probe_cpus();
  const int cpu = one_thread_cpu(options, by_cpu);
  if (cpu >= 0)
    fmt::print("every 1-thread benchmark and probe runs on CPU {}{}\n", cpu,
               options.cpu >= 0 ? " (--cpu)" : by_cpu.empty() ? "" : " (the fastest to read)");
  Limits limits = measure_limits("before the benchmarks", cpu);
  limits.bandwidth_by_cpu = by_cpu;

  benchmark::ClearRegisteredBenchmarks();
  size_t total = 0;
  const size_t configs = options.d.size() * options.masks.size() * options.threads.size();
  for (const auto& impl : impls) {
    const auto fits = [&](int64_t n) { return impl.max_n == 0 || n <= impl.max_n; };
    std::vector<int64_t> sizes, skipped;
    for (int64_t n : options.n) (fits(n) ? sizes : skipped).push_back(n);
    if (!skipped.empty())
      fmt::print(stderr, "note: {} skipped for n = {} (it runs only n <= {})\n", impl.name,
                 fmt::join(skipped, ", "), impl.max_n);
    if (!sizes.empty()) {
      for (int64_t d : options.d)
        for (const auto& mask : options.masks)
          for (int64_t threads : options.threads)
            register_family(impl, options, 0, sizes, d, mask, threads, limits);
      total += sizes.size() * configs;
    }
    for (int64_t n_q : options.n_q) {
      std::vector<int64_t> keys, skipped_keys;
      for (int64_t n_k : options.n_k) (fits(n_q) && fits(n_k) ? keys : skipped_keys).push_back(n_k);
      if (!skipped_keys.empty())
        fmt::print(stderr, "note: {} skipped for n_q = {}, n_k = {} (it runs only n <= {})\n", impl.name,
                   n_q, fmt::join(skipped_keys, ", "), impl.max_n);
      if (keys.empty()) continue;
      for (int64_t d : options.d)
        for (const auto& mask : options.masks)
          for (int64_t threads : options.threads)
            register_family(impl, options, n_q, keys, d, mask, threads, limits);
      total += keys.size() * configs;
    }
  }

  std::vector<std::string> args = {
      "attncheck bench",
      fmt::format("--benchmark_repetitions={}", options.repetitions),
      fmt::format("--benchmark_min_time={}", options.min_time),
      "--benchmark_display_aggregates_only=true",
      "--benchmark_counters_tabular=true",
  };
  if (options.interleave) args.push_back("--benchmark_enable_random_interleaving=true");
  if (!options.json_path.empty()) {
    args.push_back("--benchmark_out=" + options.json_path);
    args.push_back("--benchmark_out_format=json");
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  benchmark::Initialize(&argc, argv.data());
  add_context(options, limits);

  CanonicalNames<benchmark::ConsoleReporter> console(benchmark::ConsoleReporter::OO_Tabular);
  CanonicalNames<benchmark::JSONReporter> json;
  if (options.progress || options.on_progress) console.progress_total = total;
  console.on_progress = options.on_progress;
  const size_t count = options.json_path.empty()
                           ? benchmark::RunSpecifiedBenchmarks(&console)
                           : benchmark::RunSpecifiedBenchmarks(&console, &json);
  benchmark::ClearRegisteredBenchmarks();
  if (!options.json_path.empty()) raise_roofs_in_json(options.json_path, limits, measure_limits("after the benchmarks", cpu));
  const std::vector<std::string> summary = floor_summary(console.seconds);
  if (!summary.empty()) {
    fmt::print("against the floors timed in this run (time per call over the floor's; the slower floor is the "
               "shape's roofline):\n");
    for (const std::string& line : summary) fmt::print("  {}\n", line);
  }
  const std::vector<std::string> paired = paired_floor_summary(console.paired);
  if (!paired.empty()) {
    fmt::print("against the floors timed call by call beside each implementation (--paired-floors; its time over "
               "the floor's, the median over repetitions):\n");
    for (const std::string& line : paired) fmt::print("  {}\n", line);
  }
  const std::vector<std::string> scaling = thread_scaling_summary(console.seconds, console.paired);
  if (!scaling.empty()) {
    fmt::print("thread scaling (time on 1 thread over time on more, beside the floors' own; the roofline's is the "
               "slower floor's):\n");
    for (const std::string& line : scaling) fmt::print("  {}\n", line);
  }
  if (!console.failures.empty())
    throw std::runtime_error(fmt::format("{} benchmark(s) failed: {}", console.failures.size(),
                                         fmt::join(console.failures, "; ")));
  return count;
}

}  // namespace attncheck
