// The C plugin loader against the example plugin and the misbehaving test
// plugins of examples/plugin-c: each misbehaviour is one finding.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "attn_plugin.h"
#include "attncheck/plugin.h"

using namespace attncheck;
using Kind = ImplementationFault::Kind;

namespace {

std::string plugin_path(const std::string& name) {
  return std::string(ATTNCHECK_PLUGIN_DIR) + "/lib" + name + ".so";
}

struct Inputs {
  Problem problem;
  std::vector<float> q, k, v;
};

Inputs small_inputs() {
  Inputs in;
  in.problem.shape = {2, 2, 3, 5, 4, 2};
  in.problem.causal = Causal::bottom_right;
  in.problem.key_lengths = {5, 4};
  in.problem.temperature = 0.7;
  const Shape& s = in.problem.shape;
  const auto fill = [](std::vector<float>& x, int64_t n, float seed) {
    x.resize(static_cast<size_t>(n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(seed + 0.37f * static_cast<float>(i));
  };
  fill(in.q, s.q_size(), 0.1f);
  fill(in.k, s.k_size(), 1.3f);
  fill(in.v, s.v_size(), 2.9f);
  return in;
}

// Softmax attention in double, straight from the definition.
std::vector<double> expected_output(const Inputs& in) {
  const Problem& p = in.problem;
  const Shape& s = p.shape;
  std::vector<double> out(static_cast<size_t>(s.out_size()));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.n_q; ++i) {
        const int64_t slice = b * s.heads + h;
        std::vector<double> w(static_cast<size_t>(s.n_k), 0.0);
        double max = -INFINITY, sum = 0;
        for (int64_t j = 0; j < s.n_k; ++j) {
          if (!allowed(p, b, h, i, j)) continue;
          double dot = 0;
          for (int64_t c = 0; c < s.d_k; ++c)
            dot += double(in.q[size_t((slice * s.n_q + i) * s.d_k + c)]) *
                   in.k[size_t((slice * s.n_k + j) * s.d_k + c)];
          w[size_t(j)] = dot * p.effective_scale() / p.temperature;
          max = std::max(max, w[size_t(j)]);
        }
        for (int64_t j = 0; j < s.n_k; ++j) {
          w[size_t(j)] = allowed(p, b, h, i, j) ? std::exp(w[size_t(j)] - max) : 0.0;
          sum += w[size_t(j)];
        }
        for (int64_t c = 0; c < s.d_v; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < s.n_k; ++j)
            acc += w[size_t(j)] / sum * in.v[size_t((slice * s.n_k + j) * s.d_v + c)];
          out[size_t((slice * s.n_q + i) * s.d_v + c)] = acc;
        }
      }
  return out;
}

// Runs one forward call and returns the fault it raised.
ImplementationFault fault_of(const std::string& plugin, int timeout_ms = 10000) {
  OutOfProcessOptions options;
  options.timeout_ms = timeout_ms;
  auto impl = load_plugin(plugin_path(plugin), options);
  Inputs in = small_inputs();
  std::vector<float> out(size_t(in.problem.shape.out_size()), 42.0f);
  try {
    impl->forward(in.problem, in.q, in.k, in.v, out, {}, 1);
  } catch (const ImplementationFault& fault) {
    // Nothing reaches the caller's buffer from a failed call.
    for (float x : out) REQUIRE(x == 42.0f);
    return fault;
  }
  FAIL("plugin " << plugin << " raised no fault");
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("the example C plugin computes attention and its weights in a child process") {
  auto impl = load_plugin(plugin_path("attn_example_plugin"));
  CHECK(impl->name() == "plugin:" + plugin_path("attn_example_plugin"));
  CHECK(impl->precision() == Precision::fp32);
  CHECK(impl->capabilities().weights);
  CHECK(impl->capabilities().explicit_mask);
  CHECK_FALSE(impl->capabilities().threads);

  Inputs in = small_inputs();
  const Shape& s = in.problem.shape;
  std::vector<float> out(size_t(s.out_size())), weights(size_t(s.weights_size()));
  impl->forward(in.problem, in.q, in.k, in.v, out, weights, 1);
  const std::vector<double> want = expected_output(in);
  for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(want[i]).margin(1e-6));
  // Each weight row sums to one.
  for (int64_t row = 0; row < s.batch * s.heads * s.n_q; ++row) {
    double sum = 0;
    for (int64_t j = 0; j < s.n_k; ++j) sum += weights[size_t(row * s.n_k + j)];
    CHECK(sum == Approx(1.0).margin(1e-6));
  }
}

TEST_CASE("an explicit mask combined with a causal rule reaches the plugin as one mask") {
  auto impl = load_plugin(plugin_path("attn_example_plugin"));
  Inputs in = small_inputs();
  in.problem.key_lengths.clear();
  in.problem.causal = Causal::top_left;
  ExplicitMask mask;
  mask.batch = 1;
  mask.heads = 2;
  mask.allowed.assign(size_t(2 * 3 * 5), 1);
  mask.allowed[size_t(1 * 15 + 2 * 5 + 0)] = 0;  // head 1, query 2 may not read key 0
  in.problem.mask = mask;
  std::vector<float> out(size_t(in.problem.shape.out_size()));
  impl->forward(in.problem, in.q, in.k, in.v, out, {}, 1);
  const std::vector<double> want = expected_output(in);
  for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(want[i]).margin(1e-6));
}

TEST_CASE("a plugin's rejection of bad input is InvalidInput with its message") {
  auto impl = load_plugin(plugin_path("attn_example_plugin"));
  Inputs in = small_inputs();
  in.k[7] = NAN;
  std::vector<float> out(size_t(in.problem.shape.out_size()));
  CHECK_THROWS_WITH(impl->forward(in.problem, in.q, in.k, in.v, out, {}, 1),
                    Catch::Contains("example-c") && Catch::Contains("K element 7"));
}

TEST_CASE("tensors of the wrong size are refused before any child runs, naming the tensor") {
  auto impl = load_plugin(plugin_path("attn_example_plugin"));
  Inputs in = small_inputs();
  in.v.pop_back();
  std::vector<float> out(size_t(in.problem.shape.out_size()));
  CHECK_THROWS_AS(impl->forward(in.problem, in.q, in.k, in.v, out, {}, 1), InvalidInput);
  CHECK_THROWS_WITH(impl->forward(in.problem, in.q, in.k, in.v, out, {}, 1), Catch::Contains("tensor V"));
}

TEST_CASE("a problem needing an undeclared feature is never sent to the plugin") {
  auto impl = load_plugin(plugin_path("attn_write_input_plugin"));  // lacks WEIGHTS
  CHECK_FALSE(impl->capabilities().weights);
  Inputs in = small_inputs();
  std::vector<float> out(size_t(in.problem.shape.out_size()));
  std::vector<float> weights(size_t(in.problem.shape.weights_size()));
  CHECK_THROWS_WITH(impl->forward(in.problem, in.q, in.k, in.v, out, weights, 1),
                    Catch::Contains("feature weights"));
}

TEST_CASE("a plugin that segfaults is reported as crashed with the signal") {
  const ImplementationFault fault = fault_of("attn_segfault_plugin");
  CHECK(fault.kind() == Kind::crashed);
  CHECK_THAT(fault.what(), Catch::Contains("signal 11"));
}

TEST_CASE("a plugin that hangs is killed at the timeout and reported as timed_out") {
  // The run's first call gets the whole timeout (start_up_allowance_ms).
  const ImplementationFault fault = fault_of("attn_hang_plugin", 300);
  CHECK(fault.kind() == Kind::timed_out);
  CHECK_THAT(fault.what(), Catch::Contains("within 300 ms"));
}

TEST_CASE("a plugin that writes one element past its output is reported as wrote_out_of_bounds") {
  const ImplementationFault fault = fault_of("attn_write_past_output_plugin");
  CHECK(fault.kind() == Kind::wrote_out_of_bounds);
  CHECK_THAT(fault.what(), Catch::Contains("past the end of out"));
}

TEST_CASE("a plugin that writes just before its output hits the guard page") {
  const ImplementationFault fault = fault_of("attn_write_before_output_plugin");
  CHECK(fault.kind() == Kind::wrote_out_of_bounds);
  CHECK_THAT(fault.what(), Catch::Contains("before the start of out"));
}

TEST_CASE("a plugin that writes into an input is reported as wrote_input naming the tensor") {
  const ImplementationFault fault = fault_of("attn_write_input_plugin");
  CHECK(fault.kind() == Kind::wrote_input);
  CHECK_THAT(fault.what(), Catch::Contains("wrote into read-only input K at byte 0"));
}

TEST_CASE("a plugin that returns ATTN_OK without writing its output is reported") {
  const ImplementationFault fault = fault_of("attn_unwritten_output_plugin");
  CHECK(fault.kind() == Kind::left_output_unwritten);
  CHECK_THAT(fault.what(), Catch::Contains("24 of 24 elements of out unwritten"));
}

TEST_CASE("a plugin built for another ABI version is refused, printing both versions") {
  try {
    load_plugin(plugin_path("attn_wrong_abi_plugin"));
    FAIL("the plugin was loaded");
  } catch (const InvalidInput& e) {
    CHECK_THAT(e.what(), Catch::Contains("ABI version 2") && Catch::Contains("speaks version 1"));
  }
}

TEST_CASE("a plugin whose attn_plugin_init crashes is refused and attncheck lives on") {
  CHECK_THROWS_WITH(load_plugin(plugin_path("attn_init_crash_plugin")),
                    Catch::Contains("attn_plugin_init failed") && Catch::Contains("signal 11"));
}

TEST_CASE("a missing plugin file is an error naming the path") {
  CHECK_THROWS_WITH(load_plugin("/nonexistent/libnothing.so"),
                    Catch::Contains("/nonexistent/libnothing.so") && Catch::Contains("no such"));
  CHECK_THROWS_AS(load_plugin(""), InvalidInput);
}

TEST_CASE("feature bits map to the capabilities of the same name") {
  const Capabilities c = capabilities_from_features(ATTN_FEATURE_CROSS | ATTN_FEATURE_KEY_PADDING |
                                                   ATTN_FEATURE_WEIGHTS);
  CHECK(c.cross);
  CHECK(c.key_padding);
  CHECK(c.weights);
  CHECK_FALSE(c.dv_ne_dk);
  CHECK_FALSE(c.explicit_mask);
  CHECK_FALSE(c.empty_row_zero);
  const std::vector<std::string> missing = missing_features(c);
  CHECK(missing.size() == 9);
  CHECK(missing.front() == "dv_ne_dk");
  CHECK(feature_names().size() == 12);
  CHECK(feature_names()[8] == "explicit_mask");
}

TEST_CASE("the default timeout comes from --timeout-ms and refuses non-positive values") {
  CHECK_THROWS_WITH(set_default_timeout_ms(0), Catch::Contains("--timeout-ms"));
  set_default_timeout_ms(1234);
  CHECK(default_timeout_ms() == 1234);
  set_default_timeout_ms(10000);
}

TEST_CASE("ATTN_ERR_UNSUPPORTED is Unsupported with the plugin's message, for the harness to judge") {
  auto impl = load_plugin(plugin_path("attn_declining_fp16_plugin"));
  CHECK(impl->precision() == Precision::fp16);
  Inputs in = small_inputs();
  std::vector<float> out(size_t(in.problem.shape.out_size()), 42.0f);
  impl->forward(in.problem, in.q, in.k, in.v, out, {}, 1);  // inside fp16's range: computed
  const std::vector<double> want = expected_output(in);
  for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(want[i]).margin(1e-6));
  in.k[3] = 1e5f;
  std::fill(out.begin(), out.end(), 42.0f);
  try {
    impl->forward(in.problem, in.q, in.k, in.v, out, {}, 1);
    FAIL("accepted");
  } catch (const Unsupported& e) {
    CHECK_THAT(e.what(), Catch::Contains("declining") && Catch::Contains("ATTN_ERR_UNSUPPORTED") &&
                             Catch::Contains("K element 3 = 100000 is beyond what this plugin holds"));
  }
  for (float x : out) CHECK(x == 42.0f);  // nothing reaches the caller's buffer
}
