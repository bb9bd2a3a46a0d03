// plugin:PATH and exec:COMMAND in the implementation registry (--impl).
#include "attncheck/plugin.h"
#include "attncheck/registry.h"

namespace attncheck {

void register_plugin_implementations() {
  register_implementation(
      "plugin:", [](const std::string& path) { return load_plugin(path); },
      "a C plugin (attn_plugin.h) loaded from PATH; calls run in a worker child process, "
      "replaced after a fault (per-call limit scaled by size, at most --timeout-ms)");
  register_implementation(
      "exec:", [](const std::string& command) { return start_exec(command); },
      "a program speaking the subprocess protocol (docs/protocol.md), run as /bin/sh -c COMMAND");
}

}  // namespace attncheck
