// Global options that choose the SIMD target of the fused attention:
// --list-targets prints the targets, --target forces one for the whole run.
#include <fmt/format.h>

#include <string>

#include "attncheck/attention.h"
#include "commands.h"

namespace attncheck::cli {

void add_target_options(CLI::App& app) {
  // Both act while the command line is parsed (trigger_on_parse): --target is
  // in force before any subcommand runs, and --list-targets works without a
  // subcommand (it ends the parse with CLI::Success, exit code 0, as
  // --version does).
  app.add_option_function<std::string>(
         "--target", [](const std::string& name) { force_target(name); },
         "Force the SIMD target of the fused attention (one of --list-targets)")
      ->type_name("NAME")
      ->trigger_on_parse();
  app.add_flag_callback(
         "--list-targets",
         [] {
           const std::string active = active_target();
           for (const std::string& name : available_targets())
             fmt::print("{}{}\n", name, name == active ? " (active)" : "");
           throw CLI::Success();
         },
         "Print the SIMD targets this binary can use on this CPU, best first, marking the active one")
      ->trigger_on_parse();
}

}  // namespace attncheck::cli
