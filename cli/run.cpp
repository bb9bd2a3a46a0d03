// attncheck run: the main job. Checks the reference against the chapter's
// golden cases, verifies the fused path (and any --impl), benchmarks it against
// its peers, and writes the report (report.json, report.md, report.html).
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "attncheck/bench.h"
#include "attncheck/golden.h"
#include "attncheck/pages.h"
#include "attncheck/power.h"
#include "attncheck/registry.h"
#include "attncheck/report.h"
#include "attncheck/verify.h"
#include "commands.h"

namespace attncheck::cli {
namespace {

struct RunArgs {
  bool quick = false;
  std::vector<std::string> impls;  ///< extra implementations, verified and benchmarked too
  std::string out_dir = "attncheck-report";
  std::optional<uint64_t> seed;
};

using Clock = std::chrono::steady_clock;

// One line per golden case; returns the number that failed.
int print_golden_check() {
  fmt::print("Golden cases: the reference at 50 digits (mp50) and in double against each exact answer\n");
  fmt::print("(error = worst |got - exact| / max(1, |exact|) over A and O, and |row sum of A - 1|)\n\n");
  const std::vector<GoldenResult> results = check_golden_cases();
  int failed = 0;
  for (const GoldenResult& r : results) {
    if (!r.pass) ++failed;
    fmt::print("{} {:<11} mp50 {:8.1e} (<= {:.0e})  double {:8.1e} (<= {:.0e})  {}\n",
               r.pass ? "PASS" : "FAIL", r.name, r.error_mp50, r.tolerance_mp50, r.error_double,
               r.tolerance_double, r.checked);
  }
  fmt::print("\n{} of {} golden cases passed\n", results.size() - static_cast<size_t>(failed),
             results.size());
  return failed;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error(fmt::format("cannot write '{}'", path));
}

// Verifies one implementation and writes its verify JSON; returns whether all passed.
bool verify_one(const std::string& spec, const VerifyOptions& base, const std::string& json_path,
                Clock::time_point start) {
  auto impl = make_implementation(spec);
  VerifyReport report;
  report.implementation = impl->name();
  report.declared_name = impl->declared_name();
  report.precision = impl->precision();
  report.capabilities = impl->capabilities();
  report.options = base;
  const auto& properties = all_properties();
  fmt::print("\nverifying {} ({}{}): {} properties, {} cases each, seed {}\n", impl->name(),
             report.declared_name.empty() ? "" : fmt::format("\"{}\", ", report.declared_name),
             to_string(impl->precision()), properties.size(), base.cases, base.seed);
  // run_verify, not one run_property per property: the properties of one run
  // share what a hang taught (only the first shrinks a timeout).
  VerifyOptions options = base;
  size_t done = 0;
  options.on_property = [&](const PropertyResult& r) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    std::string counts;  // the cases the count leaves out
    if (r.inconclusive > 0) counts += fmt::format("  {} inconclusive", r.inconclusive);
    if (r.unsupported > 0 && r.status != Status::skipped)
      counts += fmt::format("{} {} declined (out of range)", counts.empty() ? " " : ",", r.unsupported);
    if (r.timed_out > 0) counts += fmt::format("{} {} timed out", counts.empty() ? " " : ",", r.timed_out);
    fmt::print("  [{:>2}/{}] {:<28} {:<12} {:>5} cases  error/bound {:<9} ({:.0f} s elapsed){}\n", ++done,
               properties.size(), r.name, to_string(r.status), r.cases,
               r.worst_ratio ? fmt::format("{:.3g}", *r.worst_ratio) : "-", elapsed, counts);
    if (r.status != Status::passed && r.status != Status::skipped) {
      fmt::print("         {}\n", r.message);
      if (!r.case_file.empty())
        fmt::print("         case file: {}\n         replay: {}\n", r.case_file,
                   shell_command({"attncheck", "verify", "--impl", spec, "--replay", r.case_file}));
    }
    std::fflush(stdout);
  };
  report.properties = run_verify(*impl, options).properties;
  report.error_vs_n = error_versus_n(*impl, {16, 64, 256});
  fmt::print("  {}\n", summary_line(report));
  write_text(json_path, verify_json(report));
  return all_passed(report);
}

// Sends stdout and stderr (Google Benchmark's console table, its context and
// its warnings) to a log file while it lives; terminal() still reaches the
// terminal, for one progress line per benchmark.
class ConsoleLog {
 public:
  ConsoleLog(const std::string& path, bool truncate) {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    fd_ = open(path.c_str(), O_WRONLY | O_CREAT | (truncate ? O_TRUNC : O_APPEND), 0644);
    if (fd_ < 0) throw std::runtime_error(fmt::format("cannot write the benchmark log '{}'", path));
    saved_out_ = dup(1);
    saved_err_ = dup(2);
    terminal_ = fdopen(dup(saved_out_), "w");
    dup2(fd_, 1);
    dup2(fd_, 2);
  }
  ~ConsoleLog() {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    dup2(saved_out_, 1);
    dup2(saved_err_, 2);
    close(saved_out_);
    close(saved_err_);
    close(fd_);
    if (terminal_) std::fclose(terminal_);
  }
  ConsoleLog(const ConsoleLog&) = delete;
  ConsoleLog& operator=(const ConsoleLog&) = delete;
  FILE* terminal() const { return terminal_ ? terminal_ : stdout; }

 private:
  int fd_ = -1, saved_out_ = -1, saved_err_ = -1;
  FILE* terminal_ = nullptr;
};

// Runs the benchmarks with one line per benchmark on the terminal (k of N,
// elapsed, estimated time left) and Google Benchmark's whole console in `log`.
void run_benchmarks_logged(BenchOptions options, const std::string& log, bool truncate) {
  const auto start = Clock::now();
  Clock::time_point first;  // when the first benchmark finished (the probes before it are not benchmarks)
  size_t finished = 0, total = 0;
  {
    ConsoleLog console(log, truncate);
    options.progress = false;
    options.on_progress = [&](size_t done, size_t n, const std::string& name) {
      const auto now = Clock::now();
      if (done == 1) first = now;
      const double elapsed = std::chrono::duration<double>(now - start).count();
      const double per = done > 1 ? std::chrono::duration<double>(now - first).count() / static_cast<double>(done - 1)
                                  : elapsed;
      const double left = n > done ? per * static_cast<double>(n - done) : 0;
      fmt::print(console.terminal(), "  [{:>3}/{}] {:<52} {:>5.0f} s elapsed, about {:.0f} s left\n", done, n, name,
                 elapsed, left);
      std::fflush(console.terminal());
      finished = done;
      total = n;
    };
    run_benchmarks(options);
  }
  fmt::print("  {} benchmarks in {:.0f} s{}; Google Benchmark's full console: {}\n", finished,
             std::chrono::duration<double>(Clock::now() - start).count(),
             finished < total ? fmt::format(" ({} of the {} registered reported no run)", total - finished, total) : "",
             log);
  // Debian builds the Google Benchmark library without NDEBUG, so its console
  // warns about it; say once what that warning is about.
  static bool explained = false;
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  if (!explained && text.str().find("Library was built as DEBUG") != std::string::npos) {
    explained = true;
    fmt::print("  note: the log's \"***WARNING*** Library was built as DEBUG\" is about Debian's build of the Google "
               "Benchmark library (its timing harness), not about attncheck: the code measured is attncheck's own, "
               "built {}\n",
               run_context(1)["flags"].get<std::string>());
  }
}

std::string file_safe(std::string name) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  return name;
}

void run_main_job(const RunArgs& args) {
  const auto start = Clock::now();
  const std::filesystem::path out(args.out_dir);
  const std::filesystem::path work = out / "data";
  std::filesystem::create_directories(work);

  fmt::print("== 1/4 golden cases of the chapter ==\n");
  const int golden_failed = print_golden_check();

  fmt::print("\n== 2/4 verification ==\n");
  VerifyOptions verify;
  verify.seed = args.seed ? *args.seed : std::random_device{}();
  verify.cases = args.quick ? 20 : 100;
  verify.failures_dir = (out / "failures").string();
  verify.on_case_written = write_case_page_beside;  // report.html links each failure to its page
  std::vector<std::string> impls{"fused"};
  impls.insert(impls.end(), args.impls.begin(), args.impls.end());
  ReportInputs report_inputs;
  bool verified = true;
  for (const std::string& spec : impls) {
    const std::string json = (work / fmt::format("verify-{}.json", file_safe(spec))).string();
    verified = verify_one(spec, verify, json, start) && verified;
    report_inputs.verify_files.push_back(json);
  }
  // The tolerance model's tightness and power vs n (the report's Error vs n and
  // its own section); --quick stops at n = 256.
  fmt::print("\n-- tightness and power of the tolerance model --\n");
  PowerOptions power;
  if (args.quick) power.sizes = {16, 64, 256};
  report_inputs.power_file = (work / "power.json").string();
  run_power(power, report_inputs.power_file);

  fmt::print("\n== 3/4 benchmarks ==\n");
  BenchOptions bench;
  // fma-floor: the useful flops as FMAs alone, timed beside fused (the report's × FMA floor).
  bench.impls = {"fused", "fma-floor", "naive-openblas", "naive-eigen", "reference-double"};
  bench.impls.insert(bench.impls.end(), args.impls.begin(), args.impls.end());
  bench.masks = {"none", "causal"};
  if (args.quick) {
    bench.n = {64, 128, 256, 512, 1024};
    bench.repetitions = 1;
    bench.min_time = 0.05;
  } else {
    bench.n = {64, 128, 256, 512, 1024, 2048, 4096};
    bench.repetitions = 3;
    bench.min_time = 0.2;
  }
  bench.json_path = (work / "bench.json").string();
  const std::string bench_log = (out / "bench-console.log").string();
  run_benchmarks_logged(bench, bench_log, /*truncate=*/true);
  report_inputs.bench_files.push_back(bench.json_path);

  // Decode and cross shapes (a few to a few hundred query rows against a long
  // KV cache, 8 heads, d = 128): the fewest rows are memory-bound, judged by
  // bytes moved against the measured read bandwidth and against read-floor (a
  // read of the same bytes timed in the same run), the most bound by the FMA
  // peak (and judged against fma-floor likewise). Their own file; the report
  // charts each point against the roof that binds it.
  fmt::print("\n-- decode shapes --\n");
  BenchOptions decode = bench;
  decode.impls = args.quick ? std::vector<std::string>{"fused", "read-floor", "fma-floor"}
                            : std::vector<std::string>{"fused", "read-floor", "fma-floor", "naive-openblas"};
  decode.impls.insert(decode.impls.end(), args.impls.begin(), args.impls.end());
  decode.masks = {"none"};
  decode.n.clear();
  decode.d = {128};
  decode.heads = 8;
  decode.n_q = args.quick ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1, 4, 16, 64, 256};
  // Quick: 32 MB of K and V, about the last-level cache of many machines, so
  // closer to a cache roof; the full run goes well beyond it.
  decode.n_k = args.quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{4096, 16384, 65536};
  decode.threads = {1};
  if (!args.quick && std::thread::hardware_concurrency() > 1)
    decode.threads.push_back(std::thread::hardware_concurrency());
  // The floors also timed call by call beside each implementation: on a
  // shared machine, ratios to floors timed whole repetitions apart moved by a
  // third between runs minutes apart, ratios to floors timed beside each call
  // far less (docs/performance-decode.md, "Both floors beside fused").
  decode.paired_floors = true;
  decode.json_path = (work / "bench-decode.json").string();
  try {
    run_benchmarks_logged(decode, bench_log, /*truncate=*/false);
    report_inputs.bench_files.push_back(decode.json_path);
  } catch (const std::exception& e) {  // e.g. a third-party --impl without cross shapes
    fmt::print(stderr, "note: decode shapes: {} (the report does not use them; continuing)\n", e.what());
  }

  // Thread scaling of prefill: fused and fma-floor on 1 thread and on every
  // CPU, in one file so that the report sets fused's speed-up beside the
  // floor's own on the same shape (what the CPUs give together, rather than
  // their count). d = 128, so that its series do not repeat the d = 64 ones.
  if (const unsigned cpus = std::thread::hardware_concurrency(); cpus > 1) {
    fmt::print("\n-- thread scaling --\n");
    BenchOptions scaling = bench;
    scaling.impls = {"fused", "fma-floor"};
    scaling.masks = {"none"};
    scaling.d = {128};
    scaling.n = args.quick ? std::vector<int64_t>{512} : std::vector<int64_t>{1024, 2048, 4096};
    scaling.threads = {1, static_cast<int64_t>(cpus)};
    scaling.paired_floors = true;  // as the decode shapes
    scaling.json_path = (work / "bench-threads.json").string();
    run_benchmarks_logged(scaling, bench_log, /*truncate=*/false);
    report_inputs.bench_files.push_back(scaling.json_path);
  }

  fmt::print("\n== 4/4 report ==\n");
  const ReportResult result = write_report(report_inputs, out.string());
  fmt::print("{}\n", format_headline(result.headline));
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  fmt::print("report: {}\n        {}\n        {}\n", result.html_path, result.markdown_path,
             result.json_path);
  fmt::print("finished in {:.0f} s\n", elapsed);

  if (golden_failed > 0)
    throw CLI::RuntimeError(fmt::format("{} golden case(s) failed", golden_failed), 1);
  if (!verified) throw CLI::RuntimeError("verification failed (see the report)", 1);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "The main job: golden cases, verify the fused path, benchmark it against its peers, "
      "write the report");
  cmd->add_flag("--quick", args->quick, "reduced run (fewer cases, n up to 1024, one repetition)");
  cmd->add_option("--impl", args->impls,
                  "another implementation to verify and benchmark beside fused (repeatable)");
  cmd->add_option("-o,--output", args->out_dir, "report directory")->capture_default_str();
  cmd->add_option("--seed", args->seed, "verification seed (default: a fresh one, printed)");
  cmd->callback([args] { run_main_job(*args); });
}

}  // namespace attncheck::cli
