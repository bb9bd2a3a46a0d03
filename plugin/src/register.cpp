// plugin:PATH and exec:COMMAND in the implementation registry (--impl).
#include "attncheck/plugin.h"
#include "attncheck/registry.h"

namespace attncheck {

void register_plugin_implementations() {
  register_implementation(
      "plugin:", [](const std::string& path) { return load_plugin(path); },
      "a C plugin (attn_plugin.h) loaded from PATH; each call runs in a child process "
      "(--timeout-ms per call)");
  register_implementation(
      "exec:", [](const std::string& command) { return start_exec(command); },
      "a program speaking the subprocess protocol (docs/protocol.md), run as /bin/sh -c COMMAND");
}

}  // namespace attncheck
