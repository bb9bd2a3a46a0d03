// attncheck verify: every property against an implementation, with shrunk,
// replayable counterexamples; also --replay of a case file and --mutants.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "attncheck/builtin_implementations.h"
#include "attncheck/pages.h"
#include "attncheck/plugin.h"
#include "attncheck/registry.h"
#include "attncheck/power.h"
#include "attncheck/verify.h"
#include "budget.h"
#include "commands.h"

namespace attncheck::cli {
namespace {

struct VerifyArgs {
  std::string impl = "fused";
  int cases = 100;
  int matrix_cases = VerifyOptions{}.matrix_cases;
  std::optional<uint64_t> seed;
  int64_t max_n = 130;
  std::vector<std::string> properties;
  std::string json, junit, replay, failures_dir = "attncheck-failures";
  bool mutants = false, list = false;
  int threads = 1;
  bool power = false;  std::string power_json;  // --power: attncheck/power.h
  std::string max_bytes = kDefaultMaxBytes;
  std::string shard;  // "I/N"; empty: the whole run
  int case_chunks = 1;
  double time_budget = 0, property_time_budget = 0;
};

std::string ratio_text(const PropertyResult& r) {
  if (!r.worst_ratio) return "-";
  return std::isfinite(*r.worst_ratio) ? fmt::format("{:.3g}", *r.worst_ratio) : "inf";
}

void print_header() {
  fmt::print("{:<28} {:>6} {:>6} {:>6} {:>12} {:>12} {:>8}  {}\n", "property", "cases", "incon", "unsup", "verdict",
             "error/bound", "time", "oracle");
}

void print_row(const PropertyResult& r, const std::string& impl) {
  fmt::print("{:<28} {:>6} {:>6} {:>6} {:>12} {:>12} {:>7.2f}s  {}\n", r.name, r.cases, r.inconclusive, r.unsupported,
             to_string(r.status), ratio_text(r), r.seconds,
             r.oracles.empty() ? "" : fmt::format("{}", fmt::join(r.oracles, "+")));
  if (r.status == Status::skipped) fmt::print("    skipped: {}\n", r.skipped_reason);
  if (r.inconclusive > 0)
    fmt::print("    {}: {}\n", inconclusive_flagged(r) ? "INCONCLUSIVE FLAG" : "inconclusive", inconclusive_text(r));
  if (r.unsupported > 0 && r.status != Status::skipped)
    fmt::print("    declined as out of range (accepted): {} cases: {}\n", r.unsupported, r.unsupported_reason);
  for (const std::string& note : r.notes) fmt::print("    note: {}\n", note);
  if (r.status == Status::passed && !r.message.empty()) fmt::print("    {}\n", r.message);
  if (!r.cut_short.empty())
    fmt::print("    CUT SHORT ({}): not every case ran, so this is not a full pass\n", r.cut_short);
  if (r.timed_out > 0) fmt::print("    {} call(s) timed out (each waited the whole per-call timeout)\n", r.timed_out);
  if (r.status == Status::inconclusive) fmt::print("    {}\n", r.message);
  if (r.status == Status::failed || r.status == Status::crashed || r.status == Status::timed_out) {
    fmt::print("    {}\n", r.message);
    if (r.counterexample) {
      // input_validation sends a bad input made from the case: name what was sent.
      const auto sent = r.counterexample->labels.find("sent");
      if (sent != r.counterexample->labels.end())
        fmt::print("    minimal case: {} (the bad input sent, made from the case in the case file)\n", sent->second);
      else
        fmt::print("    minimal case: {}\n", canonical_name(r.counterexample->problem));
    }
    if (!r.case_file.empty())
      fmt::print("    case file: {}\n{}    replay: {}\n", r.case_file,
                 std::filesystem::exists(case_page_path(r.case_file)) ? "    case page: " + case_page_path(r.case_file) + "\n" : "",
                 shell_command({"attncheck", "verify", "--impl", impl, "--replay", r.case_file}));
  }
  std::fflush(stdout);
}

void write_text(const std::string& path, const std::string& text, const char* option) {
  std::ofstream out(path);
  if (!out) throw InvalidInput(fmt::format("option {}: cannot write '{}'", option, path));
  out << text;
}

void check_args(const VerifyArgs& a) {
  if (a.cases < 1) throw InvalidInput(fmt::format("option --cases is {}; it must be at least 1", a.cases));
  if (a.matrix_cases < 1)
    throw InvalidInput(fmt::format("option --matrix-cases is {}; it must be at least 1", a.matrix_cases));
  if (a.max_n < 1) throw InvalidInput(fmt::format("option --max-n is {}; it must be at least 1", a.max_n));
  if (a.threads < 0) throw InvalidInput(fmt::format("option --threads is {}; it must be >= 0", a.threads));
  for (const std::string& name : a.properties)
    if (!find_property(name)) {
      std::string known;
      for (const Property& p : all_properties()) known += (known.empty() ? "" : ", ") + p.name;
      throw InvalidInput(fmt::format("option --property: unknown property '{}'; known: {}", name, known));
    }
  if (a.mutants && !a.replay.empty()) throw InvalidInput("options --mutants and --replay cannot be combined");
  if (!a.shard.empty() && (a.mutants || !a.replay.empty()))
    throw InvalidInput(fmt::format("option --shard cannot be combined with {}", a.mutants ? "--mutants" : "--replay"));
}

void run(const VerifyArgs& a) {
  if (a.list) {
    fmt::print("implementations:\n");
    for (const auto& [name, description] : implementation_list()) fmt::print("  {:<28} {}\n", name, description);
    fmt::print("properties:\n");
    for (const Property& p : all_properties()) fmt::print("  {:<28} {}\n", p.name, p.sentence);
    return;
  }
  if (a.power) { run_power_command(a.power_json.empty() ? a.json : a.power_json, a.threads); return; }
  check_args(a);
  VerifyOptions options;
  if (!a.shard.empty()) parse_shard(a.shard, options);
  const int64_t max_bytes = parse_byte_count(a.max_bytes);  // generated cases: batch, heads <= 3, d <= 64
  check_memory_budget({3, 3, a.max_n, a.max_n, 64, 64}, true, kReferenceScoreBytes, max_bytes, "verify --max-n");
  options.seed = a.seed ? *a.seed : std::random_device{}();
  options.cases = a.cases;
  options.matrix_cases = a.matrix_cases;
  options.max_n = a.max_n;
  options.properties = a.properties;
  options.threads = a.threads;
  options.failures_dir = a.failures_dir;
  options.on_case_written = write_case_page_beside;  // each failure's page beside its case file
  options.case_chunks = a.case_chunks;
  options.time_budget = a.time_budget;
  options.property_time_budget = a.property_time_budget;
  check_shard_options(options);
  const bool tty = isatty(fileno(stderr));
  if (tty)
    options.progress = [](const std::string& name, int done, int total, bool shrinking) {
      fmt::print(stderr, "\r  {:<28} {:>4}/{:<4}{}\x1b[K", name, done, total, shrinking ? " shrinking" : "");
    };
  auto clear_progress = [tty] {
    if (tty) fmt::print(stderr, "\r\x1b[K");
  };

  VerifyReport report;
  report.options = options;
  report.options.on_property = nullptr;
  if (a.mutants) {
    fmt::print("hunting {} mutants with seed {}: every property against every mutant, {} cases per expected killer, "
               "{} per other property\n",
               make_mutants().size(), options.seed, options.cases,
               options.matrix_cases > 0 ? std::min(options.cases, options.matrix_cases) : options.cases);
    report.implementation = "mutants";
    report.mutants = hunt_mutants(options);
    clear_progress();
    fmt::print("{}", format_kill_matrix(report.mutants));
    int ok = 0, escaped = 0;
    for (const MutantResult& m : report.mutants) {
      ok += m.verdict == MutantVerdict::killed_as_expected;
      escaped += m.verdict == MutantVerdict::escaped;
    }
    fmt::print("{} of {} mutants killed by an expected property; {} escaped; {} killed only by unexpected properties\n",
               ok, report.mutants.size(), escaped, static_cast<int>(report.mutants.size()) - ok - escaped);
  } else {
    auto impl = make_implementation(a.impl);
    report.implementation = impl->name();
    report.declared_name = impl->declared_name();
    report.precision = impl->precision();
    report.capabilities = impl->capabilities();
    if (!a.replay.empty()) {
      const Case c = read_case_file(a.replay);
      check_memory_budget(c.problem.shape, true, kReferenceScoreBytes, max_bytes, "verify --replay: the case");
      fmt::print("replaying {} ({}) against {}\n", a.replay, canonical_name(c.problem), impl->name());
      print_header();
      report.properties = replay_case(*impl, c, options);
      for (const PropertyResult& r : report.properties) {
        print_row(r, report.implementation);
        if (!r.tables.is_null() && r.tables.contains("reference")) fmt::print("{}", format_slice_comparison(r.tables));
      }
    } else {
      const std::string declared =
          report.declared_name.empty() ? "" : fmt::format("\"{}\", ", report.declared_name);
      fmt::print("verifying {} ({}{}) with seed {}, {} cases per property, max n {}{}{}{}\n", impl->name(), declared,
                 to_string(impl->precision()), options.seed, options.cases, options.max_n,
                 options.shard_count > 1 || options.case_chunks > 1
                     ? fmt::format(", shard {}/{} of {} case chunk(s) per property", options.shard_index,
                                   options.shard_count, options.case_chunks)
                     : "",
                 options.time_budget > 0 ? fmt::format(", time budget {:g} s", options.time_budget) : "",
                 options.property_time_budget > 0
                     ? fmt::format(", {:g} s per property", options.property_time_budget)
                     : "");
      print_header();
      options.on_property = [&](const PropertyResult& r) {
        clear_progress();
        print_row(r, report.implementation);
      };
      const VerifyReport run = run_verify(*impl, options);
      report.properties = run.properties;
      report.units = run.units;
      // The error-vs-n chart is measured once per run: by shard 1.
      if (!a.json.empty() && options.shard_index == 1) report.error_vs_n = error_versus_n(*impl, {16, 64, 256});
    }
    fmt::print("{}\n", summary_line(report));
  }
  if (!a.json.empty()) write_text(a.json, verify_json(report), "--json");
  if (!a.junit.empty()) write_text(a.junit, verify_junit(report), "--junit");
  if (!all_passed(report)) throw CLI::RuntimeError(1);
}

}  // namespace

void add_verify_command(CLI::App& app) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand("verify", "check every property against an implementation");
  cmd->add_option("--impl", args->impl, "implementation (see --list)")->capture_default_str();
  cmd->add_option("--cases", args->cases, "generated cases per property")->capture_default_str();
  cmd->add_option("--matrix-cases", args->matrix_cases,
                  "with --mutants: cases per property not expected to kill the mutant (at most --cases)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "random seed (default: a fresh one, printed)");
  cmd->add_option("--max-n", args->max_n, "largest n_q, n_k generated (d is at most 64); 130 = 2·64 + 2 spans the fused path's key panels")->capture_default_str();
  cmd->add_option("--property", args->properties, "run only this property (repeatable)");
  cmd->add_option("--json", args->json, "write verify JSON (docs/verify-json.md)");
  cmd->add_option("--junit", args->junit, "write JUnit XML, one testcase per property");
  cmd->add_option("--replay", args->replay, "re-run the case file of a recorded failure");
  cmd->add_flag("--mutants", args->mutants,
                "run every property against every mutant (the kill matrix); each must be killed by a property "
                "expected to kill it");
  cmd->add_option_function<int>("--timeout-ms", [](const int& ms) { set_default_timeout_ms(ms); },
                                "per-call time limit of plugin: and exec: implementations for the largest cases; "
                                "smaller cases get less, from a tenth of it (docs/protocol.md) (default 10000)");
  cmd->add_option("--threads", args->threads, "thread hint for the implementation (0: all)")->capture_default_str();
  cmd->add_option("--failures-dir", args->failures_dir,
                  "where shrunk failing cases are written (default: ./attncheck-failures in the current directory)");
  cmd->add_option("--shard", args->shard,
                  "run only shard I of N (e.g. 2/3): the N shards together run exactly the unsharded run's cases; "
                  "merge their --json files with `attncheck report --verify` (docs/ci.md)");
  cmd->add_option("--case-chunks", args->case_chunks,
                  "split each property's cases into this many chunks, the units --shard distributes (give every "
                  "shard the same value)")
      ->capture_default_str();
  cmd->add_option("--time-budget", args->time_budget,
                  "stop drawing cases once the run took this many seconds (0: no budget); properties cut short are "
                  "named and the verdict is not a pass")
      ->capture_default_str();
  cmd->add_option("--property-time-budget", args->property_time_budget,
                  "stop a property drawing cases once it took this many seconds (0: no budget)")
      ->capture_default_str();
  cmd->add_flag("--list", args->list, "list implementations and properties");
  cmd->add_flag("--power", args->power, "measure the bound's tightness (fused, naive-fp32) and the smallest relative error caught, n = 16 … 4096; JSON to --json or --power-json");
  cmd->add_option("--power-json", args->power_json, "with --power: write its JSON here");
  cmd->add_option("--max-bytes", args->max_bytes, "refuse sizes whose buffers would need more memory (K, M, G, T)")->capture_default_str();
  cmd->callback([args] { run(*args); });
}

}  // namespace attncheck::cli
