// Out-of-process implementations: a C plugin (attn_plugin.h) loaded with
// dlopen and called in a persistent worker child over shared memory, and any
// program that speaks the subprocess protocol (docs/protocol.md) as one
// persistent child. Both replace their child after a fault.
// Both report crashes, hangs, writes out of bounds or into the inputs and
// unwritten outputs by throwing ImplementationFault from forward().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/implementation.h"
#include "attncheck/problem.h"

namespace attncheck {

/// Limits of one out-of-process implementation.
struct OutOfProcessOptions {
  /// Per forward call, for the largest problems: each call's limit scales
  /// with its size (call_timeout_ms); a child still running after it is
  /// killed (timed_out).
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

/// The time limit of one forward call of `shape`, in ms: a tenth of
/// `timeout_ms`, plus `start_up_ms` (start_up_allowance_ms), plus 1 ms per
/// 10 000 floating-point operations of the problem (10 MFLOP/s, far below any
/// real implementation even on a loaded machine), at most `timeout_ms`. So
/// with the default 10 s a small case that hangs in a running child is killed
/// after 1 s, and only the largest cases get all of timeout_ms.
int call_timeout_ms(const Shape& shape, int timeout_ms, int start_up_ms);
/// The extra time of a call that starts a fresh child, which pays the
/// implementation's first-call costs (lazy imports, thread pools, JIT): the
/// whole `timeout_ms` for the run's first call, then (a child restarted after
/// a fault) twice what that first call took, at least a tenth of
/// `timeout_ms`; 0 for a child that has answered before.
int start_up_allowance_ms(bool fresh_child, std::optional<double> first_call_ms, int timeout_ms);

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
