// verify --power: the bisection finds a check's threshold, the perturbation is
// exactly O·(1 + ε), and the JSON holds every (n, input, mask) row.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <tuple>

#include "attncheck/power.h"
#include "attncheck/properties.h"
#include "attncheck/registry.h"
#include "attncheck/verify.h"

using namespace attncheck;

TEST_CASE("find_threshold brackets the threshold of a synthetic check", "[power]") {
  for (double threshold : {3.7e-8, 2.5e-6, 1e-4, 0.0123, 0.0999}) {
    int calls = 0;
    const ThresholdSearch s = find_threshold(
        [&](double e) {
          ++calls;
          return e >= threshold;
        },
        1e-8, 1e-1, 12);
    INFO("threshold " << threshold);
    CHECK(s.caught_at_hi);
    CHECK_FALSE(s.caught_at_lo);
    CHECK(s.largest_missed < threshold);
    CHECK(s.smallest_caught >= threshold);
    // 12 halvings of 7 decades: the bracket is a factor 10^(7/4096) ≈ 1.004 wide.
    CHECK(s.smallest_caught / s.largest_missed == Approx(std::pow(1e7, 1.0 / 4096)).epsilon(1e-9));
    CHECK(s.evaluations == 14);
    CHECK(calls == 14);
  }
}

TEST_CASE("find_threshold reports checks that catch everything or nothing", "[power]") {
  const ThresholdSearch always = find_threshold([](double) { return true; }, 1e-8, 1e-1, 12);
  CHECK(always.caught_at_lo);
  CHECK(always.caught_at_hi);
  CHECK(always.smallest_caught == 1e-8);
  CHECK(always.evaluations == 2);
  const ThresholdSearch never = find_threshold([](double) { return false; }, 1e-8, 1e-1, 12);
  CHECK_FALSE(never.caught_at_hi);
  CHECK(never.largest_missed == 1e-1);
  CHECK(never.evaluations == 1);
  CHECK_THROWS_AS(find_threshold([](double) { return true; }, 1e-1, 1e-8, 12), InvalidInput);
  CHECK_THROWS_AS(find_threshold([](double) { return true; }, 0, 1e-1, 12), InvalidInput);
}

TEST_CASE("RelativePerturbation returns the base output times (1 + ε), without weights", "[power]") {
  PowerOptions options;
  options.d = 8;
  const Case c = power_case({12, "normal", "causal"}, options);
  auto base = make_implementation("naive-fp32");
  std::vector<float> expected(static_cast<size_t>(c.problem.shape.out_size()));
  base->forward(c.problem, c.q, c.k, c.v, expected, {}, 1);
  RelativePerturbation p(make_implementation("naive-fp32"));
  CHECK_FALSE(p.capabilities().weights);
  CHECK(p.name() == "naive-fp32");
  std::vector<float> out(expected.size());
  for (double e : {0.0, 1e-3, -0.5}) {
    p.set_epsilon(e);
    p.forward(c.problem, c.q, c.k, c.v, out, {}, 1);
    for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == static_cast<float>(expected[i] * (1.0 + e)));
  }
  // A different case is recomputed, not served from the cache.
  Case other = c;
  other.v[0] += 1.0f;
  base->forward(other.problem, other.q, other.k, other.v, expected, {}, 1);
  p.set_epsilon(0);
  p.forward(other.problem, other.q, other.k, other.v, out, {}, 1);
  CHECK(out == expected);
}

TEST_CASE("power_case: shapes, sampled query rows and their causal mask rows", "[power]") {
  PowerOptions options;
  options.d = 4;
  options.subsample_above = 16;
  options.sampled_queries = 8;
  const Case full = power_case({16, "uniform", "causal"}, options);
  CHECK(full.problem.shape == Shape{1, 1, 16, 16, 4, 4});
  CHECK(full.problem.causal == Causal::top_left);
  for (float x : full.q) CHECK(std::fabs(x) <= 1.0f);
  const Case s = power_case({32, "normal", "causal"}, options);
  CHECK(s.problem.shape == Shape{1, 1, 8, 32, 4, 4});
  REQUIRE(s.problem.mask);
  for (int64_t r = 0; r < 8; ++r)  // sampled row r stands for row 4r + 3 of the 32×32 problem
    for (int64_t j = 0; j < 32; ++j) CHECK(allowed(s.problem, 0, 0, r, j) == (j <= 4 * r + 3));
  // Both masks see the same inputs.
  const Case none = power_case({32, "normal", "none"}, options);
  CHECK(none.q == s.q);
  CHECK(none.k == s.k);
  CHECK_FALSE(none.problem.mask);
  CHECK(power_case({32, "uniform", "none"}, options).k != none.k);
}

TEST_CASE("measure_power: every (n, input, mask) row in the JSON, with its tightness and power", "[power]") {
  PowerOptions options;
  options.sizes = {8, 24};
  options.d = 8;
  options.steps = 6;
  options.subsample_above = 16;
  options.sampled_queries = 12;  // n = 24 is sampled
  options.inputs = {"uniform", "normal"};
  int streamed = 0;
  options.on_row = [&](const PowerRow&) { ++streamed; };
  const std::vector<PowerRow> rows = measure_power(options);
  CHECK(streamed == 8);
  const nlohmann::json j = power_json(rows, options);
  CHECK(j["power_json_version"] == 1);
  // What the report reads: the range searched, the inputs measured, the machine and its load.
  CHECK(j["settings"]["epsilon_range"] == nlohmann::json::array({1e-8, 1e-1}));
  CHECK(j["settings"]["inputs"] == nlohmann::json({{"uniform", "U[-1, 1]"}, {"normal", "N(0, 1)"}}));
  CHECK(j["settings"]["threads"] == 1);
  CHECK(j["context"]["cpu_model"].is_string());
  CHECK(j["context"]["flags"].is_string());
  CHECK(j["context"]["load_avg"].size() == 3);
  CHECK_FALSE(j["context"].contains("load_avg_start"));
  CHECK(power_json(rows, options, run_context(1))["context"]["load_avg_start"].size() == 3);
  std::set<std::tuple<int64_t, std::string, std::string>> seen, seen_error;
  for (const auto& r : j["rows"]) {
    seen.insert({r["n"].get<int64_t>(), r["input"].get<std::string>(), r["mask"].get<std::string>()});
    CHECK(r["n_k"] == r["n"]);
    CHECK(r["n_q"] == (r["n"] == 24 ? 12 : 8));
    for (const char* impl : {"fused", "naive-fp32"}) {
      INFO(r.dump());
      REQUIRE(r["tightness"].contains(impl));
      CHECK(r["tightness"][impl]["verdict"] == "PASSED");
      CHECK(r["tightness"][impl]["error_over_bound"].get<double>() >= 0);
      CHECK(r["tightness"][impl]["error_over_bound"].get<double>() <= 1);
    }
    // A correct output is not caught; some ε in [1e-8, 1e-1] is.
    CHECK(r["power"]["caught_at_highest"] == true);
    CHECK(r["power"]["caught_at_lowest"] == false);
    CHECK(r["power"]["smallest_epsilon_caught"].get<double>() > r["power"]["largest_epsilon_missed"].get<double>());
    CHECK(r["power"]["checks"] == 2 + 6);
    // The property itself confirmed both ends of the bracket.
    CHECK(r["power"]["differential_reference_checks"] == 2);
    CHECK(r["power"]["method"].get<std::string>().find("agrees") != std::string::npos);
  }
  for (const auto& e : j["error_vs_n"]) {
    seen_error.insert({e["n"].get<int64_t>(), e["input"].get<std::string>(), e["mask"].get<std::string>()});
    for (const char* field : {"n", "d", "mask", "max_abs_error", "error_over_bound", "oracle", "implementation",
                              "input", "n_q", "n_k", "verdict", "smallest_epsilon_caught"})
      CHECK(e.contains(field));
    CHECK(e["error_over_bound"].is_number());
  }
  std::set<std::tuple<int64_t, std::string, std::string>> expected;
  for (int64_t n : {8, 24})
    for (const char* input : {"uniform", "normal"})
      for (const char* mask : {"none", "causal"}) expected.insert({n, input, mask});
  CHECK(j["rows"].size() == 8);
  CHECK(seen == expected);
  CHECK(j["error_vs_n"].size() == 16);  // one per implementation
  CHECK(seen_error == expected);
  // The threshold found is the differential check's own: caught at it, not just below.
  const PowerRow& first = rows.front();
  const Case c = power_case(first.config, options);
  RelativePerturbation p(make_implementation(first.perturbed));
  const Property& differential = *find_property("differential_reference");
  p.set_epsilon(first.power.smallest_caught);
  CHECK_FALSE(differential.check(p, c, 1).ok);
  p.set_epsilon(first.power.largest_missed);
  CHECK(differential.check(p, c, 1).ok);
}

TEST_CASE("the default measurement covers n = 16 … 4096, both inputs and both masks", "[power]") {
  const PowerOptions options;
  CHECK(options.sizes == std::vector<int64_t>{16, 64, 256, 1024, 4096});
  CHECK(options.inputs == std::vector<std::string>{"uniform", "normal", "positive_v"});
  CHECK(options.masks == std::vector<std::string>{"none", "causal"});
  CHECK(options.d == 64);
  CHECK(options.implementations == std::vector<std::string>{"fused", "naive-fp32"});
}

TEST_CASE("run_power measures the sizes it is given and writes their JSON", "[power]") {
  PowerOptions options;
  options.sizes = {8};
  options.inputs = {"normal"};
  options.d = 8;
  options.steps = 4;
  const std::string path = "power_test_run_power.json";
  const std::vector<PowerRow> rows = run_power(options, path);
  CHECK(rows.size() == 2);  // n = 8, N(0, 1), both masks
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in);
  CHECK(j["rows"].size() == 2);
  CHECK(j["settings"]["sizes"] == nlohmann::json::array({8}));
  CHECK(j["settings"]["inputs"] == nlohmann::json({{"normal", "N(0, 1)"}}));
  CHECK(j["context"]["load_avg_start"].size() == 3);
  std::remove(path.c_str());
  CHECK_THROWS_AS(run_power(options, "/nonexistent-dir/power.json"), InvalidInput);
}
