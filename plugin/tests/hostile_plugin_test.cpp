// Hostile plugins and hostile exec: children not covered by loader_test.cpp and
// exec_test.cpp: broken attn_plugin descriptions, and protocol lines that are
// malformed, of the wrong type, oversized or cut off by the child's exit.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "attncheck/plugin.h"
#include "exec_protocol.h"

using namespace attncheck;
using namespace attncheck::plugin_detail;

namespace {

std::string broken_plugin(int which) {
  return std::string(ATTNCHECK_PLUGIN_DIR) + "/libattn_broken_info_" + std::to_string(which) + "_plugin.so";
}

const char* kHandshake =
    R"({"abi_version":1,"name":"sh-child","features":["cross","dv_ne_dk","batch_heads","causal_top_left"],"precision":"fp32"})";

OutOfProcessOptions quick() {
  OutOfProcessOptions options;
  options.timeout_ms = 5000;
  options.startup_timeout_ms = 5000;
  return options;
}

}  // namespace

TEST_CASE("a plugin whose name is NULL or empty is refused, saying so") {
  CHECK_THROWS_WITH(load_plugin(broken_plugin(1)), Catch::Contains("name is empty"));
  CHECK_THROWS_WITH(load_plugin(broken_plugin(2)), Catch::Contains("name is empty"));
}

TEST_CASE("a plugin whose forward pointer is NULL is refused, saying so") {
  CHECK_THROWS_WITH(load_plugin(broken_plugin(3)), Catch::Contains("forward is NULL"));
}

TEST_CASE("a plugin declaring unknown feature bits is refused, naming them") {
  CHECK_THROWS_WITH(load_plugin(broken_plugin(4)), Catch::Contains("unknown feature bits 0xfffff000"));
}

TEST_CASE("malformed handshakes are protocol errors that say what is wrong") {
  CHECK_THROWS_WITH(decode_handshake(""), Catch::Contains("not JSON"));
  CHECK_THROWS_WITH(decode_handshake("\x01\xff garbage"), Catch::Contains("not JSON") && Catch::Contains("\\xff"));
  CHECK_THROWS_WITH(decode_handshake("[1,2]"), Catch::Contains("not a JSON object"));
  CHECK_THROWS_WITH(decode_handshake(R"({"name":"x","features":[],"precision":"fp32"})"),
                    Catch::Contains("no \"abi_version\""));
  CHECK_THROWS_WITH(decode_handshake(R"({"abi_version":"1","name":"x","features":[],"precision":"fp32"})"),
                    Catch::Contains("version \"1\""));
  CHECK_THROWS_WITH(decode_handshake(R"({"abi_version":1,"name":7,"features":[],"precision":"fp32"})"),
                    Catch::Contains("\"name\" must be a non-empty string"));
  CHECK_THROWS_WITH(decode_handshake(R"({"abi_version":1,"name":"x","features":"cross","precision":"fp32"})"),
                    Catch::Contains("must be an array"));
  CHECK_THROWS_WITH(decode_handshake(R"({"abi_version":1,"name":"x","features":[12],"precision":"fp32"})"),
                    Catch::Contains("unknown feature 12"));
  CHECK_THROWS_WITH(decode_handshake(R"({"abi_version":1,"name":"x","features":[],"precision":"fp64"})"),
                    Catch::Contains("precision \"fp64\""));
  const Handshake h = decode_handshake(kHandshake);
  CHECK(h.name == "sh-child");
  CHECK(h.features == 0b100111u);  // cross, dv_ne_dk, batch_heads, causal_top_left
}

TEST_CASE("malformed reply headers are protocol errors, whatever the type of their fields") {
  CHECK_THROWS_WITH(decode_reply_header(R"({"id":1,"status":"ok")", 1), Catch::Contains("not JSON"));
  CHECK_THROWS_WITH(decode_reply_header(R"({"status":"ok"})", 1), Catch::Contains("no \"id\""));
  CHECK_THROWS_WITH(decode_reply_header(R"({"id":2,"status":"ok"})", 1), Catch::Contains("expected 1"));
  CHECK_THROWS_WITH(decode_reply_header(R"({"id":1,"status":"fine"})", 1), Catch::Contains("\"fine\""));
  // Found by the protocol fuzzer's seed: nlohmann's type_error used to escape.
  CHECK_THROWS_AS(decode_reply_header(R"({"id":1,"status":5})", 1), ProtocolError);
  CHECK_THROWS_WITH(decode_reply_header(R"({"id":1,"status":["ok"]})", 1), Catch::Contains("not a string"));
  const ReplyHeader r = decode_reply_header(R"({"id":1,"status":"invalid","message":17})", 1);
  CHECK(r.status == "invalid");
  CHECK(r.message.empty());  CHECK_FALSE(r.compute_seconds);
}

TEST_CASE("a reply's compute_seconds must be a finite number of seconds >= 0, else it is named") {
  CHECK(decode_reply_header(R"({"id":1,"status":"ok","compute_seconds":0.125})", 1).compute_seconds == 0.125);
  CHECK(decode_reply_header(R"({"id":1,"status":"ok","compute_seconds":0})", 1).compute_seconds == 0.0);
  for (const char* bad : {R"({"id":1,"status":"ok","compute_seconds":-0.5})",
                          R"({"id":1,"status":"ok","compute_seconds":"0.5"})",
                          R"({"id":1,"status":"ok","compute_seconds":null})",
                          R"({"id":1,"status":"ok","compute_seconds":1e999})"}) {
    INFO(bad);
    CHECK_THROWS_AS(decode_reply_header(bad, 1), ProtocolError);
    CHECK_THROWS_WITH(decode_reply_header(bad, 1), Catch::Contains("\"compute_seconds\""));
  }
}

TEST_CASE("an oversized handshake line is refused without reading it all") {
  CHECK_THROWS_WITH(start_exec("head -c 3000000 /dev/zero | tr '\\0' x", quick()),
                    Catch::Contains("longer than 1048576 bytes"));
}

TEST_CASE("a child that exits in the middle of its handshake is refused with its exit status") {
  CHECK_THROWS_WITH(start_exec(R"(printf '{"abi_version":1,"na'; exit 3)", quick()),
                    Catch::Contains("exited with status 3") && Catch::Contains("partial"));
}

TEST_CASE("a child that exits in the middle of its reply header is crashed, and nothing is written") {
  const std::string command =
      std::string("printf '%s\\n' '") + kHandshake + R"('; sleep 0.3; printf '{"id":1,"sta'; exit 4)";
  auto impl = start_exec(command, quick());
  Problem p;
  p.shape = {1, 1, 2, 2, 1, 1};
  std::vector<float> q{1, 2}, k{3, 4}, v{5, 6}, out{42, 42};
  try {
    impl->forward(p, q, k, v, out, {}, 1);
    FAIL("no fault");
  } catch (const ImplementationFault& fault) {
    CHECK(fault.kind() == ImplementationFault::Kind::crashed);
    CHECK_THAT(fault.what(), Catch::Contains("exited with status 4") && Catch::Contains("partial"));
  }
  CHECK(out == std::vector<float>{42, 42});
}
