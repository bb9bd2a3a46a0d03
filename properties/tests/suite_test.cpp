// The suite against real implementations: the fused path passes, every mutant
// is killed, correct code never fails, failures replay.
#include <catch2/catch.hpp>

#include <filesystem>
#include <iostream>
#include <random>

#include "attncheck/attention.h"
#include "attncheck/builtin_implementations.h"
#include "attncheck/naive.h"
#include "attncheck/registry.h"
#include "attncheck/verify.h"
#include <unistd.h>

using namespace attncheck;

namespace {

std::string failures(const VerifyReport& r) {
  std::string text;
  for (const auto& p : r.properties)
    if (p.status != Status::passed && p.status != Status::skipped)
      text += p.name + ": " + to_string(p.status) + " " + p.message + "\n";
  return text;
}

VerifyOptions quiet(uint64_t seed, int cases) {
  VerifyOptions o;
  o.seed = seed;
  o.cases = cases;
  o.failures_dir = "";
  return o;
}

}  // namespace

TEST_CASE("every property holds for the fused path (fixed seed)", "[suite]") {
  auto impl = make_implementation("fused");
  const VerifyReport r = run_verify(*impl, quiet(20261129, 40));
  INFO(failures(r));
  CHECK(all_passed(r));
  for (const auto& p : r.properties) {
    INFO(p.name);
    CHECK(p.status == Status::passed);
    CHECK(p.cases == 40);
  }
}

TEST_CASE("every property holds for the fused path (fresh seed)", "[suite]") {
  const uint64_t seed = std::random_device{}();
  std::cout << "properties_tests: fresh seed " << seed
            << " (rerun with attncheck verify --impl fused --seed " << seed << ")\n";
  auto impl = make_implementation("fused");
  const VerifyReport r = run_verify(*impl, quiet(seed, 25));
  INFO("seed " << seed << "\n" << failures(r));
  CHECK(all_passed(r));
}

TEST_CASE("every mutant is killed by a property expected to kill it, within the default budget", "[mutants]" ATTNCHECK_NO_SANITIZE) {
  VerifyOptions o = quiet(1, VerifyOptions{}.cases);
  const auto results = hunt_mutants(o);
  REQUIRE(results.size() == all_flaws().size());
  INFO(format_kill_matrix(results));
  for (const auto& m : results) {
    INFO(m.name);
    CHECK(m.verdict == MutantVerdict::killed_as_expected);
    CHECK(m.killed);
    CHECK(!m.case_name.empty());
    // Every property ran against every mutant.
    CHECK(m.matrix.size() == all_properties().size());
  }
  CHECK(all_mutants_killed_as_expected(results));
}

TEST_CASE("every mutant names expected killers that are properties", "[mutants]") {
  for (const FlawInfo& f : all_flaws()) {
    INFO(f.name);
    CHECK_FALSE(f.killed_by.empty());
    for (const std::string& p : f.killed_by) {
      INFO(p);
      CHECK(find_property(p) != nullptr);
    }
  }
}

namespace {

/// Correct attention with every output off by a relative 1e-3: finite (shape
/// passes it) but wrong (row_sum kills it).
class PerMilleOff final : public Implementation {
 public:
  std::string name() const override { return "test:per-mille-off"; }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  Precision precision() const override { return Precision::fp32; }
  void forward(const Problem& p, std::span<const float> q, std::span<const float> k, std::span<const float> v,
               std::span<float> out, std::span<float> weights, int threads) override {
    inner_->forward(p, q, k, v, out, weights, threads);
    for (float& x : out) x *= 1.001f;
  }

 private:
  std::unique_ptr<Implementation> inner_ = make_naive_implementation(Precision::fp32, Flaw::none, "inner");
};

std::vector<MutantResult> hunt_one(std::unique_ptr<Implementation> mutant, std::vector<std::string> expected,
                                   std::vector<std::string> properties) {
  std::vector<std::unique_ptr<Implementation>> list;
  const std::string name = mutant->name();
  list.push_back(std::move(mutant));
  VerifyOptions o = quiet(7, 20);
  o.matrix_cases = 10;
  o.properties = std::move(properties);
  return hunt_mutants(std::move(list), {{name, std::move(expected)}}, o);
}

}  // namespace

TEST_CASE("the kill matrix: a mutant killed only by a property not expected to kill it is a finding", "[mutants]") {
  const auto results = hunt_one(std::make_unique<PerMilleOff>(), {"shape"}, {"shape", "row_sum"});
  REQUIRE(results.size() == 1);
  const MutantResult& m = results[0];
  INFO(format_kill_matrix(results));
  REQUIRE(m.matrix.size() == 2);
  CHECK(m.matrix[0].property == "shape");
  CHECK(m.matrix[0].expected);
  CHECK(m.matrix[0].status == Status::passed);
  CHECK_FALSE(m.matrix[0].kill);
  CHECK(m.matrix[1].property == "row_sum");
  CHECK_FALSE(m.matrix[1].expected);
  CHECK(m.matrix[1].status == Status::failed);
  CHECK(m.matrix[1].kill);
  CHECK(m.killed);
  CHECK(m.killed_by == "row_sum");
  CHECK_FALSE(m.case_name.empty());
  CHECK(m.verdict == MutantVerdict::killed_unexpectedly);
  CHECK_FALSE(all_mutants_killed_as_expected(results));
  const std::string text = format_kill_matrix(results);
  CHECK_THAT(text, Catch::Contains("test:per-mille-off [.]  K   KILLED_UNEXPECTEDLY"));
  CHECK_THAT(text, Catch::Contains("columns: 1 shape, 2 row_sum"));
  CHECK_THAT(text, Catch::Contains("killed only by properties not expected to kill it (expected killers: shape PASSED)"));
  VerifyReport report;
  report.mutants = results;
  CHECK_FALSE(all_passed(report));

  // The same mutant, expected to die by row_sum: killed as expected, and the shown counterexample is row_sum's.
  const auto expected = hunt_one(std::make_unique<PerMilleOff>(), {"row_sum"}, {"shape", "row_sum"});
  CHECK(expected[0].verdict == MutantVerdict::killed_as_expected);
  CHECK(expected[0].killed_by == "row_sum");
  report.mutants = expected;
  CHECK(all_passed(report));
}

TEST_CASE("the kill matrix: a mutant no property kills has escaped", "[mutants]") {
  const auto results = hunt_one(std::make_unique<PerMilleOff>(), {"row_sum"}, {"shape", "nonnegative"});
  const MutantResult& m = results[0];
  INFO(format_kill_matrix(results));
  CHECK_FALSE(m.killed);
  CHECK(m.killed_by.empty());
  CHECK(m.verdict == MutantVerdict::escaped);
  CHECK_THAT(format_kill_matrix(results), Catch::Contains("ESCAPED: no property failed with a counterexample "
                                                          "(expected killers: row_sum not run)"));
  VerifyReport report;
  report.mutants = results;
  CHECK_FALSE(all_passed(report));
}

TEST_CASE("only a FAILED verdict with a counterexample kills", "[mutants]") {
  PropertyResult r;
  r.status = Status::failed;
  CHECK_FALSE(is_kill(r));  // gave up, RapidCheck error, no case ran
  r.counterexample = Case{};
  CHECK(is_kill(r));
  for (Status s : {Status::crashed, Status::timed_out, Status::inconclusive, Status::passed, Status::skipped}) {
    r.status = s;
    CHECK_FALSE(is_kill(r));
  }
  // An expected killer that only crashed or gave up does not make an unexpected kill count.
  CHECK(mutant_verdict({{"a", Status::crashed, false, true}, {"b", Status::failed, true, false}}) ==
        MutantVerdict::killed_unexpectedly);
  CHECK(mutant_verdict({{"a", Status::failed, false, true}, {"b", Status::inconclusive, false, false}}) ==
        MutantVerdict::escaped);
  CHECK(mutant_verdict({{"a", Status::failed, true, true}, {"b", Status::failed, true, false}}) ==
        MutantVerdict::killed_as_expected);
}

TEST_CASE("correct code never fails: naive fp32 and the double reference under 20 seeds", "[false-alarm]" ATTNCHECK_NO_SANITIZE) {
  std::vector<std::string> names = {"naive-fp32", "reference-double"};
  for (const auto& [name, description] : implementation_list())
    if (name == "naive-eigen") names.push_back(name);
  for (const std::string& name : names) {
    auto impl = make_implementation(name);
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      const VerifyReport r = run_verify(*impl, quiet(seed * 7919, 6));
      INFO(name << " seed " << seed * 7919 << "\n" << failures(r));
      CHECK(all_passed(r));
    }
  }
}

TEST_CASE("a mutant's shrunk case is written and replays to the same failure", "[replay]") {
  const std::string dir = (std::filesystem::temp_directory_path() / ("attncheck-props-replay-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  VerifyOptions o = quiet(5, 100);
  o.failures_dir = dir;
  auto mutant = make_implementation("mutant:v_rows_misaligned");
  const PropertyResult r = run_property(*mutant, *find_property("differential_reference"), o);
  REQUIRE(r.status == Status::failed);
  REQUIRE(std::filesystem::exists(r.case_file));
  const Case c = read_case_file(r.case_file);
  CHECK(c.labels.at("property") == "differential_reference");
  CHECK(c.labels.at("seed") == "5");
  const auto replayed = replay_case(*mutant, c, o);
  REQUIRE(replayed.size() == 1);
  CHECK(replayed[0].status == Status::failed);
  CHECK(replayed[0].message == r.message);
  auto fused = make_implementation("fused");
  CHECK(replay_case(*fused, c, o)[0].status == Status::passed);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a property that runs no case is never reported as passed", "[runner]") {
  Property never = *find_property("row_sum");
  never.name = "always_discards";
  never.check = [](Implementation&, const Case&, int) {
    Outcome o;
    o.discard = true;
    o.message = "never applies";
    return o;
  };
  auto impl = make_implementation("naive-fp32");
  const PropertyResult r = run_property(*impl, never, quiet(3, 10));
  CHECK(r.status == Status::failed);
  CHECK(r.cases == 0);
}

TEST_CASE("input_validation: every bad input is rejected by the fused path and the reference", "[validation]") {
  for (const char* name : {"fused", "reference-double", "naive-fp32"}) {
    auto impl = make_implementation(name);
    const PropertyResult r = run_property(*impl, *find_property("input_validation"), quiet(11, 200));
    INFO(name << ": " << r.message);
    CHECK(r.status == Status::passed);
  }
}

TEST_CASE("input_validation fails an implementation that accepts bad input", "[validation]") {
  class Trusting : public Implementation {
   public:
    std::string name() const override { return "trusting"; }
    Capabilities capabilities() const override { return {}; }
    Precision precision() const override { return Precision::fp32; }
    void forward(const Problem& p, std::span<const float>, std::span<const float>, std::span<const float>,
                 std::span<float> out, std::span<float>, int) override {
      if (p.shape.n_q < 1) throw InvalidInput("n_q");
      for (float& x : out) x = 0;
    }
  } trusting;
  const PropertyResult r = run_property(trusting, *find_property("input_validation"), quiet(11, 100));
  CHECK(r.status == Status::failed);
}

TEST_CASE("unknown implementations and properties are named in the error", "[registry]") {
  try {
    (void)make_implementation("no-such-impl");
    FAIL("accepted");
  } catch (const InvalidInput& e) {
    CHECK_THAT(e.what(), Catch::Contains("--impl") && Catch::Contains("fused") && Catch::Contains("mutant:"));
  }
  VerifyOptions o = quiet(1, 1);
  o.properties = {"no_such_property"};
  auto impl = make_implementation("naive-fp32");
  CHECK_THROWS_WITH(run_verify(*impl, o), Catch::Contains("--property"));
  register_implementation("test-prefix:", [](const std::string& arg) {
    return make_naive_implementation(Precision::fp32, Flaw::none, "naive:" + arg);
  }, "test");
  CHECK(make_implementation("test-prefix:abc")->name() == "naive:abc");
}

TEST_CASE("fused:<method> forces one decode scoring method for each call and restores the automatic choice",
          "[registry]") {
  // Six query rows (the decode path), d_k = 37 (a tail past the last whole
  // vector), keys over two splits.
  Problem p;
  p.shape = {1, 2, 6, 1100, 37, 20};
  std::mt19937 gen(12);
  std::normal_distribution<float> normal;
  const auto values = [&](int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& e : x) e = normal(gen);
    return x;
  };
  const std::vector<float> q = values(p.shape.q_size()), k = values(p.shape.k_size()), v = values(p.shape.v_size());
  const auto run = [&](Implementation& impl) {
    std::vector<float> out(static_cast<size_t>(p.shape.out_size()));
    impl.forward(p, q, k, v, out, {}, 1);
    return out;
  };
  auto automatic = make_implementation("fused");
  const std::vector<float> before = run(*automatic);
  std::vector<std::vector<float>> forced;
  for (const std::string& method : decode_scoring_methods()) {
    auto impl = make_implementation("fused:" + method);
    CHECK(impl->name() == "fused:" + method);
    forced.push_back(run(*impl));
    // The same problem, summed in another order: close, not equal.
    for (size_t i = 0; i < before.size(); ++i) REQUIRE(std::abs(forced.back()[i] - before[i]) < 1e-5f);
  }
  REQUIRE(forced.size() == 3);
  // One key at a time and the rows in the lanes sum in different orders on
  // every SIMD target (the scalar target has one method only).
  if (active_target() != "SCALAR") CHECK(forced[0] != forced[2]);
  // The call restored the automatic choice.
  CHECK(run(*automatic) == before);

  for (const std::string bad : {"fused:", "fused:bogus", "fused:Four_keys"}) {
    INFO(bad);
    CHECK_THROWS_AS(make_implementation(bad), InvalidInput);
    CHECK_THROWS_WITH(make_implementation(bad), Catch::Contains("--impl") && Catch::Contains("four_keys"));
  }
}
