// attncheck explain: the nine tables of one slice of a case, from the reference.
#include <fmt/format.h>

#include <string>

#include "attncheck/case.h"
#include "attncheck/explain.h"
#include "attncheck/golden.h"
#include "commands.h"

namespace attncheck::cli {
namespace {

struct ExplainArgs {
  std::string case_name;
  std::string input;
  int digits = 6;
  double temperature = 1;
  bool temperature_given = false;
  std::string causal;
  int64_t batch = 0;
  int64_t head = 0;
};

void run_explain(const ExplainArgs& a) {
  if (a.case_name.empty() == a.input.empty())
    throw InvalidInput(fmt::format("explain: give exactly one of --case ({}) or --input FILE.json",
                                   fmt::join(builtin_case_names(), "|")));
  Case c = a.input.empty() ? builtin_case(a.case_name) : read_case_file(a.input);
  const std::string title =
      a.input.empty() ? fmt::format("case {}", a.case_name) : fmt::format("case file {}", a.input);
  if (a.temperature_given) c.problem.temperature = a.temperature;
  if (!a.causal.empty()) c.problem.causal = parse_causal(a.causal, "--causal");
  ExplainOptions o;
  o.digits = a.digits;
  o.batch = a.batch;
  o.head = a.head;
  fmt::print("{}", explain(c, o, title));
}

}  // namespace

void add_explain_command(CLI::App& app) {
  auto args = std::make_shared<ExplainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "explain", "Print the nine tables (Q, K, V, R, S, M, L, A, O) of one case from the reference");
  cmd->add_option("--case", args->case_name,
                  "A built-in case from the chapter: seed-1, seed-2, exercise-1 ... exercise-4");
  cmd->add_option("--input", args->input, "A case file (JSON, see docs/case-format.md)");
  cmd->add_option("--digits", args->digits,
                  "Significant digits printed (1-95); also picks the precision: <=12 double, "
                  "<=16 long double, <=45 mp50, else mp100")
      ->capture_default_str();
  CLI::Option* temperature =
      cmd->add_option("--temperature", args->temperature, "Override the temperature τ (> 0)");
  cmd->add_option("--causal", args->causal, "Override the causal mask: none|top_left|bottom_right");
  cmd->add_option("--batch", args->batch, "Batch index of the slice shown")->capture_default_str();
  cmd->add_option("--head", args->head, "Head index of the slice shown")->capture_default_str();
  cmd->callback([args, temperature] {
    args->temperature_given = temperature->count() > 0;
    run_explain(*args);
  });
}

}  // namespace attncheck::cli
