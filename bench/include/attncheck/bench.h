// The benchmark suite behind `attncheck bench`: implementations by name,
// useful-FLOP counting, and the Google Benchmark run with its JSON context.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/problem.h"

namespace attncheck {

/// An implementation as the benchmarks call it: the contract of attention()
/// (q, k, v, out laid out as in problem.h; validates and throws InvalidInput),
/// plus a thread count. Returns the compute time the implementation reported
/// for the call (plugins and exec children may: their wall time includes
/// copies, a pipe or a process), or nothing.
using BenchFunction = std::function<std::optional<double>(const Problem& problem, const float* q, const float* k,
                                                          const float* v, float* out, int threads)>;

struct BenchImplementation {
  std::string name;
  BenchFunction run;
  int64_t max_n = 0;  ///< largest n benchmarked (0: no limit)
};

/// Maps an --impl name to its implementation: the one place where names are
/// resolved. fused and the peers are called directly; any other name the
/// implementation registry knows (plugin:PATH, exec:SPEC, ...) goes through
/// Implementation::forward(), with its last_compute_seconds() as the
/// reported compute time. Throws InvalidInput naming --impl for an unknown name.
BenchImplementation find_bench_implementation(const std::string& name);
/// The names find_bench_implementation knows.
std::vector<std::string> bench_implementation_names();

/// Useful flops of one forward call: 2·(d_k + d_v) per readable (query, key)
/// pair, summed over batch and heads (4·n_q·n_k·d without masks; causal,
/// key lengths and explicit masks count only the pairs they allow).
double useful_flops(const Problem& problem);

/// Bytes one forward call must move at least: Q and O once, and K and V once
/// up to the last key any query row of the batch element may read (key lengths
/// and causal masks shorten it; an explicit mask does not), summed over batch
/// and heads, in fp32. Decode and cross shapes (small n_q, long n_k) are
/// bound by this traffic, not by the flops: bytes / time against the machine's
/// measured read bandwidth is their roofline.
double moved_bytes(const Problem& problem);

/// Not attention: the compute floor of a call of this problem, benchmarked
/// beside the implementations (`bench --impl fma-floor`) so that a shape bound
/// by the FMA peak is judged against FMAs timed in the same run, under the
/// same load, rather than only against the peak probe run before and after.
/// Does useful_flops(problem) flops with the probe's register-only FMA chains
/// (fma_chains), in `threads` equal shares on the fused path's thread pool (so
/// a call's hand-out costs it what it costs fused); writes out[0] = the
/// flops done (within one chain iteration a share of useful_flops) and
/// zeros elsewhere. Checks the problem's sizes and options
/// (validate_problem), not the values; throws InvalidInput on a null tensor.
void fma_floor(const Problem& problem, const float* q, const float* k, const float* v, float* out,
               int threads = 1);

/// The lines `attncheck bench` prints after the runs: for every benchmark
/// (name → seconds per call) whose shape has a read-floor or fma-floor row,
/// its time over each floor's and over the slower of the two (the shape's
/// roofline timed beside it), in name order; none without floors.
std::vector<std::string> floor_summary(const std::map<std::string, double>& seconds);
/// An implementation's time per call over the floors timed call by call
/// beside it (BenchOptions::paired_floors): the median over repetitions of
/// each repetition's ratio of summed times (the one run's without repetitions).
struct PairedFloors {
  double over_read = 0, over_fma = 0;
  double over_roofline = 0;  ///< over the slower floor of each repetition
  double read_seconds = 0, fma_seconds = 0;  ///< each floor's time per call (median over repetitions)
};
/// The lines `attncheck bench --paired-floors` prints after the runs: for each
/// benchmark (name → its ratios), its time over each floor and over the
/// slower, in name order.
std::vector<std::string> paired_floor_summary(const std::map<std::string, PairedFloors>& ratios);
/// The thread-scaling lines `attncheck bench` prints after them: for every
/// benchmark on more than 1 thread whose shape also ran on 1 thread, its
/// speed-up (time on 1 thread over time on its threads), each floor's own
/// speed-up on that shape, and its speed-up over the roofline's (the slower
/// floor's, when the floors ran on both counts); floors have no lines. The
/// floors' times are those paired with the benchmark at both counts where
/// `paired` has them (--paired-floors), else the floors' own rows.
std::vector<std::string> thread_scaling_summary(const std::map<std::string, double>& seconds,
                                                const std::map<std::string, PairedFloors>& paired = {});

/// Options of `attncheck bench`.
struct BenchOptions {
  std::vector<std::string> impls{"fused"};
  /// Square shapes n = n_q = n_k (may be empty when n_q and n_k are given).
  std::vector<int64_t> n{64, 128, 256, 512, 1024, 2048, 4096};
  /// Cross shapes: every n_q against every n_k (both given or neither). A
  /// causal mask is bottom-right aligned here (the KV-cache alignment; equal to
  /// top-left where n_q = n_k).
  std::vector<int64_t> n_q;
  std::vector<int64_t> n_k;
  std::vector<int64_t> d{64};
  std::vector<std::string> masks{"none"};  ///< "none" or "causal" (top-left; n_q = n_k here)
  int64_t batch = 1;
  int64_t heads = 1;
  std::vector<int64_t> threads{1};
  int64_t repetitions = 3;
  /// Bytes past a 64-byte boundary at which Q, K, V and the output start (a
  /// multiple of 4 below 64). 0, as framework allocators (PyTorch, ONNX
  /// Runtime) place tensors; 16 is where a large malloc'd buffer starts with
  /// glibc, and every 64-byte vector load of such a stream then spans two
  /// cache lines.
  int64_t tensor_offset = 0;
  double min_time = 0.5;   ///< seconds per benchmark (and repetition)
  /// The CPU on which every 1-thread benchmark and the 1-thread probes run
  /// (the CPUs of a virtual machine may differ); -1: the CPU that read
  /// fastest in a 1-thread probe of each. exec: children are not placed (one
  /// child serves every thread count).
  int cpu = -1;
  std::string json_path;   ///< empty: no JSON file
  /// Runs the repetitions of all benchmarks in random interleaved order, so
  /// that changing load on a shared machine spreads over every benchmark.
  bool interleave = false;
  /// Times the read and FMA floors call by call beside every implementation
  /// that is not a floor: each iteration runs the implementation, then
  /// read_floor and fma_floor on the same problem, tensors, threads and CPU.
  /// The benchmark's time is the implementation's calls alone; counters give
  /// each floor's time per call and the implementation's time over each floor
  /// and over the slower (over_roofline). Load that changes from one second to
  /// the next on a shared machine then weighs on the three alike, which the
  /// floors timed as benchmarks of their own (repetitions seconds apart) do not.
  bool paired_floors = false;
  /// Prints "[k/N benchmarks, t s elapsed]" to stderr as each benchmark finishes.
  bool progress = false;
  /// When set, called as each benchmark finishes instead of printing that line
  /// (with or without `progress`): (finished, total, the finished one's name).
  std::function<void(size_t, size_t, const std::string&)> on_progress;
};

/// The memory of one benchmark tensor: `size` floats, zero, starting
/// `offset_bytes` (BenchOptions::tensor_offset, a multiple of 4 below 64) past
/// a 64-byte boundary.
class BenchTensor {
 public:
  BenchTensor(int64_t size, int64_t offset_bytes);
  float* data() { return data_; }
  const float* data() const { return data_; }

 private:
  std::unique_ptr<float[]> raw_;
  float* data_ = nullptr;
};

/// Parses a comma-separated list of positive integers ("64,128"); throws
/// InvalidInput naming `option` for an empty, malformed or non-positive entry.
std::vector<int64_t> parse_positive_list(const std::string& text, const std::string& option);

/// Checks every option (implementation names, sizes, masks, the JSON path is
/// writable) and throws InvalidInput naming the option. Writes nothing.
void check_bench_options(const BenchOptions& options);

/// The benchmark name of a square shape "<impl>/n:<n>/d:<d>/mask:<mask>/threads:<t>"
/// (n = n_q = n_k; the names of earlier versions, which reports read).
std::string bench_name(const std::string& impl, int64_t n, int64_t d, const std::string& mask,
                       int64_t threads);
/// The benchmark name of a cross shape
/// "<impl>/n_q:<n_q>/n_k:<n_k>/d:<d>/mask:<mask>/threads:<t>".
std::string bench_name(const std::string& impl, int64_t n_q, int64_t n_k, int64_t d,
                       const std::string& mask, int64_t threads);

/// The problem one benchmark runs: batch × heads, n_q = n_k = n, d_k = d_v = d.
Problem bench_problem(const BenchOptions& options, int64_t n, int64_t d, const std::string& mask);
/// A cross shape: batch × heads, n_q × n_k, d_k = d_v = d; causal is bottom-right aligned.
Problem bench_problem(const BenchOptions& options, int64_t n_q, int64_t n_k, int64_t d,
                      const std::string& mask);

/// Checks the options, probes the peak FMA throughput and the read bandwidth
/// (both in the JSON context), registers one Google Benchmark family over n
/// per (impl, d, mask, threads) and one over n_k per (impl, n_q, d, mask,
/// threads), runs them (console
/// table on stdout, Google Benchmark JSON to options.json_path) and returns
/// the number of benchmarks run. Throws std::runtime_error naming every
/// benchmark that failed (the others still run and are written).
size_t run_benchmarks(const BenchOptions& options);

}  // namespace attncheck
