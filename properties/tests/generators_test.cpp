// The generators: valid cases, only what an implementation declares, the
// special sizes and values, and shrinking towards small shapes.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cmath>
#include <set>

#include "attncheck/builtin_implementations.h"
#include "attncheck/generators.h"
#include "attncheck/registry.h"
#include "attncheck/verify.h"

using namespace attncheck;

TEST_CASE("generated cases are valid inputs", "[generators]") {
  rc::prop("every generated case passes validate()", [] {
    CaseRequest r;
    const Case c = *gen_case(r);
    validate(c.problem, c.q, c.k, c.v);
    RC_ASSERT(c.problem.temperature >= 1e-3 * (1 - 1e-9));
    RC_ASSERT(c.problem.temperature <= 1e3 * (1 + 1e-9));
    RC_ASSERT(c.labels.count("aux") == 1);
  });
  rc::prop("an empty-row request plants an empty row", [] {
    CaseRequest r;
    r.empty_row = true;
    const Case c = *gen_case(r);
    validate_problem(c.problem);
    bool empty = false;
    const Shape& s = c.problem.shape;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t i = 0; i < s.n_q; ++i) {
          bool any = false;
          for (int64_t j = 0; j < s.n_k; ++j) any = any || allowed(c.problem, b, h, i, j);
          empty = empty || !any;
        }
    RC_ASSERT(empty);
  });
}

TEST_CASE("only what the implementation declares is generated", "[generators]") {
  rc::prop("an implementation supporting nothing optional gets plain square problems", [] {
    CaseRequest r;
    r.caps = Capabilities{false, false, false, false, false, false, false, false, false, true, false, false, false};
    const Case c = *gen_case(r);
    const Problem& p = c.problem;
    RC_ASSERT(p.shape.batch == 1);
    RC_ASSERT(p.shape.heads == 1);
    RC_ASSERT(p.shape.n_q == p.shape.n_k);
    RC_ASSERT(p.shape.d_v == p.shape.d_k);
    RC_ASSERT(p.causal == Causal::none);
    RC_ASSERT(p.key_lengths.empty());
    RC_ASSERT(!p.mask);
    RC_ASSERT(!p.scale);
    RC_ASSERT(p.temperature == 1.0);
    RC_ASSERT(p.empty_rows == EmptyRowPolicy::reject);
  });
  const auto missing = missing_capabilities(Capabilities{true, true, true, true, false, true, true, true, false});
  CHECK(missing == std::vector<std::string>{"temperature", "explicit_mask"});
}

TEST_CASE("sizes around the vector width and special values appear", "[generators]") {
  std::set<int64_t> lengths;
  const auto gen = gen_length(130);
  for (uint64_t seed = 0; seed < 3000; ++seed) lengths.insert(gen(rc::Random(seed), 50).value());
  for (int64_t n : {1, 2, 15, 16, 17, 48, 130}) {
    INFO(n);
    CHECK(lengths.count(n) == 1);
  }
  bool subnormal = false, zero = false, overflow = false, tie = false;
  CaseRequest r;
  const auto cases = gen_case(r);
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const Case c = cases(rc::Random(seed), 50).value();
    for (float x : c.q) subnormal = subnormal || std::fpclassify(x) == FP_SUBNORMAL, zero = zero || x == 0;
    const Shape& s = c.problem.shape;
    if (s.n_k >= 2 && std::equal(c.k.begin(), c.k.begin() + s.d_k, c.k.begin() + s.d_k)) tie = true;
    double largest = 0;
    for (int64_t i = 0; i < s.n_q; ++i)
      for (int64_t j = 0; j < s.n_k; ++j) {
        double d = 0;
        for (int64_t t = 0; t < s.d_k; ++t) d += c.q[i * s.d_k + t] * c.k[j * s.d_k + t];
        largest = std::max(largest, std::fabs(d * c.problem.logit_multiplier()));
      }
    overflow = overflow || largest > 88;
  }
  CHECK(subnormal);
  CHECK(zero);
  CHECK(overflow);
  CHECK(tie);
}

TEST_CASE("a failure shrinks to the smallest shape that shows it", "[generators]") {
  Property wide = *find_property("shape");
  wide.name = "fails_from_two_keys";
  wide.check = [](Implementation&, const Case& c, int) {
    Outcome o;
    o.ok = c.problem.shape.n_k < 2;
    o.message = "two or more keys";
    return o;
  };
  auto impl = make_implementation("naive-fp32");
  VerifyOptions options;
  options.seed = 9;
  options.failures_dir = "";
  const PropertyResult r = run_property(*impl, wide, options);
  REQUIRE(r.status == Status::failed);
  REQUIRE(r.counterexample);
  CHECK(canonical_name(r.counterexample->problem) == "b1h1q1k2d1");
  for (float x : r.counterexample->q) CHECK(x == 0);
}
