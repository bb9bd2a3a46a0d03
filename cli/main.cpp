// attncheck: verifies and benchmarks scaled dot-product attention.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "attncheck/plugin.h"
#include "attncheck/problem.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"attncheck: verifies and benchmarks scaled dot-product attention"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "attncheck 0.1.0");
  attncheck::register_plugin_implementations();  // plugin:PATH and exec:COMMAND for --impl
  // subcommands are registered here
  attncheck::cli::add_verify_command(app);
  attncheck::cli::add_target_options(app);
  attncheck::cli::add_report_command(app);
  attncheck::cli::add_bench_command(app);
  attncheck::cli::add_run_command(app);
  attncheck::cli::add_explain_command(app);
  attncheck::cli::add_lab_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code >= 100 ? 2 : code;  // CLI11 usage errors (codes 100-127) exit 2 like every bad input
  } catch (const attncheck::InvalidInput& e) {
    fmt::print(stderr, "attncheck: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "attncheck: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
