// attncheck explain: the nine tables of one slice of a case, from the reference.
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "attncheck/case.h"
#include "attncheck/explain.h"
#include "attncheck/golden.h"
#include "attncheck/pages.h"
#include "attncheck/registry.h"
#include "attncheck/verify.h"
#include "budget.h"
#include "commands.h"
#include "parse_number.h"

namespace attncheck::cli {
namespace {

// Options are read as text and converted here, so that a bad value is an
// InvalidInput naming the option (exit 2) like every other bad input.
struct ExplainArgs {
  std::string case_name, input, digits = "6", temperature, causal, batch = "0", head = "0";
  std::string impl;  // when set, its output is shown beside the reference's
  std::string html;  // when set, the case page is written there instead of printing the tables
  std::string max_bytes = kDefaultMaxBytes;
};

void run_explain(const ExplainArgs& a) {
  if (a.case_name.empty() == a.input.empty())
    throw InvalidInput(fmt::format("explain: give exactly one of --case ({}) or --input FILE.json",
                                   fmt::join(builtin_case_names(), "|")));
  ExplainOptions o;
  o.digits = parse_number<int>(a.digits, "--digits");
  o.batch = parse_number<int64_t>(a.batch, "--batch");
  o.head = parse_number<int64_t>(a.head, "--head");
  precision_for_digits(o.digits);  // rejects a bad --digits before any file is read
  const int64_t max_bytes = parse_byte_count(a.max_bytes);

  Case c = a.input.empty() ? builtin_case(a.case_name) : read_case_file(a.input);
  if (!a.temperature.empty()) {
    const double tau = parse_number<double>(a.temperature, "--temperature");
    if (!(std::isfinite(tau) && tau > 0))
      throw InvalidInput(fmt::format("option --temperature is {}; it must be finite and > 0", tau));
    c.problem.temperature = tau;
  }
  if (!a.causal.empty()) c.problem.causal = parse_causal(a.causal, "--causal");
  check_memory_budget(c.problem.shape, true, kReferenceScoreBytes, max_bytes, "explain: the case");
  const std::string title =
      a.input.empty() ? fmt::format("case {}", a.case_name) : fmt::format("case file {}", a.input);
  auto implementation = a.impl.empty() ? nullptr : make_implementation(a.impl);
  if (!a.html.empty()) {
    CasePageOptions page;
    page.batch = o.batch;
    page.head = o.head;
    page.title = title;
    write_page(case_page_html(c, implementation.get(), page), a.html, "--html");
    fmt::print("case page: {}\n", a.html);
    return;
  }
  fmt::print("{}", explain(c, o, title));
  if (implementation) {
    fmt::print("\nimplementation {} beside the reference:\n", implementation->name());
    fmt::print("{}", format_slice_comparison(compare_slice(*implementation, c, o.batch, o.head)));
  }
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
  cmd->add_option("--temperature", args->temperature, "Override the temperature τ (> 0)");
  cmd->add_option("--causal", args->causal, "Override the causal mask: none|top_left|bottom_right");
  cmd->add_option("--batch", args->batch, "Batch index of the slice shown")->capture_default_str();
  cmd->add_option("--head", args->head, "Head index of the slice shown")->capture_default_str();
  cmd->add_option("--impl", args->impl, "Also run this implementation and show its output beside the reference's");
  cmd->add_option("--html", args->html,
                  "Write the case's page (the nine tables, heatmaps, and with --impl the cells beyond their bound "
                  "marked) to this HTML file instead of printing");
  cmd->add_option("--max-bytes", args->max_bytes, "Refuse cases whose tables would need more memory (K, M, G, T)")->capture_default_str();
  cmd->callback([args] { run_explain(*args); });
}

}  // namespace attncheck::cli
