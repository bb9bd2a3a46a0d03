// libFuzzer target: the exec: protocol's line decoders (plugin/src/exec_protocol.h)
// on any bytes a child might send. Each either decodes or throws ProtocolError
// with a message; nothing else escapes and nothing crashes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "attn_plugin.h"
#include "exec_protocol.h"

using namespace attncheck::plugin_detail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  try {
    const Handshake h = decode_handshake(line);
    if (h.name.empty() || h.precision < 0) std::abort();  // accepted only when well-formed
    if (h.features >> 12) std::abort();                     // only the 12 known feature bits
  } catch (const ProtocolError& e) {
    if (std::string_view(e.what()).empty()) std::abort();
  }
  try {
    const ReplyHeader r = decode_reply_header(line, 1);
    if (r.status != "ok" && r.status != "invalid" && r.status != "unsupported" && r.status != "error")
      std::abort();
  } catch (const ProtocolError& e) {
    if (std::string_view(e.what()).empty()) std::abort();
  }
  return 0;
}
