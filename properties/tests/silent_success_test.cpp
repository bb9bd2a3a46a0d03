// No silent success: zero cases run, a generator that discards everything, a
// run in which every property was skipped, and an implementation returning
// zeros (benchdnn's "mistrusted" outputs) are never reported as PASSED.
#include <catch2/catch.hpp>

#include <algorithm>

#include "attncheck/registry.h"
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
