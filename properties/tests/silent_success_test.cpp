// No silent success: zero cases run, a generator that discards everything, a
// run in which every property was skipped, and an implementation returning
// zeros (benchdnn's "mistrusted" outputs) are never reported as PASSED.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <memory>

#include "attncheck/registry.h"
#include "attncheck/tolerance.h"
#include "attncheck/verify.h"

using namespace attncheck;

namespace {

// Claims every feature and returns zeros: a plausible broken kernel.
class ZerosImplementation final : public Implementation {
 public:
  std::string name() const override { return "zeros"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.cross = c.dv_ne_dk = c.batch_heads = c.scale = c.temperature = true;
    c.causal_top_left = c.causal_bottom_right = c.key_padding = c.explicit_mask = true;
    c.empty_row_reject = c.empty_row_zero = true;
    return c;
  }
  Precision precision() const override { return Precision::fp32; }
  void forward(const Problem& p, std::span<const float> q, std::span<const float> k, std::span<const float> v,
               std::span<float> out, std::span<float>, int) override {
    validate(p, q, k, v);
    std::fill(out.begin(), out.end(), 0.0f);
  }
};

VerifyOptions quiet(int cases) {
  VerifyOptions o;
  o.seed = 99;
  o.cases = cases;
  o.failures_dir.clear();
  return o;
}

}  // namespace

TEST_CASE("an implementation returning zeros never passes") {
  ZerosImplementation zeros;
  const VerifyReport r = run_verify(zeros, quiet(20));
  CHECK_FALSE(all_passed(r));
  int failed = 0;
  for (const PropertyResult& p : r.properties) failed += p.status == Status::failed;
  CHECK(failed >= 5);
  const Property* differential = find_property("differential_reference");
  REQUIRE(differential);
  CHECK(run_property(zeros, *differential, quiet(20)).status == Status::failed);
}

TEST_CASE("a property that ran zero cases is FAILED, not PASSED") {
  auto impl = make_implementation("fused");
  const PropertyResult r = run_property(*impl, all_properties().front(), quiet(0));
  CHECK(r.status == Status::failed);
  CHECK_THAT(r.message, Catch::Contains("no case ran"));
}

TEST_CASE("a property whose generator discards everything is FAILED and says so") {
  Property discards = all_properties().front();
  discards.name = "discards_everything";
  discards.check = [](Implementation&, const Case&, int) {
    Outcome o;
    o.discard = true;
    o.message = "never exercised";
    return o;
  };
  auto impl = make_implementation("fused");
  const PropertyResult r = run_property(*impl, discards, quiet(10));
  CHECK(r.status == Status::failed);
  CHECK(r.cases == 0);
  CHECK_THAT(r.message, Catch::Contains("discarded"));
}

TEST_CASE("a run in which every property was skipped is not a pass") {
  VerifyReport r;
  PropertyResult skipped;
  skipped.status = Status::skipped;
  r.properties = {skipped, skipped};
  CHECK_FALSE(all_passed(r));
  CHECK_THAT(summary_line(r), Catch::Contains("nothing was checked"));
  r.properties.clear();
  CHECK_FALSE(all_passed(r));
}

// ------------------------------------------------- inconclusive and declined cases

namespace {

/// The "shape" property with its check replaced: call n (from 1) answers `answer(n)`.
Property scripted(const std::string& name, std::function<Outcome(int)> answer) {
  Property p = *find_property("shape");
  p.name = name;
  auto calls = std::make_shared<int>(0);
  p.check = [calls, answer](Implementation&, const Case&, int) { return answer(++*calls); };
  return p;
}

Outcome inconclusive(const std::string& why) {
  Outcome o;
  o.inconclusive = true;
  o.message = why;
  return o;
}

}  // namespace

TEST_CASE("a property whose every case is inconclusive is INCONCLUSIVE, never PASSED") {
  auto impl = make_implementation("naive-fp32");
  const Property p = scripted("always_inconclusive", [](int) { return inconclusive("the first-order model does not hold"); });
  const PropertyResult r = run_property(*impl, p, quiet(10));
  CHECK(r.status == Status::inconclusive);
  CHECK(to_string(r.status) == "INCONCLUSIVE");
  CHECK(r.cases == 0);
  // The run stops once the budget of inconclusive cases is spent.
  CHECK(r.inconclusive == kInconclusiveBudget * 10 + 1);
  CHECK(r.discarded == 0);
  CHECK(r.inconclusive_reason == "the first-order model does not hold");
  CHECK_THAT(r.message, Catch::Contains("the first-order model does not hold"));
  CHECK(inconclusive_flagged(r));

  VerifyReport report;
  report.properties = {r};
  CHECK_FALSE(all_passed(report));
  CHECK(summary_line(report) == "0 passed, 0 failed, 1 inconclusive");
  PropertyResult passed;
  passed.cases = 10;
  report.properties.push_back(passed);
  CHECK_FALSE(all_passed(report));
  CHECK(summary_line(report) == "1 passed, 0 failed, 1 inconclusive");
}

TEST_CASE("inconclusive cases are counted, never passes, the run goes on; over 20 % is flagged") {
  auto impl = make_implementation("naive-fp32");
  SECTION("every third case inconclusive: 30 judged cases need 44, 14 inconclusive (32 %)") {
    const PropertyResult r = run_property(
        *impl, scripted("third_inconclusive", [](int n) { return n % 3 == 0 ? inconclusive("row beyond the model") : Outcome{}; }),
        quiet(30));
    CHECK(r.status == Status::passed);
    CHECK(r.cases == 30);
    CHECK(r.inconclusive == 14);
    CHECK(r.inconclusive_reason == "row beyond the model");
    CHECK(inconclusive_flagged(r));
    CHECK_THAT(inconclusive_text(r), Catch::Contains("14 of 44 checked cases (32 %) inconclusive, more than 20 %"));
    VerifyReport report;
    report.properties = {r};
    CHECK(all_passed(report));
    CHECK_THAT(summary_line(report), Catch::Contains("1 passed with more than 20 % of cases inconclusive"));
  }
  SECTION("every tenth case inconclusive: 3 of 33, not flagged") {
    const PropertyResult r = run_property(
        *impl, scripted("tenth_inconclusive", [](int n) { return n % 10 == 0 ? inconclusive("rare") : Outcome{}; }),
        quiet(30));
    CHECK(r.status == Status::passed);
    CHECK(r.cases == 30);
    CHECK(r.inconclusive == 3);
    CHECK_FALSE(inconclusive_flagged(r));
  }
  SECTION("two cases in three inconclusive: past the budget, INCONCLUSIVE although some passed") {
    const PropertyResult r = run_property(
        *impl, scripted("mostly_inconclusive", [](int n) { return n % 3 != 0 ? inconclusive("mostly") : Outcome{}; }),
        quiet(30));
    CHECK(r.status == Status::inconclusive);
    CHECK(r.cases > 0);
    CHECK(r.cases < 30);
    CHECK(r.inconclusive == kInconclusiveBudget * 30 + 1);
  }
  SECTION("a failure after inconclusive cases is still a failure, with its counterexample") {
    const PropertyResult r = run_property(*impl, scripted("fails_later", [](int n) {
                                            if (n < 5) return inconclusive("early");
                                            Outcome o;
                                            o.ok = false;
                                            o.message = "wrong";
                                            return o;
                                          }),
                                          quiet(30));
    CHECK(r.status == Status::failed);
    CHECK(r.counterexample);
    CHECK(r.inconclusive == 4);
  }
}

TEST_CASE("notes of the cases are collected once each") {
  auto impl = make_implementation("naive-fp32");
  const PropertyResult r = run_property(*impl, scripted("noted", [](int n) {
                                          Outcome o;
                                          o.notes = {"flushes weights below 2^-120 to zero", "parity " + std::to_string(n % 2)};
                                          return o;
                                        }),
                                        quiet(20));
  CHECK(r.status == Status::passed);
  CHECK(r.notes == std::vector<std::string>{"flushes weights below 2^-120 to zero", "parity 1", "parity 0"});
}

TEST_CASE("declined out-of-range cases are counted and accepted; a property whose every case is declined is SKIPPED") {
  auto impl = make_implementation("naive-fp32");
  auto declined = [](const std::string& why) {
    Outcome o;
    o.unsupported = true;
    o.message = why;
    return o;
  };
  SECTION("every case declined") {
    const PropertyResult r =
        run_property(*impl, scripted("all_declined", [&](int) { return declined("K beyond fp16's largest value"); }), quiet(5));
    CHECK(r.status == Status::skipped);
    CHECK(r.cases == 0);
    CHECK(r.unsupported == kUnsupportedBudget * 5 + 1);
    CHECK_THAT(r.skipped_reason, Catch::Contains("declined every case") && Catch::Contains("K beyond fp16's largest value"));
  }
  SECTION("every other case declined") {
    const PropertyResult r =
        run_property(*impl, scripted("half_declined", [&](int n) { return n % 2 ? declined("too big") : Outcome{}; }), quiet(10));
    CHECK(r.status == Status::passed);
    CHECK(r.cases == 10);
    CHECK(r.unsupported == 10);
    CHECK(r.unsupported_reason == "too big");
    CHECK(r.inconclusive == 0);
  }
}

namespace {

/// Declines every case it is given (after validating it), as Unsupported or InvalidInput.
class Declining final : public Implementation {
 public:
  Declining(Precision p, bool invalid) : precision_(p), invalid_(invalid) {}
  std::string name() const override { return "declining"; }
  Capabilities capabilities() const override { return {}; }
  Precision precision() const override { return precision_; }
  void forward(const Problem& p, std::span<const float> q, std::span<const float> k, std::span<const float> v,
               std::span<float>, std::span<float>, int) override {
    validate(p, q, k, v);
    if (invalid_) throw InvalidInput("row 0: a logit I cannot hold");
    throw Unsupported("row 0: a logit I cannot hold");
  }

 private:
  Precision precision_;
  bool invalid_;
};

/// One query, two keys; Q[0] = q0.
Case small_case(float q0) {
  Case c;
  c.problem.shape = {1, 1, 1, 2, 1, 1};
  c.q = {q0};
  c.k = {1.0f, 0.5f};
  c.v = {1.0f, 2.0f};
  c.labels["property"] = "shape";
  return c;
}

}  // namespace

TEST_CASE("a declined case is accepted only when it is out of range for the implementation's class") {
  VerifyOptions o = quiet(1);
  for (const bool invalid : {false, true}) {
    INFO((invalid ? "InvalidInput" : "Unsupported"));
    // 1e5 is beyond fp16's largest value (65504) and well inside fp32's range.
    Declining fp16(Precision::fp16, invalid), fp32(Precision::fp32, invalid);
    const auto out_of_range = replay_case(fp16, small_case(1e5f), o);
    REQUIRE(out_of_range.size() == 1);
    CHECK(out_of_range[0].status == Status::skipped);
    CHECK(out_of_range[0].unsupported == 1);
    CHECK_THAT(out_of_range[0].unsupported_reason,
               Catch::Contains("out of range for fp16") && Catch::Contains("a logit I cannot hold"));

    const auto in_range = replay_case(fp32, small_case(1e5f), o);
    CHECK(in_range[0].status == Status::failed);
    CHECK(in_range[0].unsupported == 0);
    CHECK_THAT(in_range[0].message, Catch::Contains(invalid ? "rejected a valid case" : "declined a case inside its class's range"));
    CHECK(replay_case(fp16, small_case(2.0f), o)[0].status == Status::failed);
  }
  // Through the runner: declining a generated case inside the class's range
  // fails (fp32 cases whose logits overflow float are accepted on the way).
  Declining fp32(Precision::fp32, false);
  const PropertyResult r = run_property(fp32, *find_property("shape"), quiet(5));
  CHECK(r.status == Status::failed);
  CHECK_THAT(r.message, Catch::Contains("declined a case inside its class's range"));
  REQUIRE(r.counterexample);
  CHECK_FALSE(out_of_class_range(*r.counterexample, Precision::fp32));
}
