// attncheck report: rebuilds report.json, report.md and report.html from the
// JSON that `attncheck bench --json`, `attncheck verify --json` and
// `attncheck verify --power --json` wrote.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "attncheck/report.h"
#include "commands.h"

namespace attncheck::cli {

void add_report_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "report", "Write report.json, report.md and report.html (gnuplot charts inline) from bench, verify and power JSON");
  auto inputs = std::make_shared<ReportInputs>();
  auto out_dir = std::make_shared<std::string>("attncheck-report");
  cmd->add_option("--bench", inputs->bench_files, "Google Benchmark JSON from `attncheck bench --json` (repeatable)");
  cmd->add_option("--verify", inputs->verify_files, "verify JSON from `attncheck verify --json` (repeatable)");
  cmd->add_option("--power", inputs->power_file,
                  "power JSON from `attncheck verify --power --json`: error/bound and smallest ε caught vs n (its "
                  "rows are also the Error vs n of the implementations they measure)");
  cmd->add_option("-o,--output", *out_dir, "directory to write the report into")->capture_default_str();
  cmd->add_option("--gnuplot", inputs->gnuplot, "gnuplot program to draw the charts with")->capture_default_str();
  cmd->callback([inputs, out_dir] {
    const ReportResult result = write_report(*inputs, *out_dir);
    if (!result.headline.empty()) fmt::print("{}\n", format_headline(result.headline));
    fmt::print("report: {}\n        {}\n        {}\n", result.html_path, result.markdown_path, result.json_path);
  });
}

}  // namespace attncheck::cli
