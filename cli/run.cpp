// attncheck run: for now, explain worked example 2 and check the reference
// against every golden case of the chapter.
#include <fmt/format.h>

#include "attncheck/explain.h"
#include "attncheck/golden.h"
#include "commands.h"

namespace attncheck::cli {
namespace {

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

}  // namespace

void add_run_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "run", "Explain the chapter's worked example 2, then check the reference's golden cases");
  cmd->callback([] {
    fmt::print("{}\n\n", explain(builtin_case("seed-2"), {}, "Worked example 2 (case seed-2)"));
    const int failed = print_golden_check();
    if (failed > 0)
      throw CLI::RuntimeError(fmt::format("{} golden case(s) failed", failed), 1);
  });
}

}  // namespace attncheck::cli
