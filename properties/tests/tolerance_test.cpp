// The tolerance model (docs/tolerance.md) at its edges: perturbations just
// inside and outside the bound, gross errors on peaked rows of huge logits,
// long rows where a worst-case bound grew too loose, precision classes,
// flushed weights, the first-order limit, the range of a class, the oracle.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "attncheck/builtin_implementations.h"
#include "attncheck/properties.h"
#include "attncheck/tolerance.h"

using namespace attncheck;

namespace {

Case random_case(int64_t n_q, int64_t n_k, int64_t d, unsigned seed, float lo = -2, float hi = 2) {
  Case c;
  c.problem.shape = {1, 1, n_q, n_k, d, d};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(lo, hi);
  for (auto* t : {&c.q, &c.k, &c.v}) {
    t->resize(static_cast<size_t>((t == &c.q ? n_q : n_k) * d));
    for (float& x : *t) x = value(rng);
  }
  return c;
}

Case one_query(std::vector<float> q, std::vector<float> k, std::vector<float> v, int64_t d_k = 1) {
  Case c;
  const int64_t n_k = static_cast<int64_t>(k.size()) / d_k;
  c.problem.shape = {1, 1, 1, n_k, d_k, static_cast<int64_t>(v.size()) / n_k};
  c.q = std::move(q), c.k = std::move(k), c.v = std::move(v);
  return c;
}

// Returns what it is told to: the exact output moved by `fraction` of the
// bound (alternating in sign), or a fixed O (and A).
class Scripted : public Implementation {
 public:
  Scripted(double fraction, Precision precision = Precision::fp32) : fraction_(fraction), precision_(precision) {}
  Scripted(std::vector<float> out, std::vector<float> weights, Precision precision)
      : precision_(precision), out_(std::move(out)), weights_(std::move(weights)) {}
  std::string name() const override { return "scripted"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.weights = !weights_.empty();
    return c;
  }
  Precision precision() const override { return precision_; }
  void forward(const Problem& p, std::span<const float> q, std::span<const float> k, std::span<const float> v,
               std::span<float> out, std::span<float> weights, int) override {
    if (!out_.empty()) {
      std::copy(out_.begin(), out_.end(), out.begin());
      std::copy(weights_.begin(), weights_.end(), weights.begin());
      return;
    }
    Case c;
    c.problem = p;
    c.q.assign(q.begin(), q.end());
    c.k.assign(k.begin(), k.end());
    c.v.assign(v.begin(), v.end());
    const std::vector<double> exact = oracle_attention(choose_oracle(p, precision_), c, nullptr);
    const ErrorBounds eb = forward_error_bounds(c, {precision_});
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<float>(exact[i] + (i % 2 ? -1 : 1) * fraction_ * eb.out[i]);
  }

 private:
  double fraction_ = 0;
  Precision precision_;
  std::vector<float> out_, weights_;
};

Outcome differential(Implementation& impl, const Case& c) {
  return find_property("differential_reference")->check(impl, c, 1);
}

}  // namespace

TEST_CASE("a perturbation just inside the bound passes and just outside fails", "[tolerance]") {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const Case c = random_case(3, 7, 5, seed);
    Scripted inside(0.8), outside(1.25);
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

TEST_CASE("correct fp32 code reaches a sizeable share of the bound, short rows and long", "[tolerance]") {
  // Tightness: the bound is sound but not vacuous. A worst-case (n·u) bound sat
  // 1,000 to 14,000 times above the real error at these lengths.
  auto fused = make_fused_implementation();
  auto naive = make_naive_implementation(Precision::fp32);
  for (int64_t n_k : {16, 256, 4096}) {
    const Case c = random_case(8, n_k, 64, 7, 0, 1);
    for (Implementation* impl : {fused.get(), naive.get()}) {
      const Outcome o = differential(*impl, c);
      INFO(impl->name() << " n_k " << n_k << ": " << o.message);
      CHECK(o.ok);
      CHECK_FALSE(o.inconclusive);
      REQUIRE(o.worst_ratio);
      CHECK(*o.worst_ratio > 1.0 / 200);
      CHECK(*o.worst_ratio < 0.25);
    }
  }
}

TEST_CASE("a relative 1e-3 error is caught on long rows", "[tolerance]") {
  auto relative = make_naive_implementation(Precision::fp32, Flaw::relative_error_1e3);
  auto fp16 = make_naive_implementation(Precision::fp32, Flaw::fp16_weights);
  for (int64_t n_k : {9, 1024, 4096}) {
    const Case c = random_case(4, n_k, 16, 3);
    INFO("n_k " << n_k);
    CHECK_FALSE(differential(*relative, c).ok);
    CHECK_FALSE(differential(*fp16, c).ok);
  }
}

TEST_CASE("a gross error on a peaked row of huge logits is caught", "[tolerance]") {
  // q = 1000, k = (1000, 999): logits 1e6 and 999000, the row is one-hot on key
  // 0 and O = 1. Returning V row 1 (a misaligned V) must fail, however large the
  // logits: their common error cancels in the softmax.
  const Case c = one_query({1000}, {1000, 999}, {1, 2});
  Scripted misaligned({2.0f}, {}, Precision::fp32), right({1.0f}, {}, Precision::fp32);
  const Outcome bad = differential(misaligned, c);
  CHECK_FALSE(bad.ok);
  CHECK(*bad.worst_ratio > 1e6);
  CHECK(differential(right, c).ok);
  const ErrorBounds eb = forward_error_bounds(c, {Precision::fp32});
  CHECK(eb.out[0] < 1e-6);
  CHECK(eb.inconclusive_reason.empty());
}

TEST_CASE("rows beyond the first-order model are inconclusive, and still held to the hull", "[tolerance]") {
  // Logits of 8e6 about 1.5 apart: fp32 cannot resolve their difference.
  const Case c = one_query({8000}, {1000, 999.9998f}, {1, 2});
  const ErrorBounds eb = forward_error_bounds(c, {Precision::fp32});
  CHECK(eb.inconclusive_row[0] == 1);
  CHECK_FALSE(eb.inconclusive_reason.empty());
  Scripted inside_hull({1.5f}, {}, Precision::fp32), outside_hull({2.5f}, {}, Precision::fp32);
  const Outcome in = differential(inside_hull, c);
  CHECK(in.ok);
  CHECK(in.inconclusive);
  CHECK_FALSE(differential(outside_hull, c).ok);
  // The same row in fp64 is well inside the model.
  CHECK(forward_error_bounds(c, {Precision::fp64}).inconclusive_row[0] == 0);
}

TEST_CASE("a weight in float's bottom binades flushed to zero is a note, not a failure", "[tolerance]") {
  // Exact weights of key 1: e^-87 / (1 + e^-87) ≈ 1.65e-38, below 2^-120.
  const Case c = one_query({1}, {0, -87}, {1, 1});
  const double tiny = std::exp(-87.0);
  Scripted flushed({1.0f}, {1.0f, 0.0f}, Precision::fp32);
  const Outcome o = differential(flushed, c);
  INFO(o.message);
  CHECK(o.ok);
  REQUIRE(o.notes.size() == 1);
  CHECK(o.notes[0].find("flushes weights below") != std::string::npos);
  // A wrong non-zero value there is still a failure; a flushed weight above the
  // note's threshold too.
  Scripted wrong({1.0f}, {1.0f, static_cast<float>(4 * tiny)}, Precision::fp32);
  CHECK_FALSE(differential(wrong, c).ok);
  const Case bigger = one_query({1}, {0, -80}, {1, 1});
  CHECK_FALSE(differential(flushed, bigger).ok);
}

TEST_CASE("an fp16-class implementation is judged by fp16's resolution and range", "[tolerance]") {
  // V = -8.9e-16 cannot be held by fp16 (below its subnormals): 0 is right for fp16, wrong for fp32.
  const Case c = one_query({1}, {1}, {-8.9e-16f});
  Scripted zero16({0.0f}, {1.0f}, Precision::fp16), zero32({0.0f}, {1.0f}, Precision::fp32);
  CHECK(differential(zero16, c).ok);
  CHECK_FALSE(differential(zero32, c).ok);
  // A relative error of 2^-12 is fp16 rounding, not fp32's.
  const Case d = random_case(2, 5, 4, 9);
  Scripted rounded(0.5, Precision::fp16);
  CHECK(differential(rounded, d).ok);
  const ErrorBounds b16 = forward_error_bounds(d, {Precision::fp16}), b32 = forward_error_bounds(d, {Precision::fp32});
  for (size_t i = 0; i < b16.out.size(); ++i) CHECK(b16.out[i] > 100 * b32.out[i]);
  CHECK(out_of_class_range(d, Precision::fp16) == std::nullopt);
  Case big = d;
  big.v[3] = 1e5f;
  const auto why = out_of_class_range(big, Precision::fp16);
  REQUIRE(why);
  CHECK(why->find("V[0][0][0][3]") != std::string::npos);
  CHECK(out_of_class_range(big, Precision::fp32) == std::nullopt);
}

TEST_CASE("a product that overflows float makes a case out of fp32's range, naming the row", "[tolerance]") {
  const Case c = one_query({1e20f}, {1e20f, 1}, {1, 2});
  const auto why = out_of_class_range(c, Precision::fp32);
  REQUIRE(why);
  CHECK(why->find("row [0][0][0]") != std::string::npos);
  CHECK(why->find("key 0") != std::string::npos);
  CHECK(out_of_class_range(c, Precision::fp64) == std::nullopt);
  // A masked key's overflow is not out of range: it must never matter.
  Case masked = c;
  masked.problem.key_lengths = {0};
  masked.k = {1, 1e20f};
  masked.problem.key_lengths = {1};
  CHECK(out_of_class_range(masked, Precision::fp32) == std::nullopt);
  // Zeros for that row are wrong, whatever the range.
  Scripted zeros({0.0f}, {}, Precision::fp32);
  CHECK_FALSE(differential(zeros, c).ok);
  // τ small enough to overflow the logit only after the division.
  Case cold = one_query({1e19f}, {1e19f, 1}, {1, 2});
  CHECK(out_of_class_range(cold, Precision::fp32) == std::nullopt);
  cold.problem.temperature = 1e-3;
  CHECK(out_of_class_range(cold, Precision::fp32));
}

TEST_CASE("the accumulation factor is the worst case for short sums and grows like sqrt(n) for long ones",
          "[tolerance]") {
  const double u = 0x1p-24;
  CHECK(accumulation_factor(16, u) == Approx(16 * u / (1 - 16 * u)));
  CHECK(accumulation_factor(4096, u) < 4096 * u / 7);
  CHECK(accumulation_factor(4096, u) == Approx(kLambda * 64 * u).epsilon(1e-3));
  CHECK(accumulation_factor(16384, u) == Approx(2 * accumulation_factor(4096, u)).epsilon(1e-3));
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

// The minimal counterexamples of fresh-seed runs of the fused path that the
// rule failed before it left out out_reordering (first two sections) and rows
// beyond the first-order model (third): correct output whose only difference
// from a luckily exact naive peer was rounding order or luck.
TEST_CASE("the naive-ratio rule does not count rounding the logits and output twice more, and only that",
          "[tolerance]") {
  const Property* rule = find_property("differential_naive_ratio");
  auto naive_output = [](const Case& c) {
    std::vector<float> out(static_cast<size_t>(c.problem.shape.out_size()));
    make_naive_peer(Precision::fp32)->forward(c.problem, c.q, c.k, c.v, out, {}, 1);
    return out;
  };
  SECTION("two keys with equal values: one unit in the last place of the output") {
    const float x = -0.03139019012451172f;
    const Case c = one_query({1, 0}, {-3, 0, -2, 0}, {x, x}, 2);
    REQUIRE(naive_output(c)[0] == x);  // the peer is exact here
    Scripted one_ulp({std::nextafter(x, -1.0f)}, {}, Precision::fp32);
    Scripted three_ulps({std::nextafter(std::nextafter(std::nextafter(x, -1.0f), -1.0f), -1.0f)}, {},
                        Precision::fp32);
    CHECK(rule->check(one_ulp, c, 1).ok);
    const Outcome bad = rule->check(three_ulps, c, 1);
    INFO(bad.message);
    CHECK_FALSE(bad.ok);
    CHECK(differential(three_ulps, c).ok);  // within the bound: only the rule catches it
  }
  SECTION("τ = 0.0034 and d_k = 1: the logit 31.7 rounded once") {
    Case c = one_query({-64.15625f}, {0.0f, -0.0016593560576438904f, 4.267349140718579e-08f, 0.18224430084228516f},
                       {-1, 0, 1, -0.0f, -3, -3, -1, 0});
    c.problem.temperature = 0.003357376142429545;
    const double exact = -5.0798383890907387e-14, fused = -5.079828362965742e-14;  // O[1]
    REQUIRE(std::fabs(naive_output(c)[1] - exact) < 0.1 * std::fabs(fused - exact));  // the peer was lucky
    Scripted as_fused({1.0f, static_cast<float>(fused)}, {}, Precision::fp32);
    Scripted four_times({1.0f, static_cast<float>(exact + 4 * (fused - exact))}, {}, Precision::fp32);
    CHECK(rule->check(as_fused, c, 1).ok);
    const Outcome bad = rule->check(four_times, c, 1);
    INFO(bad.message);
    CHECK_FALSE(bad.ok);
    CHECK(differential(four_times, c).ok);
  }
  SECTION("a row beyond the first-order model is left to the hull, unless not finite") {
    // Logits near −6.2e20: fp32 cannot tell key 0 from key 2 (exactly, key 2
    // takes all the weight); splitting the weight between them is as correct.
    const Case c = one_query({-6.393099804391925e+19f, -2.2137602847769887e+18f, -1.0135797775435039e+18f},
                             {16.0f, 16.000011444091797f, 16.0f, 15.999996185302734f, 16.000015258789062f,
                              66.58648681640625f, 16.0f, 16.0f, 16.0f, 16.031536102294922f, 15.94433879852295f,
                              15.302501678466797f},
                             {1, -3, 3, 1, -2, 1, 2, 1}, 3);
    REQUIRE(forward_error_bounds(c, {Precision::fp32}).inconclusive_row[0] == 1);
    Scripted split({-0.5f, -1.0f}, {}, Precision::fp32), nan({-0.5f, std::nanf("")}, {}, Precision::fp32);
    CHECK(rule->check(split, c, 1).ok);
    CHECK_FALSE(rule->check(nan, c, 1).ok);
  }
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

TEST_CASE("the naive-ratio rule measures errors in units of each element's bound, and NaN is no allowance",
          "[tolerance]") {
  const Property* rule = find_property("differential_naive_ratio");
  // Rows at very different scales: under a rule with one case-wide allowance
  // (k × the naive peer's largest error) the large row's error would excuse
  // the small row's.
  Case c = random_case(2, 16, 8, 5);
  for (int64_t t = 0; t < 8; ++t) c.q[static_cast<size_t>(t)] *= 300;
  Scripted half(0.5), correct(0.0);
  const Outcome bad = rule->check(half, c, 1);
  INFO(bad.message);
  CHECK_FALSE(bad.ok);
  CHECK(rule->check(correct, c, 1).ok);
  Scripted nan({std::nanf("")}, {}, Precision::fp32);
  const Case one = one_query({1}, {1, 2}, {1, 2});
  CHECK_FALSE(rule->check(nan, one, 1).ok);
}
