// Each subcommand of the attncheck CLI lives in its own file and registers itself here.
#pragma once

#include <CLI/CLI.hpp>

namespace attncheck::cli {

/// Adds one subcommand to the app. The callback it installs does the work and
/// reports failure by throwing (InvalidInput for bad input, CLI::RuntimeError
/// with an exit code for a failed check).
void add_explain_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_verify_command(CLI::App& app);
/// Global --list-targets and --target NAME (SIMD target of the fused attention).
void add_target_options(CLI::App& app);
void add_report_command(CLI::App& app);
/// attncheck lab -o DIR: the chapter's lab as DIR/lab.html.
void add_lab_command(CLI::App& app);

}  // namespace attncheck::cli
