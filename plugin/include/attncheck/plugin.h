// Out-of-process implementations: a C plugin (attn_plugin.h) loaded with
// dlopen and called in a forked child per forward call, and any program that
// speaks the subprocess protocol (docs/protocol.md) as one persistent child.
// Both report crashes, hangs, writes out of bounds or into the inputs and
// unwritten outputs by throwing ImplementationFault from forward().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attncheck/implementation.h"

namespace attncheck {

/// Limits of one out-of-process implementation.
struct OutOfProcessOptions {
  /// Per forward call; a child still running after it is killed (timed_out).
  int timeout_ms = 10000;
  /// For an exec: child to start and send its handshake line (imports can be slow).
  int startup_timeout_ms = 60000;
};

/// The per-call timeout used when none is given: ATTNCHECK_TIMEOUT_MS from the
/// environment if set, else what set_default_timeout_ms() set, else 10000.
int default_timeout_ms();
/// Sets the default per-call timeout (the CLI's --timeout-ms); must be > 0.
void set_default_timeout_ms(int timeout_ms);
/// OutOfProcessOptions with the default timeout.
OutOfProcessOptions default_out_of_process_options();

/// Loads the plugin at `path` (dlopen, attn_plugin_init). Throws InvalidInput
/// naming the path for a missing file, a missing entry point, an ABI version
/// other than ATTN_PLUGIN_ABI_VERSION (both numbers in the message) or an
/// unknown precision class.
std::unique_ptr<Implementation> load_plugin(const std::string& path,
                                            const OutOfProcessOptions& options = default_out_of_process_options());

/// Starts `/bin/sh -c command` and reads its handshake. Throws InvalidInput
/// naming the command when the child dies, times out or sends a malformed
/// handshake.
std::unique_ptr<Implementation> start_exec(const std::string& command,
                                           const OutOfProcessOptions& options = default_out_of_process_options());

/// ATTN_FEATURE_* bits as Capabilities (threads is always false).
Capabilities capabilities_from_features(uint32_t features);
/// The protocol's feature names, in bit order: "cross", "dv_ne_dk", ...,
/// "weights" (the Capabilities field names).
const std::vector<std::string>& feature_names();
/// Names of the features a capability set lacks, for "skipped" reports.
std::vector<std::string> missing_features(const Capabilities& capabilities);

/// Registers "plugin:" and "exec:" with the implementation registry.
void register_plugin_implementations();

}  // namespace attncheck
