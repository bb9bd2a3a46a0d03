// The tolerance model at its edges: a perturbation just inside the bound
// passes, just outside fails; the two mutants it must catch are caught; the
// oracle follows the size.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "attncheck/builtin_implementations.h"
#include "attncheck/properties.h"
#include "attncheck/tolerance.h"

using namespace attncheck;

namespace {

Case random_case(int64_t n_q, int64_t n_k, int64_t d, unsigned seed) {
  Case c;
  c.problem.shape = {1, 1, n_q, n_k, d, d};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-2, 2);
  for (auto* t : {&c.q, &c.k, &c.v}) {
    t->resize(static_cast<size_t>((t == &c.q ? n_q : n_k) * d));
    for (float& x : *t) x = value(rng);
  }
  return c;
}

// The exact output moved by `fraction` of the fp32 bound, alternating in sign.
class Perturbed : public Implementation {
 public:
  explicit Perturbed(double fraction) : fraction_(fraction) {}
  std::string name() const override { return "perturbed"; }
  Capabilities capabilities() const override { return {}; }
  Precision precision() const override { return Precision::fp32; }
  void forward(const Problem& p, std::span<const float> q, std::span<const float> k, std::span<const float> v,
               std::span<float> out, std::span<float>, int) override {
    Case c;
    c.problem = p;
    c.q.assign(q.begin(), q.end());
    c.k.assign(k.begin(), k.end());
    c.v.assign(v.begin(), v.end());
    const std::vector<double> exact = oracle_attention(Oracle::mp50, c, nullptr);
    const ErrorBounds eb = forward_error_bounds(c, {unit_roundoff(Precision::fp32)});
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<float>(exact[i] + (i % 2 ? -1 : 1) * fraction_ * eb.out[i]);
  }

 private:
  double fraction_;
};

Outcome differential(Implementation& impl, const Case& c) {
  return find_property("differential_reference")->check(impl, c, 1);
}

}  // namespace

TEST_CASE("a perturbation just inside the bound passes and just outside fails", "[tolerance]") {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const Case c = random_case(3, 7, 5, seed);
    Perturbed inside(0.8), outside(1.25);
    const Outcome in = differential(inside, c), out = differential(outside, c);
    INFO("seed " << seed << ": " << out.message);
    CHECK(in.ok);
    REQUIRE(in.worst_ratio);
    CHECK(*in.worst_ratio > 0.7);
    CHECK(*in.worst_ratio < 0.9);
    CHECK_FALSE(out.ok);
    CHECK(*out.worst_ratio > 1.1);
    CHECK(*out.worst_ratio < 1.4);
  }
}

TEST_CASE("the bound catches a relative 1e-3 error and fp16-rounded weights, not correct fp32", "[tolerance]") {
  auto relative = make_naive_implementation(Precision::fp32, Flaw::relative_error_1e3);
  auto fp16 = make_naive_implementation(Precision::fp32, Flaw::fp16_weights);
  auto correct = make_naive_implementation(Precision::fp32);
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const Case c = random_case(4, 9, 8, seed);
    CHECK_FALSE(differential(*relative, c).ok);
    CHECK_FALSE(differential(*fp16, c).ok);
    const Outcome o = differential(*correct, c);
    CHECK(o.ok);
    CHECK(*o.worst_ratio < 0.25);  // correct code sits well inside the bound
  }
}

TEST_CASE("the bound grows with n_k, d_k and the logit magnitude", "[tolerance]") {
  const Case small = random_case(2, 4, 4, 3);
  Case big_logits = small;
  for (float& x : big_logits.q) x *= 64;
  const Case longer = random_case(2, 64, 4, 3);
  auto worst = [](const Case& c) {
    const ErrorBounds eb = forward_error_bounds(c, {0x1p-24});
    double w = 0;
    for (size_t i = 0; i < eb.out.size(); ++i) w = std::max(w, eb.out[i] / eb.mixed[i]);
    return w;
  };
  CHECK(worst(big_logits) > 10 * worst(small));
  CHECK(worst(longer) > worst(small));
  const ErrorBounds eb = forward_error_bounds(small, {0x1p-24});
  for (size_t i = 0; i < eb.out.size(); ++i) CHECK(eb.out[i] < 1e-4 * eb.mixed[i]);
}

TEST_CASE("compare fails NaN and anything over a zero bound", "[tolerance]") {
  const std::vector<float> got = {1.0f, std::nanf("")};
  const std::vector<double> expected = {1.0, 1.0}, bound = {0.0, 1.0};
  Comparison c = compare(got, expected, bound);
  CHECK_FALSE(c.ok);
  CHECK(c.worst_index == 1);
  CHECK(std::isinf(c.worst_ratio));
  const std::vector<float> masked = {0.0f};
  CHECK(compare(masked, std::vector<double>{0.0}, std::vector<double>{0.0}).ok);
  CHECK_FALSE(compare(std::vector<float>{1e-30f}, std::vector<double>{0.0}, std::vector<double>{0.0}).ok);
}

TEST_CASE("the oracle follows the size and is trusted", "[tolerance]") {
  Problem small;
  small.shape = {1, 1, 8, 8, 16, 16};
  Problem large;
  large.shape = {2, 4, 256, 256, 64, 64};
  CHECK(choose_oracle(small, Precision::fp32) == Oracle::mp50);
  CHECK(choose_oracle(large, Precision::fp32) == Oracle::long_double);
  CHECK(choose_oracle(large, Precision::extended) == Oracle::mp50);
  CHECK(choose_oracle(large, Precision::multiprecision) == Oracle::mp100);
  for (Precision p : {Precision::fp32, Precision::fp64, Precision::extended, Precision::multiprecision})
    for (const Problem* prob : {&small, &large})
      CHECK(unit_roundoff(choose_oracle(*prob, p)) <= kOracleTrust * unit_roundoff(p));
}
