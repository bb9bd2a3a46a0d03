// The report's internal model: what the input files say, normalised, plus the
// fits. Built by inputs.cpp, drawn by charts.cpp, written by render.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/report.h"

namespace attncheck::report_detail {

/// Text escaped for HTML content and attribute values (the report and the pages).
std::string html_escape(const std::string& text);

/// One Google Benchmark JSON file and the conditions it states.
struct BenchRun {
  std::string file;
  nlohmann::json context;  ///< the file's context object, as written
  std::string cpu_model, compiler, cxx_flags, simd_target, date, host_name, library_build_type;
  int num_cpus = 0;
  std::optional<double> peak_gflops;  ///< context peak_fma_gflops (one core)
  /// Context peak_fma_gflops_all_threads and peak_fma_threads: the FMA peak
  /// of that many threads together (absent in files written before it existed).
  std::optional<double> peak_all;
  int peak_threads = 0;
  std::optional<double> load_average; ///< first of context load_avg: other work on the machine
  /// Context read_bandwidth_gbps_1_thread / _all_threads (GB/s) and read_bandwidth_threads.
  std::optional<double> bandwidth_1, bandwidth_all;
  int bandwidth_threads = 0;
  /// Context tensor_offset_bytes: bytes past a 64-byte boundary at which the
  /// bench placed its tensors (absent in files written before it existed).
  std::optional<double> tensor_offset_bytes;
  /// Context one_thread_cpu: the CPU every 1-thread benchmark ran on.
  std::optional<double> one_thread_cpu;
  int repetitions = 1;                ///< the largest repetition count in the file
  std::string statistic;              ///< "median of 3 repetitions" or "single run"
};

/// One implementation × problem: the time and rate Google Benchmark measured.
struct Measurement {
  std::string implementation;
  int64_t n = 0, d = 0;
  int64_t n_q = 0, n_k = 0;  ///< a cross shape (Model::cross); n is 0 there
  std::string mask = "none";
  int threads = 1;
  std::string benchmark;   ///< the run name in the bench file
  double time_s = 0;       ///< real (wall) time per iteration, seconds
  std::string statistic;   ///< "median" or "single"
  int repetitions = 1;
  /// The fastest and slowest repetition's wall time, seconds (two or more
  /// repetitions written as iteration rows): the noise the median hides.
  std::optional<double> time_min_s, time_max_s;
  /// (slowest − fastest) / median, where the repetitions are known.
  std::optional<double> spread() const {
    if (!time_min_s || !time_max_s) return std::nullopt;
    return (*time_max_s - *time_min_s) / time_s;
  }
  std::optional<double> gflops;         ///< useful GFLOP/s (counter flops / 1e9, else gflops)
  std::optional<double> peak_fraction;  ///< counter peak_fraction, else gflops / peak
  std::optional<double> gbytes_per_s;   ///< counter bytes / 1e9: bytes moved per second
  /// Counter compute_seconds: the implementation's own compute time per call
  /// (plugins and exec children that report it); time_s includes the isolation.
  std::optional<double> compute_s;
  /// The time to compare with others: the own compute time where reported, else the wall time.
  double own_seconds() const { return compute_s.value_or(time_s); }
  /// Counters of a run with the floors timed call by call beside it (bench
  /// --paired-floors): each floor's time per call, and this implementation's
  /// own time over each floor and over the slower (medians over repetitions).
  std::optional<double> paired_read_floor_s, paired_fma_floor_s;
  std::optional<double> paired_over_read, paired_over_fma, paired_over_roofline;
  int family_index = -1;
  size_t run = 0;  ///< index into Model::runs
};

/// Google Benchmark's own complexity fit (the _BigO and _RMS rows).
struct GBenchComplexity {
  std::string big_o;
  double real_coefficient = 0, cpu_coefficient = 0;
  std::string time_unit;
  std::optional<double> rms;  ///< a fraction: 0.01 is 1 %
};

/// The configuration a series varies n within.
struct Config {
  int64_t d = 0;
  std::string mask;
  int threads = 1;
  bool operator==(const Config&) const = default;
  /// By d, then mask with "none" first, then threads.
  bool operator<(const Config& other) const;
  std::string label() const;
};

/// One implementation's measurements over n in one configuration.
struct Series {
  std::string implementation;
  Config config;
  std::vector<Measurement> points;  ///< sorted by n
  std::optional<PowerFit> fit;
  std::optional<GBenchComplexity> gbench;
  size_t run = 0;
};

/// One verify JSON file (schema version 1 or 2; see /docs/report-schema.md).
struct VerifyRun {
  std::string file;
  nlohmann::json doc;
  std::string implementation;
  std::string declared_name;  ///< the plugin's or exec child's own name; empty if none
  std::string precision;
  int schema_version = 1;
};

/// One configuration of a power file (its "rows"), normalised.
struct PowerPoint {
  int64_t n = 0, n_q = 0, n_k = 0, d = 0;
  std::string input, mask, oracle;
  double seconds = 0;
  struct Tightness {
    std::string implementation;
    std::optional<double> error_over_bound;  ///< empty when null; +inf when "inf"
    std::optional<double> max_abs_error;
    std::string verdict;                     ///< PASSED, FAILED, INCONCLUSIVE or DECLINED
    std::string message;
  };
  std::vector<Tightness> tightness;  ///< in the file's implementation order
  std::string perturbed;             ///< whose O·(1 + ε) was searched ("" when none)
  std::optional<double> smallest_caught, largest_missed;
  bool caught_at_lowest = false, caught_at_highest = false;
  const Tightness* find(const std::string& implementation) const;
};

/// The power JSON file (`attncheck verify --power --json`; docs/report-schema.md).
struct PowerRun {
  std::string file;
  nlohmann::json doc;
  int version = 1;
  std::vector<std::string> implementations;  ///< settings.implementations, else as met in the rows
  std::vector<PowerPoint> points;            ///< sorted by n, else in the file's order
  double epsilon_lo = 0, epsilon_hi = 0;     ///< settings.epsilon_range, the range searched; 0 if absent
  bool has(const std::string& implementation) const;
};

struct Model {
  std::vector<BenchRun> runs;
  std::vector<Series> series;  ///< sorted by configuration, then implementation
  /// Cross shapes ("<impl>/n_q:<q>/n_k:<k>/..."), in file order.
  std::vector<Measurement> cross;
  std::vector<VerifyRun> verifies;
  std::optional<PowerRun> power;
  std::vector<std::string> ignored_benchmarks;  ///< names without an n: field
  struct FailedBenchmark {
    std::string name, message, file;
  };
  std::vector<FailedBenchmark> failed_benchmarks;  ///< entries with error_occurred: no time to report
  std::vector<HeadlineRow> headline;
};

/// Reads and validates every input file; throws InvalidInput naming the file and field.
Model load_inputs(const ReportInputs& inputs);
/// Fits every series, attaches verdicts, builds the headline rows.
void analyse(Model& model);

/// The verdict line for an implementation from its verify runs.
std::string verdict_for(const Model& model, const std::string& implementation);
/// Conditions of one bench run / one verify run, in one line.
std::string bench_conditions(const BenchRun& run, int threads);
std::string verify_conditions(const VerifyRun& run);
/// The power file's conditions: the machine, the build and the problem, joined by `separator`.
std::string power_conditions(const PowerRun& run, const std::string& separator = "; ");

/// Where a measurement sits on its run's roofline: useful flops per byte
/// moved, the two roofs for its thread count, which one binds (the lower of
/// the FMA peak and bandwidth × intensity) and the fraction of it reached.
struct Roofline {
  std::optional<double> intensity;       ///< flop per byte
  std::optional<double> peak_gflops;     ///< FMA peak with the measurement's threads (peak_for)
  std::optional<double> bandwidth_gbps;  ///< read bandwidth measured with the measurement's threads
  std::string binds;                     ///< "memory", "FMA", or "" when a roof or counter is missing
  std::optional<double> fraction;        ///< achieved / binding roof (GB/s or GFLOP/s)
};
Roofline roofline(const Model& model, const Measurement& m);
/// The FMA peak a run's calls on `threads` threads can reach, GFLOP/s, as
/// attncheck bench divides by: one core's for 1 thread; the all-threads probe
/// for peak_threads threads or more, its share for fewer; one core's times
/// the threads in files without that probe.
std::optional<double> peak_for(const BenchRun& run, int threads);
/// The name `attncheck bench` gives the memory floor of a shape (read-floor:
/// the bytes a call must move, read once with its threads, no attention).
inline constexpr const char* kReadFloor = "read-floor";
/// The name it gives the compute floor (fma-floor: the call's useful flops
/// as register-only FMAs on its threads, no attention).
inline constexpr const char* kFmaFloor = "fma-floor";
/// Whether `implementation` is one of the two floors (bench rows that compute no attention).
inline bool is_floor(const std::string& implementation) {
  return implementation == kReadFloor || implementation == kFmaFloor;
}
/// A measurement's time over the floor `floor_name` (kReadFloor, kFmaFloor):
/// the ratio timed call by call beside it where the run paired the floors
/// (Measurement::paired_over_read ...), else over the floor's row of the same
/// shape and threads from the same bench run. Either way how far from memory
/// or from the FMA peak, measured side by side rather than against a probe.
/// Uses the implementation's own compute time when it reported one (its wall
/// time includes the isolation). None for a floor itself or when the run has
/// no such floor for that shape.
std::optional<double> over_floor(const Model& model, const Measurement& m, const std::string& floor_name);
/// The time over the slower of the two floors (both needed; paired where the
/// run paired them): the roofline of the shape, its memory and FMA limits,
/// timed beside it.
std::optional<double> over_slower_floor(const Model& model, const Measurement& m);
/// A ratio to a floor as a table cell: "—" when none, "(paired)" after it
/// when the floors were timed call by call beside m.
std::string floor_ratio_cell(const std::optional<double>& ratio, const Measurement& m);
/// The cross shapes as table rows (first row the header), with their roofline.
std::vector<std::vector<std::string>> decode_table(const Model& model);
/// One implementation's speed-up from 1 thread to `many->threads` on one
/// shape of one bench run, beside the floors' own speed-up there: what the
/// machine's cores give together on that shape, timed in the same run.
struct ThreadScaling {
  const Measurement* one = nullptr;   ///< the 1-thread measurement
  const Measurement* many = nullptr;  ///< the same shape on more threads
  double speedup = 0;                 ///< one's time / many's (own compute time where reported)
  std::optional<double> read_floor, fma_floor;  ///< each floor's speed-up on the shape
  /// The slower floor's time on 1 thread over the slower floor's on `threads`
  /// (the floors timed at both counts): the roofline's speed-up.
  std::optional<double> roofline;
  std::optional<double> over_roofline() const {
    if (!roofline) return std::nullopt;
    return speedup / *roofline;
  }
};
/// Every implementation measured on 1 thread and on more, shape by shape
/// (floors excluded: they are the columns), by d, mask, implementation, shape.
std::vector<ThreadScaling> thread_scaling(const Model& model);
/// The same as table rows (first row the header).
std::vector<std::vector<std::string>> thread_scaling_table(const Model& model);
/// One line per measurement whose implementation reported its own compute
/// time: the share of the wall time spent on isolation, flagged above 50 %.
std::vector<std::string> isolation_notes(const Model& model);

/// A chart drawn by gnuplot: its file stem and the SVG text.
struct Chart {
  std::string name;     ///< file stem, e.g. "time-d64-none-t1"
  std::string caption;  ///< what it shows, with its conditions
  std::string section;  ///< where it belongs: "performance:<config label>", "error:<verify index>",
                        ///< "property:<verify index>:<name>", "power"
  std::string svg;
};

/// Draws every chart (throws InvalidInput when gnuplot is missing or fails).
std::vector<Chart> draw_charts(const Model& model, const std::string& gnuplot);

std::string render_json(const Model& model);
std::string render_markdown(const Model& model);
/// `out_dir`: where report.html is written, so that links to case pages are relative to it.
std::string render_html(const Model& model, const std::vector<Chart>& charts, const std::string& out_dir = ".");

/// Number formatting shared by the renderers.
std::string format_number(double value, int significant = 3);
std::string format_fit(const std::optional<PowerFit>& fit);
std::string format_speedup(const Speedup& s, int64_t own_largest_n);
/// A measurement's statistic for the tables: "single run", "median of 3", or
/// "median of 3 (0.336–0.369 ms, spread 9.8 %)" where the repetitions are known;
/// the spread is (slowest − fastest) / median.
std::string format_statistic(const Measurement& m);

}  // namespace attncheck::report_detail
