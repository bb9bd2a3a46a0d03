// The report generator: reads Google Benchmark JSON (from `attncheck bench`),
// verification JSON (from `attncheck verify`) and power JSON (from `attncheck
// verify --power`; docs/report-schema.md names the versions it reads) and writes report.json, report.md and a self-contained
// report.html whose charts gnuplot draws as inline SVG. It never runs a
// benchmark: everything comes from the JSON files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attncheck {

/// The report's own JSON version (report.json "json_schema_version").
inline constexpr int report_json_schema_version = 1;
/// The verify JSON versions this generator reads: from the oldest to the
/// newest (docs/verify-json.md). Version 2 added INCONCLUSIVE, the counts of
/// inconclusive and declined cases, notes, and the mutants' kill matrix.
inline constexpr int oldest_verify_json_schema_version = 1;
inline constexpr int verify_json_schema_version = 2;

/// The power JSON versions (`attncheck verify --power --json`) this generator reads.
inline constexpr int oldest_power_json_version = 1;
inline constexpr int power_json_version = 1;

/// What to read and how to draw.
struct ReportInputs {
  std::vector<std::string> bench_files;   ///< Google Benchmark JSON files
  std::vector<std::string> verify_files;  ///< `attncheck verify --json` files
  /// `attncheck verify --power --json` file (empty: none): the tolerance
  /// model's tightness and power vs n. Its error / bound rows also replace a
  /// verify file's error_vs_n in that implementation's "Error vs n".
  std::string power_file;
  std::string gnuplot = "gnuplot";        ///< program name or path of gnuplot
};

/// Least-squares fit of log(time) on log(n): time ≈ coefficient · n^exponent.
struct PowerFit {
  double exponent = 0;
  double coefficient = 0;
  double n_min = 0;        ///< smallest n used in the fit
  double n_max = 0;        ///< largest n used in the fit
  int points = 0;          ///< how many (n, time) points the fit used
  bool all_points = false; ///< true when fewer than 2 points had n >= min_n, so all were used
};

/// Fits (n, time) pairs with n >= min_n; when fewer than two such points exist
/// it fits all points and sets all_points. Returns nothing when fewer than two
/// distinct n remain. Non-positive values are skipped (no logarithm).
std::optional<PowerFit> fit_power_law(const std::vector<std::pair<double, double>>& n_time,
                                      double min_n = 256);

/// A speed-up of one implementation against a peer: peer time / own time at
/// the largest n both measured.
struct Speedup {
  std::string peer;
  std::optional<double> factor;  ///< empty when the two share no n
  int64_t n = 0;                 ///< the n the ratio was taken at
};

/// One row of the headline table: one implementation under one benchmark
/// configuration (d, mask, threads).
struct HeadlineRow {
  std::string implementation;
  std::string configuration;         ///< e.g. "d=64, mask=causal, threads=1"; empty if not benchmarked
  int64_t largest_n = 0;             ///< 0 if not benchmarked
  std::optional<double> gflops;      ///< useful GFLOP/s at largest_n
  std::optional<double> peak_percent;///< % of the measured machine peak at largest_n
  std::optional<PowerFit> fit;       ///< fitted exponent of time vs n
  std::vector<Speedup> speedups;     ///< one per peer in the same configuration
  std::string verdict;               ///< "PASS ...", "FAIL ...", or "not verified"
};

/// What write_report produced.
struct ReportResult {
  std::vector<HeadlineRow> headline;
  std::string json_path, markdown_path, html_path;
  std::vector<std::string> chart_paths;  ///< the charts also written as separate SVG files
};

/// Reads every input, fits, draws, and writes out_dir/report.{json,md,html}
/// and out_dir/charts/*.svg (other files in out_dir, such as the input JSON,
/// are left alone; stale charts/*.svg are removed). All inputs are read and all charts drawn before
/// anything is written, so a bad input (missing file, malformed JSON, a verify
/// file without the supported json_schema_version, a power file without the
/// supported power_json_version, a bench file that is not Google Benchmark
/// JSON) or a missing gnuplot throws InvalidInput — naming the
/// file and the field — and leaves out_dir untouched.
ReportResult write_report(const ReportInputs& inputs, const std::string& out_dir);

/// The headline table as plain text for a terminal (what `attncheck run`
/// prints after writing the report).
std::string format_headline(const std::vector<HeadlineRow>& rows);

}  // namespace attncheck
