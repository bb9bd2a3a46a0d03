// Runs the properties against an implementation with RapidCheck, records each
// failure's shrunk case as a case file, replays case files, hunts mutants,
// and writes the results as verify JSON (docs/verify-json.md) and JUnit XML.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/case.h"
#include "attncheck/implementation.h"
#include "attncheck/properties.h"

namespace attncheck {

enum class Status { passed, failed, skipped, crashed, timed_out };
std::string to_string(Status s);  ///< "PASSED", "FAILED", ...

struct VerifyOptions {
  uint64_t seed = 1;
  int cases = 100;                       ///< successful cases per property
  int64_t max_n = 130;                   ///< largest n_q, n_k generated (d: at most 64)
  std::vector<std::string> properties;   ///< empty: all
  int threads = 1;                       ///< thread hint passed to forward()
  std::string failures_dir = "attncheck-failures";  ///< empty: failures are not written
  /// Called while a property runs: (property, cases done, cases wanted, shrinking).
  std::function<void(const std::string&, int, int, bool)> progress;
};

struct PropertyResult {
  std::string name;
  Status status = Status::passed;
  int cases = 0, discarded = 0;
  double seconds = 0;
  std::optional<double> worst_ratio;
  std::vector<std::string> oracles;      ///< every reference that judged a case
  std::string skipped_reason;
  std::vector<std::string> not_exercised;
  // The counterexample, when not passed or skipped.
  std::string message;
  std::optional<Case> counterexample;
  std::string case_file;
  nlohmann::json tables;                 ///< {"slice":[b,h],"reference":{...},"implementation":{...}}
};

struct MutantResult {
  std::string name;
  bool killed = false;
  std::string killed_by, case_name, message, case_file;
};

struct VerifyReport {
  std::string implementation;
  Precision precision = Precision::fp32;
  Capabilities capabilities;
  VerifyOptions options;
  std::vector<PropertyResult> properties;
  std::vector<MutantResult> mutants;
  nlohmann::json error_vs_n = nlohmann::json::array();
};

/// Runs one property: `options.cases` generated cases (RapidCheck, seeded by
/// options.seed and the property name), shrinking any failure to a minimal case
/// that is written to options.failures_dir. Zero cases run, or a generator
/// that only discards, is FAILED, never PASSED.
PropertyResult run_property(Implementation& impl, const Property& property, const VerifyOptions& options);

/// Every selected property (unknown names throw InvalidInput naming --property).
VerifyReport run_verify(Implementation& impl, const VerifyOptions& options);

/// Re-runs one case: the property named in its "property" label, or every
/// property that applies. Only `threads` of `options` is used.
std::vector<PropertyResult> replay_case(Implementation& impl, const Case& c, const VerifyOptions& options);

/// Runs the properties against every mutant until one fails.
std::vector<MutantResult> hunt_mutants(const VerifyOptions& options);

/// Error of the implementation as a fraction of its bound on uniform inputs,
/// for n in `sizes` (d = 64, masks none and causal): the report's error-vs-n chart.
nlohmann::json error_versus_n(Implementation& impl, const std::vector<int64_t>& sizes);

/// The reference's and the implementation's O (and A) of one slice, with the
/// cells whose error exceeds the bound; for counterexamples and `explain --impl`.
nlohmann::json compare_slice(Implementation& impl, const Case& c, int64_t b, int64_t h);
/// compare_slice as text tables for a terminal.
std::string format_slice_comparison(const nlohmann::json& comparison);

std::string verify_json(const VerifyReport& report);   ///< docs/verify-json.md, schema version 1
std::string verify_junit(const VerifyReport& report);  ///< one testcase per property
/// The counts of the summary line: "N passed, N failed[, N skipped]".
std::string summary_line(const VerifyReport& report);
bool all_passed(const VerifyReport& report);

}  // namespace attncheck
