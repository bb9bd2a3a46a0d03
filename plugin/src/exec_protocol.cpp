#include "exec_protocol.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "abi.h"
#include "attn_plugin.h"
#include "attncheck/plugin.h"

namespace attncheck::plugin_detail {
namespace {

using json = nlohmann::json;

json parse_line(std::string_view line, const char* what) {
  json parsed = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded())
    throw ProtocolError(fmt::format("the {} is not JSON: \"{}\"", what, excerpt(line)));
  return parsed;
}

}  // namespace

std::string excerpt(std::string_view text) {
  std::string shown;
  for (char c : text.substr(0, 80)) {
    if (c >= 32 && c < 127) shown += c;
    else shown += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  }
  return text.size() > 80 ? shown + "..." : shown;
}

Handshake decode_handshake(std::string_view line) {
  const json hello = parse_line(line, "handshake");
  if (!hello.is_object()) throw ProtocolError("the handshake is not a JSON object");
  const auto field = [&](const char* key) -> const json& {
    if (!hello.contains(key)) throw ProtocolError(fmt::format("the handshake has no \"{}\"", key));
    return hello[key];
  };
  const json& version = field("abi_version");
  if (!version.is_number_integer() || version.get<int64_t>() != ATTN_PLUGIN_ABI_VERSION)
    throw ProtocolError(fmt::format("speaks protocol/ABI version {}, but this attncheck speaks version {}",
                                    excerpt(version.dump()), ATTN_PLUGIN_ABI_VERSION));
  Handshake h;
  const json& name = field("name");
  if (!name.is_string() || name.get<std::string>().empty())
    throw ProtocolError("the handshake's \"name\" must be a non-empty string");
  h.name = name.get<std::string>();
  const json& list = field("features");
  if (!list.is_array()) throw ProtocolError("the handshake's \"features\" must be an array of names");
  for (const json& f : list) {
    const auto& names = feature_names();
    const auto it = f.is_string() ? std::find(names.begin(), names.end(), f.get<std::string>()) : names.end();
    if (it == names.end())
      throw ProtocolError(fmt::format("unknown feature {} in the handshake (known: {})", excerpt(f.dump()),
                                      fmt::join(names, ", ")));
    h.features |= 1u << (it - names.begin());
  }
  const json& precision = field("precision");
  h.precision = precision.is_string() ? precision_from_name(precision.get<std::string>()) : -1;
  if (h.precision < 0)
    throw ProtocolError(fmt::format("precision {} is not \"fp32\", \"bf16\" or \"fp16\"",
                                    excerpt(precision.dump())));
  return h;
}

ReplyHeader decode_reply_header(std::string_view line, uint64_t expected_id) {
  const json reply = parse_line(line, "reply header");
  if (!reply.is_object() || !reply.contains("id") || reply["id"] != expected_id)
    throw ProtocolError(
        fmt::format("reply header has no \"id\": {} (expected {})", excerpt(reply.dump()), expected_id));
  ReplyHeader r;
  // A status or message of another type is off-protocol, not a crash of attncheck.
  if (reply.contains("status") && !reply["status"].is_string())
    throw ProtocolError(fmt::format("reply \"status\" is not a string: {}", excerpt(reply["status"].dump())));
  r.status = reply.value("status", "");
  if (reply.contains("message") && reply["message"].is_string()) r.message = reply["message"].get<std::string>();
  if (r.status != "ok" && r.status != "invalid" && r.status != "unsupported" && r.status != "error")
    throw ProtocolError(fmt::format("reply status is \"{}\"; expected ok, invalid, unsupported or error",
                                    excerpt(r.status)));
  if (reply.contains("compute_seconds")) {
    const json& seconds = reply["compute_seconds"];
    if (!seconds.is_number() || !std::isfinite(seconds.get<double>()) || seconds.get<double>() < 0)
      throw ProtocolError(fmt::format("reply \"compute_seconds\" is {}; it must be a finite number of "
                                      "seconds >= 0", excerpt(seconds.dump())));
    r.compute_seconds = seconds.get<double>();
  }
  return r;
}

}  // namespace attncheck::plugin_detail
