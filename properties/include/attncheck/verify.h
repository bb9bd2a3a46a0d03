// Runs the properties against an implementation with RapidCheck, records each
// failure's shrunk case as a case file, replays case files, hunts mutants,
// and writes the results as verify JSON (docs/verify-json.md) and JUnit XML.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/case.h"
#include "attncheck/implementation.h"
#include "attncheck/properties.h"

namespace attncheck {

/// A property's verdict. INCONCLUSIVE: the tolerance model could not judge
/// enough of its cases (every case, or more than the run's budget of
/// inconclusive cases); never a pass.
enum class Status { passed, failed, skipped, crashed, timed_out, inconclusive };
std::string to_string(Status s);  ///< "PASSED", "FAILED", ..., "INCONCLUSIVE"

/// A property run more than this fraction of whose checked cases (cases +
/// inconclusive) were inconclusive says so, whatever its status.
inline constexpr double kInconclusiveFlagFraction = 0.2;
/// Budgets of a property run, as multiples of the cases asked for: cases the
/// generator could not use (beyond it: FAILED, "gave up"), inconclusive cases
/// (beyond it: INCONCLUSIVE), and out-of-range cases the implementation declined
/// (beyond it, with no case checked: SKIPPED).
inline constexpr int kDiscardBudget = 10;
inline constexpr int kInconclusiveBudget = 1;
inline constexpr int kUnsupportedBudget = 10;

struct PropertyResult;

struct VerifyOptions {
  uint64_t seed = 1;
  int cases = 100;                       ///< successful cases per property
  int64_t max_n = 130;                   ///< largest n_q, n_k generated (d: at most 64)
  std::vector<std::string> properties;   ///< empty: all
  int threads = 1;                       ///< thread hint passed to forward()
  std::string failures_dir = "attncheck-failures";  ///< empty: failures are not written
  /// Evaluations spent shrinking a failure to a minimal case; 0: the first
  /// failing case is kept as it is.
  int shrink_budget = 400;
  /// hunt_mutants: cases per property for the cells of properties not expected
  /// to kill the mutant (expected killers run `cases`); at most `cases`, 0: `cases`.
  /// Whether a mutant is killed as expected does not depend on it.
  int matrix_cases = 20;
  /// Called while a property runs: (property, cases done, cases wanted, shrinking).
  std::function<void(const std::string&, int, int, bool)> progress;
  /// run_verify: called with each property's result as soon as it is final.
  std::function<void(const PropertyResult&)> on_property;
  /// Called after a counterexample's case file is written (not for a timed-out
  /// case), with the case and the slice its failure was seen in: the CLI writes
  /// the case page beside it. An exception it throws is noted in the message.
  std::function<void(const std::string& case_path, const Case& c, Implementation& impl, int64_t b, int64_t h)>
      on_case_written;

  /// Sharding (docs/ci.md): each property's cases are split into `case_chunks`
  /// chunks of consecutive case counts (chunk 0 keeps the unsharded seed);
  /// the work units (property, chunk), in property order then chunk order, go
  /// round-robin to shards: unit u to shard u mod shard_count + 1. The n
  /// shards of a run together run exactly the units one unsharded run runs.
  int shard_index = 1, shard_count = 1;
  int case_chunks = 1;
  /// Time budgets in seconds (0: none): a property stops drawing cases (and
  /// shrinking) once it ran `property_time_budget` seconds or the run ran
  /// `time_budget` seconds; a property cut short is never a full pass.
  double time_budget = 0;
  double property_time_budget = 0;
  /// Of one property's shrinking steps, at most this many may time out; the
  /// smallest hanging case found by then is kept. Once one property of a run
  /// shrank a timeout, the others stop at their first timeout unshrunk.
  int timed_out_shrink_steps = 8;
};

struct PropertyResult {
  std::string name;
  Status status = Status::passed;
  int cases = 0, discarded = 0;
  int inconclusive = 0;                  ///< cases the tolerance model could not judge (never passes)
  int unsupported = 0;                   ///< out-of-range cases the implementation declined (accepted)
  std::string inconclusive_reason;       ///< the first inconclusive case's reason
  std::string unsupported_reason;        ///< the first declined case's reason
  std::vector<std::string> notes;        ///< distinct notes of the cases (not failures)
  double seconds = 0;
  std::optional<double> worst_ratio;
  std::vector<std::string> oracles;      ///< every reference that judged a case
  std::string skipped_reason;
  std::vector<std::string> not_exercised;
  int timed_out = 0;                     ///< calls that timed out (each one cost a whole per-call timeout)
  /// Why a time budget stopped the property early; empty: it ran in full. A
  /// property cut short is never a full pass (all_passed() is false).
  std::string cut_short;
  std::vector<int> chunks;               ///< the case chunks this result covers (sharded runs)
  // The counterexample, when not passed or skipped.
  std::string message;
  std::optional<Case> counterexample;
  std::string case_file;
  nlohmann::json tables;                 ///< {"slice":[b,h],"reference":{...},"implementation":{...}}
};

/// True when more than kInconclusiveFlagFraction of the cases the property
/// checked (cases + inconclusive) were inconclusive.
bool inconclusive_flagged(const PropertyResult& r);
/// "12 of 40 cases (30 %) inconclusive: <first reason>"; empty without inconclusive cases.
std::string inconclusive_text(const PropertyResult& r);

/// A kill: a FAILED verdict with a counterexample. Gave up, a RapidCheck error,
/// no case run (FAILED without a counterexample), CRASHED, TIMED_OUT and
/// INCONCLUSIVE are not kills.
bool is_kill(const PropertyResult& r);

/// One cell of the kill matrix: one property against one mutant.
struct KillCell {
  std::string property;
  Status status = Status::passed;
  bool kill = false;      ///< is_kill() of the property's result
  bool expected = false;  ///< the property is one of the mutant's expected killers
};

/// Killed by an expected property: ok. Not killed at all, or killed only by
/// properties that are not expected to kill it (while the expected ones passed,
/// crashed, gave up...): both are findings.
enum class MutantVerdict { killed_as_expected, escaped, killed_unexpectedly };
std::string to_string(MutantVerdict v);  ///< "ok", "escaped", "killed only by unexpected properties"

struct MutantResult {
  std::string name;
  bool killed = false;                       ///< some property killed it (is_kill)
  /// The property whose counterexample is shown: the first expected killer that
  /// killed it, else the first property that killed it; empty when not killed.
  std::string killed_by, case_name, message, case_file;
  std::vector<std::string> expected_killers; ///< from all_flaws()
  std::vector<KillCell> matrix;              ///< one cell per selected property, in run order
  MutantVerdict verdict = MutantVerdict::escaped;
};

/// The verdict of a mutant from its matrix row.
MutantVerdict mutant_verdict(const std::vector<KillCell>& row);

struct VerifyReport {
  std::string implementation;
  std::string declared_name;             ///< Implementation::declared_name(); empty if none
  Precision precision = Precision::fp32;
  Capabilities capabilities;
  VerifyOptions options;
  std::vector<PropertyResult> properties;  ///< one per property (its chunks merged)
  /// Sharded runs (shard_count > 1): one result per work unit (property,
  /// chunk) of this shard, in unit order; verify JSON writes these, and
  /// `attncheck report` merges the units of every shard by merge_chunks' rule.
  std::vector<PropertyResult> units;
  std::vector<MutantResult> mutants;
  nlohmann::json error_vs_n = nlohmann::json::array();
};

/// Runs one property: `options.cases` generated cases (RapidCheck, seeded by
/// options.seed and the property name), shrinking any failure to a minimal case
/// that is written to options.failures_dir. Zero cases run, or a generator
/// that only discards, is FAILED, never PASSED. Inconclusive cases (the
/// property's Outcome::inconclusive) are counted, never passes: the run draws
/// further cases until `cases` were judged, and is INCONCLUSIVE when more than
/// kInconclusiveBudget × cases could not be judged. A case the implementation
/// declines (Unsupported or InvalidInput from forward()) is accepted when
/// out_of_class_range() says the case is beyond its precision class, counted in
/// `unsupported`, and a failure otherwise; a property whose every case was
/// declined as out of range is SKIPPED with the reason.
PropertyResult run_property(Implementation& impl, const Property& property, const VerifyOptions& options);

/// Every selected property (unknown names throw InvalidInput naming --property),
/// or the share of them that options.shard_index of options.shard_count runs,
/// within options' time budgets. Each result goes to options.on_property.
VerifyReport run_verify(Implementation& impl, const VerifyOptions& options);

/// Checks a shard spec, case chunks and time budgets; throws InvalidInput
/// naming the option.
void check_shard_options(const VerifyOptions& options);
/// Parses "i/n" (1 <= i <= n) into options.shard_index and shard_count;
/// throws InvalidInput naming --shard.
void parse_shard(const std::string& text, VerifyOptions& options);

/// One property's result from the results of its case chunks, in chunk order:
/// counts and seconds add up, the first chunk that FAILED, CRASHED or TIMED_OUT
/// gives the verdict and counterexample, else INCONCLUSIVE if a chunk was, else
/// PASSED if a chunk passed, else SKIPPED. `report merges shards` by the same rule.
PropertyResult merge_chunks(const std::vector<PropertyResult>& chunks);

/// Re-runs one case: the property named in its "property" label, or every
/// property that applies. Only `threads` of `options` is used.
std::vector<PropertyResult> replay_case(Implementation& impl, const Case& c, const VerifyOptions& options);

/// Runs every selected property against every mutant: the kill matrix. A
/// mutant's expected killers run options.cases cases, the other properties
/// options.matrix_cases. Cells are not shrunk; the shown counterexample of each
/// mutant is, and only it is written to options.failures_dir.
std::vector<MutantResult> hunt_mutants(const VerifyOptions& options);
/// The same for any list of mutants (name → expected killers is taken from
/// `expected`, keyed by the implementation's name).
std::vector<MutantResult> hunt_mutants(std::vector<std::unique_ptr<Implementation>> mutants,
                                       const std::map<std::string, std::vector<std::string>>& expected,
                                       const VerifyOptions& options);
/// The kill matrix as text: one row per mutant, one column per property; K kill
/// (FAILED with a counterexample), . passed, s skipped, i inconclusive,
/// C crashed, T timed out, G gave up or another FAILED without counterexample;
/// an expected killer's cell is in brackets, e.g. [K]. Then a legend and one
/// line per mutant whose verdict is not ok.
std::string format_kill_matrix(const std::vector<MutantResult>& mutants);
/// True when every mutant was killed by one of its expected killers.
bool all_mutants_killed_as_expected(const std::vector<MutantResult>& mutants);

/// Error of the implementation as a fraction of its bound on uniform inputs,
/// for n in `sizes` (d = 64, masks none and causal): the report's error-vs-n chart.
nlohmann::json error_versus_n(Implementation& impl, const std::vector<int64_t>& sizes);

/// The reference's and the implementation's O (and A) of one slice, with the
/// cells whose error exceeds the bound; for counterexamples and `explain --impl`.
nlohmann::json compare_slice(Implementation& impl, const Case& c, int64_t b, int64_t h);
/// compare_slice as text tables for a terminal.
std::string format_slice_comparison(const nlohmann::json& comparison);

/// A command line for /bin/sh: each word single-quoted where it needs quoting.
std::string shell_command(const std::vector<std::string>& words);

/// The verify JSON schema version verify_json writes.
inline constexpr int kVerifyJsonSchemaVersion = 2;
std::string verify_json(const VerifyReport& report);   ///< docs/verify-json.md, schema version 2
/// The machine and build a run happened on, as verify JSON's "context" writes
/// it: cpu_model, cores_used (`threads`, or every logical CPU when 0),
/// logical_cpus, load_avg (1, 5 and 15 minutes, now), compiler, flags,
/// simd_target, date (UTC).
nlohmann::json run_context(int threads);
std::string verify_junit(const VerifyReport& report);  ///< one testcase per property
/// The counts of the summary line: "N passed, N failed[, N inconclusive][, N skipped]".
std::string summary_line(const VerifyReport& report);
bool all_passed(const VerifyReport& report);

}  // namespace attncheck
