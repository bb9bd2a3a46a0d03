// Decoding of the exec: protocol's text lines (docs/protocol.md): the
// handshake and the reply header. Pure functions of the bytes received, apart
// from the process handling in exec_client.cpp, so they can be fuzzed.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace attncheck::plugin_detail {

/// A line that breaks the protocol; the message says what was wrong.
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Printable excerpt (at most 80 characters, others as \xNN) of what a child sent.
std::string excerpt(std::string_view text);

struct Handshake {
  std::string name;
  uint32_t features = 0;  ///< ATTN_FEATURE_* bits
  int32_t precision = 0;  ///< ATTN_PRECISION_*
};

/// The handshake line (without its newline). Throws ProtocolError.
Handshake decode_handshake(std::string_view line);

struct ReplyHeader {
  std::string status;   ///< "ok", "invalid", "unsupported" or "error"
  std::string message;  ///< empty when absent
  std::optional<double> compute_seconds;  ///< the child's own compute time, when it sent one
};

/// A reply header line (without its newline) to the case `expected_id`.
/// Throws ProtocolError for anything but a JSON object with that id and a
/// known status, or a compute_seconds that is not a finite number >= 0.
ReplyHeader decode_reply_header(std::string_view line, uint64_t expected_id);

}  // namespace attncheck::plugin_detail
