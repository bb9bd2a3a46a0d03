// attncheck lab -o DIR: writes DIR/lab.html, the chapter's interactive
// experiment (docs/lab.md), with every state computed by the reference.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "attncheck/pages.h"
#include "commands.h"

namespace attncheck::cli {

void add_lab_command(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "lab", "Write DIR/lab.html: the chapter's lab (five tokens; query row, temperature and causal mask; "
             "the nine tables and a heatmap of A), one self-contained page");
  cmd->add_option("-o,--output", *dir, "directory to write lab.html into (created if missing)")->required();
  cmd->callback([dir] { fmt::print("lab: {}\n", write_lab_page(*dir)); });
}

}  // namespace attncheck::cli
