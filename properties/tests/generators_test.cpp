// The generators: valid cases, only what an implementation declares, the
// special sizes and values, and shrinking towards small shapes.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <set>

#include "attncheck/builtin_implementations.h"
#include "attncheck/generators.h"
#include "attncheck/registry.h"
#include "attncheck/tolerance.h"
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

namespace {

constexpr double kFloatMax = std::numeric_limits<float>::max();

double stretch_of(const Problem& p) {
  const double scale = p.effective_scale(), tau = p.temperature;
  return std::max({1.0, scale, 1 / tau, scale / tau});
}

// Σ_t q_t·k_t·scale/τ and Σ_t |q_t·k_t|·stretch for one query and key, in long double.
struct Logit {
  long double value = 0, magnitude = 0;
};
Logit logit(const Case& c, int64_t slice, int64_t i, int64_t j) {
  const Shape& s = c.problem.shape;
  Logit l;
  for (int64_t t = 0; t < s.d_k; ++t) {
    const long double x = static_cast<long double>(c.q[(slice * s.n_q + i) * s.d_k + t]) * c.k[(slice * s.n_k + j) * s.d_k + t];
    l.value += x;
    l.magnitude += std::fabs(x);
  }
  l.value *= c.problem.logit_multiplier();
  l.magnitude *= stretch_of(c.problem);
  return l;
}

double largest_abs(const Case& c) {
  double m = 0;
  for (const auto* t : {&c.q, &c.k, &c.v})
    for (float x : *t) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

std::vector<Case> sample_cases(const CaseRequest& r, int count) {
  const auto gen = gen_case(r);
  std::vector<Case> cases;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(count); ++seed) cases.push_back(gen(rc::Random(seed), 50).value());
  return cases;
}

}  // namespace

TEST_CASE("long rows: a share of the cases, with few queries and modest d", "[generators][edges]") {
  CaseRequest r;
  r.max_n = 130;
  r.max_d = 64;
  const auto shapes = gen_shape(r);
  int long_rows = 0;
  const int count = 3000;
  for (uint64_t seed = 0; seed < count; ++seed) {
    const Shape s = shapes(rc::Random(seed), 50).value();
    if (s.n_k <= r.max_n) {
      CHECK(s.n_q <= r.max_n);
      continue;
    }
    ++long_rows;
    CHECK(s.n_k >= 1000);
    CHECK(s.n_k <= 4096);
    CHECK(s.n_q <= kLongRowMaxQueries);
    CHECK(s.d_k <= 64);
    CHECK(s.d_v <= 64);
    CHECK(s.batch * s.heads == 1);
  }
  // 12 % of 3000 = 360 expected.
  CHECK(long_rows >= count * 8 / 100);
  CHECK(long_rows <= count * 16 / 100);

  std::set<int64_t> lengths;
  const auto long_lengths = gen_long_length(4096);
  for (uint64_t seed = 0; seed < 2000; ++seed) lengths.insert(long_lengths(rc::Random(seed), 50).value());
  for (int64_t n : {1000, 1024, 1025, 2048, 2049, 4096}) {
    INFO(n);
    CHECK(lengths.count(n) == 1);
  }
  CHECK(*lengths.begin() >= 1000);
  CHECK(*lengths.rbegin() <= 4096);
  CHECK(lengths.size() > 20);  // lengths in between too

  auto longest = [&](CaseRequest q) {
    const auto g = gen_shape(q);
    int64_t m = 0;
    for (uint64_t seed = 0; seed < 500; ++seed) m = std::max(m, g(rc::Random(seed), 50).value().n_k);
    return m;
  };
  CaseRequest off = r;
  off.max_long_n_k = 0;
  CHECK(longest(off) <= 130);
  CaseRequest small = r;
  small.max_n = 8;
  CHECK(longest(small) <= 8);
  CaseRequest square = r;
  square.caps.cross = false;
  CHECK(longest(square) <= 130);
  CaseRequest shorter = r;
  shorter.max_long_n_k = 1500;
  CHECK(longest(shorter) <= 1500);
  CHECK(longest(shorter) > 130);

  // A multiprecision oracle: one query, d ≤ 16.
  CaseRequest mp = r;
  mp.precision = Precision::extended;
  const auto g = gen_shape(mp);
  bool any = false;
  for (uint64_t seed = 0; seed < 500; ++seed) {
    const Shape s = g(rc::Random(seed), 50).value();
    if (s.n_k <= 130) continue;
    any = true;
    CHECK(s.n_q == 1);
    CHECK(s.d_k <= 16);
    CHECK(s.d_v <= 16);
  }
  CHECK(any);
}

TEST_CASE("long rows appear in every property's cases and shrink to the shortest long row", "[generators][edges]") {
  // A property that fails only on long rows shrinks to the smallest of them.
  Property wide = *find_property("shape");
  wide.name = "fails_from_1000_keys";
  wide.check = [](Implementation&, const Case& c, int) {
    Outcome o;
    o.ok = c.problem.shape.n_k < 1000;
    o.message = "a long row";
    return o;
  };
  auto impl = make_implementation("naive-fp32");
  VerifyOptions options;
  options.seed = 3;
  options.failures_dir = "";
  const PropertyResult r = run_property(*impl, wide, options);
  REQUIRE(r.status == Status::failed);
  REQUIRE(r.counterexample);
  CHECK(canonical_name(r.counterexample->problem) == "b1h1q1k1000d1");
}

TEST_CASE("edges: peaked rows and products past the float maximum for fp32", "[generators][edges]") {
  CaseRequest r;
  r.max_n = 48;  // ordinary shapes only: cheap to scan
  const std::vector<Case> cases = sample_cases(r, 600);
  int overflow = 0, near_max_inputs = 0, peaked = 0, out_of_range = 0;
  for (const Case& c : cases) {
    const Shape& s = c.problem.shape;
    CHECK(largest_abs(c) <= kFloatMax);
    if (largest_abs(c) >= 1e18) ++near_max_inputs;
    if (out_of_class_range(c, Precision::fp32)) ++out_of_range;
    bool case_overflow = false, case_peaked = false;
    for (int64_t slice = 0; slice < s.batch * s.heads; ++slice)
      for (int64_t i = 0; i < s.n_q; ++i) {
        long double best = -1, second = -1;  // the row's two largest logits, by value
        bool finite = true;
        std::vector<long double> row;
        for (int64_t j = 0; j < s.n_k; ++j) {
          const Logit l = logit(c, slice, i, j);
          if (std::fabs(l.value) > kFloatMax) case_overflow = true, finite = false;
          row.push_back(l.value);
        }
        if (!finite || row.size() < 2) continue;
        std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<>());
        best = row[0], second = row[1];
        // Near one-hot: a logit of 1e5 or more, ahead of the next by 100 or more.
        if (std::fabs(best) >= 1e5 && std::fabs(best) <= 1e7 && best - second >= 100) case_peaked = true;
      }
    overflow += case_overflow;
    peaked += case_peaked;
  }
  INFO("overflow " << overflow << ", near-max inputs " << near_max_inputs << ", peaked " << peaked
                   << ", out of fp32's range " << out_of_range);
  CHECK(overflow >= 10);
  CHECK(near_max_inputs >= 30);
  CHECK(peaked >= 20);
  CHECK(out_of_range >= overflow);
}

TEST_CASE("edges: fp16 cases stay within the fp16 class", "[generators][edges]") {
  CaseRequest r;
  r.precision = Precision::fp16;
  r.max_n = 48;
  const double largest = precision_class(Precision::fp16).largest;
  int large_logits = 0;
  for (bool integer : {false, true}) {
    r.integer_qk = integer;
    for (const Case& c : sample_cases(r, integer ? 200 : 600)) {
      const Shape& s = c.problem.shape;
      REQUIRE(largest_abs(c) <= largest);
      REQUIRE(!out_of_class_range(c, Precision::fp16));
      long double worst = 0;
      for (int64_t slice = 0; slice < s.batch * s.heads; ++slice)
        for (int64_t i = 0; i < s.n_q; ++i)
          for (int64_t j = 0; j < s.n_k; ++j) worst = std::max(worst, logit(c, slice, i, j).magnitude);
      REQUIRE(worst <= largest);
      if (worst >= 1000) ++large_logits;
      if (integer)
        for (float x : c.q) REQUIRE(x == std::round(x));
    }
  }
  CHECK(large_logits >= 20);  // peaked rows, scaled to the class, still reach large logits
}

namespace {

// Records what every forward() call received, then delegates.
class Recorder : public Implementation {
 public:
  explicit Recorder(std::unique_ptr<Implementation> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  Precision precision() const override { return inner_->precision(); }
  void forward(const Problem& p, std::span<const float> q, std::span<const float> k, std::span<const float> v,
               std::span<float> out, std::span<float> weights, int threads) override {
    Case c;
    c.problem = p;
    c.q.assign(q.begin(), q.end());
    c.k.assign(k.begin(), k.end());
    c.v.assign(v.begin(), v.end());
    largest_input = std::max(largest_input, largest_abs(c));
    const Shape& s = p.shape;
    double qmax = 0;
    for (float x : c.q) qmax = std::max(qmax, static_cast<double>(std::fabs(x)));
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t i = 0; i < s.n_q; ++i)
          for (int64_t j = 0; j < s.n_k; ++j)
            if (!allowed(p, b, h, i, j) && std::fabs(logit(c, b * s.heads + h, i, j).value) > kFloatMax) {
              masked_overflow = true;
              if (qmax >= 1e3) masked_overflow_large_q = true;
            }
    inner_->forward(p, q, k, v, out, weights, threads);
  }
  double largest_input = 0;
  bool masked_overflow = false, masked_overflow_large_q = false;

 private:
  std::unique_ptr<Implementation> inner_;
};

}  // namespace

TEST_CASE("mask_zero meets masked keys whose logits overflow float, with large queries", "[generators][edges]") {
  Recorder impl(make_implementation("naive-fp32"));
  VerifyOptions options;
  options.seed = 5;
  options.cases = 60;
  options.max_n = 48;
  options.failures_dir = "";
  const PropertyResult r = run_property(impl, *find_property("mask_zero"), options);
  CHECK(r.status == Status::passed);
  CHECK(impl.masked_overflow);
  CHECK(impl.masked_overflow_large_q);
  CHECK(impl.largest_input <= kFloatMax);
}

TEST_CASE("no property hands an fp16 implementation a value beyond fp16", "[generators][edges]") {
  Recorder impl(make_implementation("naive-fp16"));
  VerifyOptions options;
  options.seed = 11;
  options.cases = 20;
  options.failures_dir = "";
  for (const Property& p : all_properties()) {
    if (p.name == "input_validation") continue;  // bad inputs (±inf) on purpose
    INFO(p.name);
    impl.largest_input = 0;
    (void)run_property(impl, p, options);
    CHECK(impl.largest_input <= precision_class(Precision::fp16).largest);
  }
}

TEST_CASE("narrow classes: most cases have logits the class resolves, a minority does not", "[generators][edges]") {
  for (Precision p : {Precision::fp16, Precision::bf16}) {
    INFO(to_string(p));
    CaseRequest r;
    r.precision = p;
    r.max_n = 48;
    const double limit = resolvable_logit(p);
    REQUIRE(std::isfinite(limit));
    for (bool integer : {false, true}) {
      INFO(integer);
      r.integer_qk = integer;
      // Integer Q and K: Σ|q·k| times the zero limit's gap, not the case's own scale.
      const double integer_limit = std::floor(2 * limit / zero_limit_logit_gap(p));
      int resolved = 0, beyond = 0;
      const int n = 400;
      for (const Case& c : sample_cases(r, n)) {
        const Shape& s = c.problem.shape;
        if (p == Precision::fp16) REQUIRE(!out_of_class_range(c, p));  // bf16 holds float's near-max edges
        long double worst = 0;
        for (int64_t slice = 0; slice < s.batch * s.heads; ++slice)
          for (int64_t i = 0; i < s.n_q; ++i)
            for (int64_t j = 0; j < s.n_k; ++j) {
              const Logit l = logit(c, slice, i, j);
              worst = std::max(worst, integer ? l.magnitude / stretch_of(c.problem) : l.magnitude);
            }
        if (worst <= (integer ? integer_limit : limit)) ++resolved;
        else if (worst > 4 * (integer ? integer_limit : limit)) ++beyond;
        if (integer)
          for (float x : c.q) REQUIRE(x == std::round(x));
      }
      CHECK(resolved >= n * 85 / 100);
      CHECK(beyond >= n * 3 / 100);  // the inconclusive path is still exercised
    }
  }
}

TEST_CASE("float and wider classes draw no resolvable scaling", "[generators][edges]") {
  CHECK(std::isinf(resolvable_logit(Precision::fp32)));
  CHECK(zero_limit_logit_gap(Precision::fp32) == 100.0);
  CHECK(zero_limit_logit_gap(Precision::fp16) == 20.0);
  CaseRequest r;
  r.max_n = 48;
  int large = 0;
  for (const Case& c : sample_cases(r, 300)) {
    const Shape& s = c.problem.shape;
    long double worst = 0;
    for (int64_t i = 0; i < s.n_q; ++i)
      for (int64_t j = 0; j < s.n_k; ++j) worst = std::max(worst, logit(c, 0, i, j).magnitude);
    if (worst > 1000) ++large;
  }
  CHECK(large >= 300 / 5);  // fp32 cases keep their large logits
}

TEST_CASE("large tensors are drawn from a seed, small ones element by element", "[generators]") {
  // Element by element, a tensor's values shrink to zero one by one; from a
  // seed, they do not shrink at all.
  auto shrunk = [](size_t min_size) {
    Property p = *find_property("shape");
    p.name = "fails_with_a_nonzero_query";
    p.check = [min_size](Implementation&, const Case& c, int) {
      Outcome o;
      o.ok = c.q.size() < min_size || std::all_of(c.q.begin(), c.q.end(), [](float x) { return x == 0; });
      o.message = "a nonzero query";
      return o;
    };
    auto impl = make_implementation("naive-fp32");
    VerifyOptions options;
    options.seed = 3;
    options.max_n = 48;
    options.shrink_budget = 100000;  // enough to shrink a few hundred values one by one
    options.failures_dir = "";
    const PropertyResult r = run_property(*impl, p, options);
    REQUIRE(r.status == Status::failed);
    REQUIRE(r.counterexample);
    return r.counterexample->q;
  };
  auto nonzero = [](const std::vector<float>& q) {
    return std::count_if(q.begin(), q.end(), [](float x) { return x != 0; });
  };
  const std::vector<float> small = shrunk(8);
  REQUIRE(small.size() <= static_cast<size_t>(kElementwiseMaxElements));
  CHECK(nonzero(small) == 1);  // shrunk value by value
  const std::vector<float> large = shrunk(kElementwiseMaxElements + 1);
  REQUIRE(large.size() > static_cast<size_t>(kElementwiseMaxElements));
  CHECK(nonzero(large) > 1);  // from a seed: not shrunk value by value
}
