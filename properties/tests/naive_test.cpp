// The naive implementations at their edges: rounding to fp16 and bf16, the
// correct naive on logits that overflow float, each kernel-bug mutant firing
// only in its condition, and the fp16/bf16 class implementations declining
// (Unsupported) what their class cannot hold.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>

#include "attncheck/builtin_implementations.h"
#include "attncheck/case.h"
#include "attncheck/naive.h"
#include "attncheck/properties.h"
#include "attncheck/registry.h"

using namespace attncheck;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

struct Result {
  std::vector<float> out, weights;
};

Result run(Implementation& impl, const Case& c) {
  Result r;
  r.out.assign(static_cast<size_t>(c.problem.shape.out_size()), -7.0f);
  r.weights.assign(static_cast<size_t>(c.problem.shape.weights_size()), -7.0f);
  impl.forward(c.problem, c.q, c.k, c.v, r.out, r.weights, 1);
  return r;
}

Result run_flaw(Flaw flaw, const Case& c) {
  auto impl = make_naive_implementation(Precision::fp32, flaw);
  return run(*impl, c);
}

Case random_case(int64_t n_q, int64_t n_k, int64_t d, unsigned seed, float spread = 1.0f) {
  Case c;
  c.problem.shape = {1, 1, n_q, n_k, d, d};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-spread, spread);
  c.q.resize(static_cast<size_t>(n_q * d));
  c.k.resize(static_cast<size_t>(n_k * d));
  c.v.resize(static_cast<size_t>(n_k * d));
  for (auto* t : {&c.q, &c.k, &c.v})
    for (float& x : *t) x = value(rng);
  return c;
}

// d_k = d_v = 1, one query, keys and values given.
Case scalar_case(float q, std::vector<float> k, std::vector<float> v) {
  Case c;
  const auto n = static_cast<int64_t>(k.size());
  c.problem.shape = {1, 1, 1, n, 1, 1};
  c.q = {q};
  c.k = std::move(k);
  c.v = std::move(v);
  return c;
}

bool all_nan(const std::vector<float>& x) {
  for (float y : x)
    if (!std::isnan(y)) return false;
  return true;
}

}  // namespace

TEST_CASE("round_to_fp16: nearest, ties to even, subnormals, overflow", "[naive][rounding]") {
  CHECK(round_to_fp16(1.0f) == 1.0f);
  CHECK(round_to_fp16(-1.5f) == -1.5f);
  CHECK(round_to_fp16(1.0f + 0x1p-11f) == 1.0f);                     // tie, 1 is even
  CHECK(round_to_fp16(1.0f + 0x1p-11f + 0x1p-20f) == 1.0f + 0x1p-10f);  // just past the tie
  CHECK(round_to_fp16(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);       // tie, 1 + 2^-10 is odd
  CHECK(round_to_fp16(0.1f) == 0x1.998p-4f);
  CHECK(round_to_fp16(65504.0f) == 65504.0f);
  CHECK(round_to_fp16(65519.0f) == 65504.0f);
  CHECK(round_to_fp16(65520.0f) == kInf);  // tie past the largest, 65504 is odd
  CHECK(round_to_fp16(-70000.0f) == -kInf);
  CHECK(round_to_fp16(0x1p-14f) == 0x1p-14f);                        // smallest normal
  CHECK(round_to_fp16(0x1p-14f - 0x1p-26f) == 0x1p-14f);
  CHECK(round_to_fp16(0x1p-24f) == 0x1p-24f);                        // smallest subnormal
  CHECK(round_to_fp16(0x1p-25f) == 0.0f);                            // tie between 0 and 2^-24
  CHECK(round_to_fp16(0x1p-25f + 0x1p-40f) == 0x1p-24f);
  CHECK(round_to_fp16(3 * 0x1p-25f) == 0x1p-23f);                    // tie, 2^-24 is odd
  CHECK(round_to_fp16(5 * 0x1p-26f) == 0x1p-24f);                    // 1.25 steps
  CHECK(round_to_fp16(-1e-9f) == 0.0f);
  CHECK(std::signbit(round_to_fp16(-1e-9f)));
  CHECK(round_to_fp16(kInf) == kInf);
  CHECK(std::isnan(round_to_fp16(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("round_to_bf16: nearest, ties to even, subnormals, overflow", "[naive][rounding]") {
  CHECK(round_to_bf16(1.0f) == 1.0f);
  CHECK(round_to_bf16(-3.0f) == -3.0f);
  CHECK(round_to_bf16(1.0f + 0x1p-8f) == 1.0f);                      // tie, 1 is even
  CHECK(round_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
  CHECK(round_to_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);        // tie, 1 + 2^-7 is odd
  CHECK(round_to_bf16(-(1.0f + 3 * 0x1p-8f)) == -(1.0f + 0x1p-6f));
  CHECK(round_to_bf16(0.1f) == 0x1.9ap-4f);
  CHECK(round_to_bf16(1.9921875f) == 1.9921875f);                    // 0x1.fep0, representable
  CHECK(round_to_bf16(1.99609375f) == 2.0f);                         // tie 0x1.ffp0 carries into the exponent
  CHECK(round_to_bf16(0x1.fep127f) == 0x1.fep127f);                  // largest
  CHECK(round_to_bf16(0x1.fefffep127f) == 0x1.fep127f);
  CHECK(round_to_bf16(0x1.ffp127f) == kInf);                         // tie past the largest
  CHECK(round_to_bf16(-std::numeric_limits<float>::max()) == -kInf);
  CHECK(round_to_bf16(0x1p-126f) == 0x1p-126f);                      // smallest normal
  CHECK(round_to_bf16(0x1p-126f - 0x1p-134f) == 0x1p-126f);          // tie below it, rounds up to even
  CHECK(round_to_bf16(0x1p-133f) == 0x1p-133f);                      // smallest subnormal
  CHECK(round_to_bf16(0x1p-134f) == 0.0f);                           // tie between 0 and 2^-133
  CHECK(round_to_bf16(3 * 0x1p-134f) == 0x1p-132f);                  // tie, 2^-133 is odd
  CHECK(round_to_bf16(0x1p-149f) == 0.0f);
  CHECK(round_to_bf16(kInf) == kInf);
  CHECK(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(round_to_class(1.0f + 0x1p-9f, Precision::fp32) == 1.0f + 0x1p-9f);
  CHECK(round_to_class(1.0f + 0x1p-9f + 0x1p-20f, Precision::bf16) == 1.0f);
  CHECK(round_to_class(1.0f + 0x1p-9f + 0x1p-20f, Precision::fp16) == 1.0f + 0x1p-9f);
}

TEST_CASE("the correct naive computes rows whose float logits overflow", "[naive][range]") {
  auto naive = make_naive_implementation(Precision::fp32);
  SECTION("q·k = 1e40: a one-hot row") {
    const Result r = run(*naive, scalar_case(1e20f, {1e20f, 1.0f}, {1.0f, 2.0f}));
    CHECK(r.out[0] == 1.0f);
    CHECK(r.weights[0] == 1.0f);
    CHECK(r.weights[1] == 0.0f);
  }
  SECTION("every readable logit is -inf in float") {
    const Result r = run(*naive, scalar_case(1e20f, {-1e20f, -2e20f}, {3.0f, 4.0f}));
    CHECK(r.out[0] == 3.0f);
    CHECK(r.weights[0] == 1.0f);
  }
  SECTION("a dot product whose float partial sums give inf - inf") {
    Case c;
    c.problem.shape = {1, 1, 1, 2, 2, 1};
    c.q = {1e20f, 1e20f};
    c.k = {1e20f, -1e20f, 1.0f, 1.0f};  // logits 0 and 2e20/√2
    c.v = {5.0f, 6.0f};
    const Result r = run(*naive, c);
    CHECK(r.out[0] == 6.0f);
    CHECK(r.weights[1] == 1.0f);
  }
  SECTION("τ so small that finite products overflow once divided") {
    Case c = scalar_case(2.0f, {3.0f, 1.0f}, {1.0f, 2.0f});
    c.problem.temperature = 1e-300;
    const Result r = run(*naive, c);
    CHECK(r.out[0] == 1.0f);
  }
  SECTION("a masked key whose logit overflows does not touch its row") {
    Case c = scalar_case(1e20f, {1.0f, 1e20f}, {1.0f, 2.0f});
    c.problem.key_lengths = {1};
    const Result r = run(*naive, c);
    CHECK(r.out[0] == 1.0f);
    CHECK(r.weights[1] == 0.0f);
  }
  SECTION("the same in double and long double") {
    for (Precision p : {Precision::fp64, Precision::extended}) {
      auto wide = make_naive_implementation(p);
      Case c = scalar_case(1e20f, {1e20f, 1.0f}, {1.0f, 2.0f});
      c.problem.temperature = 1e-300;  // 1e40 / 1e-300 overflows double, not long double
      const Result r = run(*wide, c);
      CHECK(r.out[0] == 1.0f);
    }
  }
}

TEST_CASE("relative_error_1e4_long_rows: off by 1e-4 from n_k = 1024 only", "[naive][mutants]") {
  for (int64_t n_k : {1023, 1024, 1500}) {
    const Case c = random_case(3, n_k, 4, static_cast<unsigned>(n_k));
    const Result good = run_flaw(Flaw::none, c), bad = run_flaw(Flaw::relative_error_1e4_long_rows, c);
    INFO("n_k = " << n_k);
    for (size_t i = 0; i < good.out.size(); ++i) {
      if (n_k < 1024) {
        CHECK(bad.out[i] == good.out[i]);
      } else {
        CHECK(bad.out[i] == Approx(good.out[i] * 1.0001).epsilon(1e-6).margin(1e-12));
        if (std::fabs(good.out[i]) > 1e-3) CHECK(std::fabs(bad.out[i] / good.out[i] - 1) > 0.9e-4);
      }
    }
    CHECK(bad.weights == good.weights);
  }
}

TEST_CASE("key_dropped_past_block: key 1024 ignored only when n_k > 1024", "[naive][mutants]") {
  for (int64_t n_k : {1024, 1025, 2000}) {
    const Case c = random_case(2, n_k, 4, static_cast<unsigned>(n_k));
    const Result good = run_flaw(Flaw::none, c), bad = run_flaw(Flaw::key_dropped_past_block, c);
    INFO("n_k = " << n_k);
    if (n_k <= 1024) {
      CHECK(bad.out == good.out);
      CHECK(bad.weights == good.weights);
      continue;
    }
    for (int64_t i = 0; i < 2; ++i) {
      const auto w = [&](const Result& r, int64_t j) { return r.weights[static_cast<size_t>(i * n_k + j)]; };
      CHECK(w(good, 1024) > 0);
      CHECK(w(bad, 1024) == 0);
      double total = 0;
      for (int64_t j = 0; j < n_k; ++j) total += w(bad, j);
      CHECK(total == Approx(1.0).epsilon(1e-5));  // renormalised: row sums cannot see it
      // Every other weight grows by the dropped key's share.
      CHECK(w(bad, 0) == Approx(w(good, 0) / (1 - w(good, 1024))).epsilon(1e-5));
    }
    CHECK(bad.out != good.out);
  }
}

TEST_CASE("overflow_zeros: zero rows only where a float logit is +inf", "[naive][mutants]") {
  const Case overflowing = scalar_case(1e20f, {1e20f, 1.0f}, {1.0f, 2.0f});
  const Result good = run_flaw(Flaw::none, overflowing), bad = run_flaw(Flaw::overflow_zeros, overflowing);
  CHECK(good.out[0] == 1.0f);
  CHECK(bad.out[0] == 0.0f);
  CHECK(bad.weights == std::vector<float>{0.0f, 0.0f});
  // Large but finite logits, and logits that are -inf in float: correct.
  for (const Case& c : {scalar_case(1e18f, {1e19f, 1.0f}, {1.0f, 2.0f}),
                        scalar_case(1e20f, {-1e20f, -2e20f}, {3.0f, 4.0f}), random_case(3, 5, 4, 7)}) {
    CHECK(run_flaw(Flaw::overflow_zeros, c).out == run_flaw(Flaw::none, c).out);
  }
}

TEST_CASE("masked_overflow_nan: NaN only where a masked key's float logit is +inf", "[naive][mutants]") {
  Case masked = scalar_case(1e20f, {1.0f, 1e20f}, {1.0f, 2.0f});
  masked.problem.key_lengths = {1};
  CHECK(run_flaw(Flaw::none, masked).out[0] == 1.0f);
  const Result bad = run_flaw(Flaw::masked_overflow_nan, masked);
  CHECK(all_nan(bad.out));
  CHECK(all_nan(bad.weights));
  // The same keys unmasked, a masked key with a finite logit, and a causal
  // row whose masked key overflows only in a later row: correct.
  Case unmasked = masked;
  unmasked.problem.key_lengths.clear();
  Case finite = scalar_case(1e18f, {1.0f, 1e19f}, {1.0f, 2.0f});
  finite.problem.key_lengths = {1};
  for (const Case& c : {unmasked, finite}) {
    const Result g = run_flaw(Flaw::none, c), b = run_flaw(Flaw::masked_overflow_nan, c);
    CHECK(b.out == g.out);
    CHECK(b.weights == g.weights);
  }
  Case causal;
  causal.problem.shape = {1, 1, 2, 2, 1, 1};
  causal.problem.causal = Causal::top_left;
  causal.q = {1e-3f, 1e20f};  // row 0's masked key has logit 1e17; row 1 reads it
  causal.k = {1.0f, 1e20f};
  causal.v = {1.0f, 2.0f};
  const Result g = run_flaw(Flaw::none, causal), b = run_flaw(Flaw::masked_overflow_nan, causal);
  CHECK(b.out == g.out);
  CHECK(g.out == std::vector<float>{1.0f, 2.0f});
}

TEST_CASE("peaked_v_misaligned: the wrong V rows only on rows with a weight above 0.99", "[naive][mutants]") {
  Case c;
  c.problem.shape = {1, 1, 2, 3, 1, 1};
  c.problem.scale = 1.0;
  c.q = {10.0f, 0.01f};  // row 0: logits 10, 0, -10 (weight 0.99995); row 1: nearly flat
  c.k = {1.0f, 0.0f, -1.0f};
  c.v = {1.0f, 2.0f, 4.0f};
  const Result good = run_flaw(Flaw::none, c), bad = run_flaw(Flaw::peaked_v_misaligned, c);
  CHECK(good.weights[0] > 0.99f);
  CHECK(good.out[0] == Approx(1.0).epsilon(1e-3));
  CHECK(bad.out[0] == Approx(2.0).epsilon(1e-3));  // mixes V row 1 instead of 0
  CHECK(bad.out[1] == good.out[1]);
  c.q[0] = 2.0f;  // weights 0.87, 0.12, 0.02: not peaked
  CHECK(run_flaw(Flaw::peaked_v_misaligned, c).out == run_flaw(Flaw::none, c).out);
}

TEST_CASE("every mutant is listed once, with a killer, and registered", "[naive][mutants]") {
  std::set<std::string> names;
  for (const FlawInfo& f : all_flaws()) {
    INFO(f.name);
    CHECK(f.flaw != Flaw::none);
    CHECK(names.insert(f.name).second);
    CHECK_FALSE(f.killed_by.empty());
    CHECK(make_implementation("mutant:" + f.name)->name() == "mutant:" + f.name);
  }
  for (const char* name : {"relative_error_1e4_long_rows", "key_dropped_past_block", "overflow_zeros",
                           "masked_overflow_nan", "peaked_v_misaligned"})
    CHECK(names.count(name) == 1);
}

TEST_CASE("naive-fp16 and naive-bf16: inputs, O and A rounded to the class", "[naive][class]") {
  for (const char* name : {"naive-fp16", "naive-bf16"}) {
    auto impl = make_implementation(name);
    const Precision p = impl->precision();
    INFO(name);
    CHECK(impl->name() == name);
    CHECK(p == (std::string(name) == "naive-fp16" ? Precision::fp16 : Precision::bf16));
    CHECK(impl->capabilities().weights);
    const Case c = random_case(4, 9, 8, 3, 2.0f);
    const Result r = run(*impl, c);
    for (float x : r.out) CHECK(round_to_class(x, p) == x);
    for (float x : r.weights) CHECK(round_to_class(x, p) == x);
    // Exactly the float naive on the rounded inputs, rounded.
    Case rounded = c;
    for (auto* t : {&rounded.q, &rounded.k, &rounded.v})
      for (float& x : *t) x = round_to_class(x, p);
    const Result f = run_flaw(Flaw::none, rounded);
    for (size_t i = 0; i < r.out.size(); ++i) CHECK(r.out[i] == round_to_class(f.out[i], p));
    for (size_t i = 0; i < r.weights.size(); ++i) CHECK(r.weights[i] == round_to_class(f.weights[i], p));
    // An input below the class's precision is rounded away: V = 1 + 2^-12 reads as 1.
    const Result one = run(*impl, scalar_case(1.0f, {1.0f}, {1.0f + 0x1p-12f}));
    CHECK(one.out[0] == 1.0f);
    // Subnormals of the class survive.
    const float tiny = p == Precision::fp16 ? 0x1p-20f : 0x1p-130f;
    CHECK(run(*impl, scalar_case(1.0f, {1.0f}, {tiny})).out[0] == tiny);
  }
}

TEST_CASE("naive-fp16 and naive-bf16 decline what their class cannot hold", "[naive][class]") {
  auto fp16 = make_implementation("naive-fp16");
  auto bf16 = make_implementation("naive-bf16");
  auto throws = [](Implementation& impl, const Case& c, const std::string& needle) {
    std::vector<float> out(static_cast<size_t>(c.problem.shape.out_size()), -7.0f);
    std::vector<float> w(static_cast<size_t>(c.problem.shape.weights_size()), -7.0f);
    std::string message;
    try {
      impl.forward(c.problem, c.q, c.k, c.v, out, w, 1);
    } catch (const Unsupported& e) {
      message = e.what();
    }
    INFO(impl.name() << ": '" << message << "' should name '" << needle << "'");
    CHECK(message.find(needle) != std::string::npos);
    for (float x : out) CHECK(x == -7.0f);  // nothing written
    for (float x : w) CHECK(x == -7.0f);
  };
  SECTION("inputs beyond the largest finite value, naming the tensor and index") {
    throws(*fp16, scalar_case(1.0f, {1.0f, 65505.0f}, {1.0f, 2.0f}), "K[b=0][h=0][row=1][col=0]");
    throws(*fp16, scalar_case(-70000.0f, {1.0f}, {1.0f}), "Q[b=0][h=0][row=0][col=0]");
    throws(*bf16, scalar_case(1.0f, {1.0f, 1.0f}, {1.0f, 3.4e38f}), "V[b=0][h=0][row=1][col=0]");
    // At the largest finite value: computed.
    CHECK(run(*fp16, scalar_case(1.0f, {1.0f}, {65504.0f})).out[0] == 65504.0f);
    CHECK(run(*bf16, scalar_case(1.0f, {1.0f}, {0x1.fep127f})).out[0] == 0x1.fep127f);
  }
  SECTION("a readable key's float logit that overflows, naming the row") {
    Case c;
    c.problem.shape = {1, 2, 2, 2, 1, 1};
    c.q = {1.0f, 1.0f, 1.0f, 1e20f};
    c.k = {1.0f, 2.0f, 1e20f, 1.0f};
    c.v = {1.0f, 2.0f, 3.0f, 4.0f};
    throws(*bf16, c, "row [b=0][h=1][row=1]");
    Case small_tau = scalar_case(60000.0f, {60000.0f, 1.0f}, {1.0f, 2.0f});
    small_tau.problem.temperature = 1e-35;
    throws(*fp16, small_tau, "row [b=0][h=0][row=0]");
  }
  SECTION("a masked key's overflowing logit is no reason to decline") {
    Case c = scalar_case(1e20f, {1.0f, 1e20f}, {1.0f, 2.0f});
    c.problem.key_lengths = {1};
    CHECK(run(*bf16, c).out[0] == 1.0f);
  }
  SECTION("bad input is still InvalidInput") {
    Case c = scalar_case(1.0f, {1.0f}, {std::numeric_limits<float>::quiet_NaN()});
    std::vector<float> out(1), w(1);
    CHECK_THROWS_AS(fp16->forward(c.problem, c.q, c.k, c.v, out, w, 1), InvalidInput);
  }
}

TEST_CASE("the long-row mutants are killed by the properties named for them on a long row", "[naive][mutants][kill]") {
  Case c = random_case(4, 1500, 16, 11);
  Case positive = c;  // V in [1, 3]: O is as large as its bound's scale
  for (float& x : positive.v) x += 2.0f;
  auto killed = [](const std::string& mutant, const std::string& property, const Case& k) {
    auto impl = make_implementation("mutant:" + mutant);
    const Outcome o = find_property(property)->check(*impl, k, 1);
    UNSCOPED_INFO(mutant << " by " << property << ": " << (o.ok ? "passed" : o.message));
    return !o.ok;
  };
  CHECK(killed("relative_error_1e4_long_rows", "row_sum", c));
  CHECK(killed("relative_error_1e4_long_rows", "differential_reference", positive));
  CHECK(killed("key_dropped_past_block", "differential_reference", c));
  CHECK(killed("key_dropped_past_block", "key_value_permutation", c));
  for (const FlawInfo& f : all_flaws())
    if (f.flaw == Flaw::relative_error_1e4_long_rows || f.flaw == Flaw::key_dropped_past_block) {
      CHECK(std::count(f.killed_by.begin(), f.killed_by.end(), "differential_reference") == 1);
      CHECK(f.killed_by.size() == 2);
    }
  auto naive = make_implementation("naive-fp32");
  for (const char* property : {"differential_reference", "row_sum", "key_value_permutation"}) {
    CHECK(find_property(property)->check(*naive, c, 1).ok);
    CHECK(find_property(property)->check(*naive, positive, 1).ok);
  }
}

TEST_CASE("the overflow mutants are killed by the properties named for them on an overflowing row", "[naive][mutants][kill]") {
  // Key 1's fp32 logit overflows (1e20·1e20) for both rows: row 1 reads it,
  // row 0 masks it (causal).
  Case c;
  c.problem.shape = {1, 1, 2, 2, 2, 2};
  c.problem.causal = Causal::top_left;
  c.q = {1e20f, -0.25f, 1e20f, 1.0f};
  c.k = {1.0f, 2.0f, 1e20f, -1.0f};
  c.v = {1.0f, 2.0f, 3.0f, 4.0f};
  auto outcome = [&](const std::string& impl_name, const std::string& property) {
    auto impl = make_implementation(impl_name);
    const Outcome o = find_property(property)->check(*impl, c, 1);
    UNSCOPED_INFO(impl_name << " by " << property << ": " << (o.ok ? "passed" : o.message)
                            << (o.inconclusive ? " (inconclusive)" : "") << (o.unsupported ? " (unsupported)" : ""));
    return o;
  };
  for (const FlawInfo& f : all_flaws()) {
    if (f.flaw != Flaw::overflow_zeros && f.flaw != Flaw::masked_overflow_nan) continue;
    int kills = 0;
    for (const std::string& property : f.killed_by) {
      const Outcome o = outcome("mutant:" + f.name, property);
      kills += !o.ok && !o.discard && !o.inconclusive && !o.unsupported;
    }
    CHECK(kills >= 1);
  }
  for (const char* property : {"differential_reference", "row_sum", "mask_zero", "shape"}) {
    const Outcome o = outcome("naive-fp32", property);
    CHECK(o.ok);
  }
}
