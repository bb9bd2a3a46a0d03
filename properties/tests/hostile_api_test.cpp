// Every bad input of DESIGN.md ("Bad input") at every entry point: validate(),
// attention(), attention_tables(), reference_attention / reference_tables,
// the bench peers and every registered Implementation. Each throws
// InvalidInput whose message names the tensor or option, and writes nothing.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "attncheck/attention.h"
#include "attncheck/builtin_implementations.h"
#include "attncheck/peers.h"
#include "attncheck/reference.h"
#include "attncheck/registry.h"

using namespace attncheck;

namespace {

constexpr float kSentinel = 12345.0f;
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

struct Input {
  std::string what;  // the bad input, for the failure message
  std::string named; // what the error message must contain
  Problem problem;
  std::vector<float> q, k, v;
};

Input good() {
  Input in;
  in.problem.shape = {2, 2, 3, 4, 2, 3};
  const Shape& s = in.problem.shape;
  for (int64_t i = 0; i < s.q_size(); ++i) in.q.push_back(0.1f * float(i % 7) - 0.3f);
  for (int64_t i = 0; i < s.k_size(); ++i) in.k.push_back(0.2f * float(i % 5) - 0.4f);
  for (int64_t i = 0; i < s.v_size(); ++i) in.v.push_back(float(i % 3) - 1.0f);
  return in;
}

std::vector<Input> bad_inputs() {
  std::vector<Input> all;
  auto add = [&](const std::string& what, const std::string& named, const std::function<void(Input&)>& spoil) {
    Input in = good();
    in.what = what;
    in.named = named;
    spoil(in);
    all.push_back(in);
  };
  add("NaN in Q", "Q[b=1][h=1][row=2][col=1]", [](Input& in) { in.q.back() = kNaN; });
  add("+inf in K", "K[b=0][h=0][row=0][col=1]", [](Input& in) { in.k[1] = kInf; });
  add("-inf in V", "V[b=1][h=0][row=0][col=0]", [](Input& in) { in.v[24] = -kInf; });
  add("τ = 0", "temperature", [](Input& in) { in.problem.temperature = 0; });
  add("τ < 0", "temperature", [](Input& in) { in.problem.temperature = -1; });
  add("τ NaN", "temperature", [](Input& in) { in.problem.temperature = std::nan(""); });
  add("τ inf", "temperature", [](Input& in) { in.problem.temperature = HUGE_VAL; });
  add("scale 0", "scale", [](Input& in) { in.problem.scale = 0.0; });
  add("scale < 0", "scale", [](Input& in) { in.problem.scale = -0.5; });
  add("scale NaN", "scale", [](Input& in) { in.problem.scale = std::nan(""); });
  add("scale inf", "scale", [](Input& in) { in.problem.scale = HUGE_VAL; });
  add("key length < 0", "key_lengths[1]", [](Input& in) { in.problem.key_lengths = {4, -1}; });
  add("key length > n_k", "key_lengths[0]", [](Input& in) { in.problem.key_lengths = {5, 4}; });
  add("one key length for two batch elements", "key_lengths", [](Input& in) { in.problem.key_lengths = {4}; });
  add("mask of the wrong size", "mask", [](Input& in) {
    in.problem.mask = ExplicitMask{1, 1, std::vector<uint8_t>(11, 1)};
  });
  add("mask batch neither 1 nor batch", "mask", [](Input& in) {
    in.problem.mask = ExplicitMask{3, 1, std::vector<uint8_t>(36, 1)};
  });
  add("empty row under the reject policy", "empty row", [](Input& in) { in.problem.key_lengths = {0, 4}; });
  add("n_q = 0", "n_q", [](Input& in) { in.problem.shape.n_q = 0; });
  add("d_k < 0", "d_k", [](Input& in) { in.problem.shape.d_k = -2; });
  return all;
}

// Runs `call` on every bad input: InvalidInput naming what is wrong, output untouched.
void check_entry_point(const std::string& entry, bool sized,
                       const std::function<void(const Input&, std::vector<float>& out)>& call) {
  for (const Input& in : bad_inputs()) {
    // Pointer entry points cannot be handed a size that disagrees with the
    // shape; they see the sizes the shape implies.
    if (!sized && (in.problem.shape.n_q <= 0 || in.problem.shape.d_k <= 0)) continue;
    INFO(entry << ": " << in.what);
    std::vector<float> out(static_cast<size_t>(std::max<int64_t>(good().problem.shape.out_size(), 1)), kSentinel);
    try {
      call(in, out);
      FAIL("accepted");
    } catch (const InvalidInput& e) {
      CHECK_THAT(e.what(), Catch::Contains(in.named));
    }
    for (float x : out) REQUIRE(x == kSentinel);
  }
}

}  // namespace

TEST_CASE("validate() rejects every bad input, naming it") {
  check_entry_point("validate", true, [](const Input& in, std::vector<float>&) { validate(in.problem, in.q, in.k, in.v); });
  Input in = good();
  in.q.pop_back();
  CHECK_THROWS_WITH(validate(in.problem, in.q, in.k, in.v), Catch::Contains("Q"));
}

TEST_CASE("the fused attention() and attention_tables() reject every bad input, writing nothing") {
  check_entry_point("attention", false, [](const Input& in, std::vector<float>& out) {
    attention(in.problem, in.q.data(), in.k.data(), in.v.data(), out.data(), {2});
  });
  check_entry_point("attention_tables", false, [](const Input& in, std::vector<float>&) {
    attention_tables(in.problem, in.q.data(), in.k.data(), in.v.data(), 0, 0);
  });
}

TEST_CASE("the reference rejects every bad input, writing nothing") {
  check_entry_point("reference_attention<double>", true, [](const Input& in, std::vector<float>&) {
    std::vector<double> weights;
    reference_attention<double>(in.problem, in.q, in.k, in.v, &weights);
    REQUIRE(weights.empty());
  });
  check_entry_point("reference_tables<mp50>", true, [](const Input& in, std::vector<float>&) {
    reference_tables<mp50>(in.problem, in.q, in.k, in.v, 0, 0);
  });
}

TEST_CASE("the bench peers reject every bad input, writing nothing") {
  check_entry_point("naive_eigen_attention", false, [](const Input& in, std::vector<float>& out) {
    naive_eigen_attention(in.problem, in.q.data(), in.k.data(), in.v.data(), out.data(), 2);
  });
  check_entry_point("naive_openblas_attention", false, [](const Input& in, std::vector<float>& out) {
    naive_openblas_attention(in.problem, in.q.data(), in.k.data(), in.v.data(), out.data(), 1);
  });
  check_entry_point("reference_double_attention", false, [](const Input& in, std::vector<float>& out) {
    reference_double_attention(in.problem, in.q.data(), in.k.data(), in.v.data(), out.data());
  });
}

TEST_CASE("every registered implementation rejects every bad input, writing nothing") {
  std::vector<std::string> names;
  for (const auto& [name, description] : implementation_list())
    if (name.find(':') == std::string::npos || name.rfind("mutant:", 0) == 0) names.push_back(name);  // not plugin:, exec:
  for (const std::string& method : decode_scoring_methods()) names.push_back("fused:" + method);
  for (const std::string& name : names) {
    auto impl = make_implementation(name);
    check_entry_point(name, true, [&](const Input& in, std::vector<float>& out) {
      impl->forward(in.problem, in.q, in.k, in.v, out, {}, 1);
    });
    // A tensor of the wrong size, named.
    Input in = good();
    in.v.pop_back();
    std::vector<float> out(static_cast<size_t>(in.problem.shape.out_size()), kSentinel);
    INFO(name);
    CHECK_THROWS_WITH(impl->forward(in.problem, in.q, in.k, in.v, out, {}, 1), Catch::Contains("V"));
    for (float x : out) REQUIRE(x == kSentinel);
  }
}
