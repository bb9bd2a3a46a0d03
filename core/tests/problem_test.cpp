#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "attncheck/problem.h"

using namespace attncheck;
using Catch::Matchers::Contains;

namespace {

Problem square(int64_t n, int64_t d) {
  Problem p;
  p.shape = {1, 1, n, n, d, d};
  return p;
}

struct Inputs {
  std::vector<float> q, k, v;
  explicit Inputs(const Shape& s)
      : q(static_cast<size_t>(s.q_size()), 0.5f),
        k(static_cast<size_t>(s.k_size()), 0.25f),
        v(static_cast<size_t>(s.v_size()), 1.0f) {}
};

}  // namespace

TEST_CASE("default scale is 1/sqrt(d_k) and the logit multiplier folds in temperature") {
  Problem p = square(4, 16);
  CHECK(p.effective_scale() == 0.25);
  p.temperature = 0.5;
  CHECK(p.logit_multiplier() == 0.5);
  p.scale = 2.0;
  CHECK(p.logit_multiplier() == 4.0);
}

TEST_CASE("causal alignments: top-left masks j > i, bottom-right masks j > i + n_k - n_q") {
  Problem p;
  p.shape = {1, 1, 2, 5, 1, 1};
  p.causal = Causal::top_left;
  CHECK(key_limit(p, 0, 0) == 1);
  CHECK(key_limit(p, 0, 1) == 2);
  p.causal = Causal::bottom_right;
  CHECK(key_limit(p, 0, 0) == 4);
  CHECK(key_limit(p, 0, 1) == 5);
  // More queries than keys: the first rows of a bottom-right mask are empty.
  p.shape = {1, 1, 5, 2, 1, 1};
  CHECK(key_limit(p, 0, 0) == 0);
  CHECK(key_limit(p, 0, 2) == 0);
  CHECK(key_limit(p, 0, 3) == 1);
  CHECK(key_limit(p, 0, 4) == 2);
}

TEST_CASE("masks combine: causal, key lengths and an explicit mask with broadcasting") {
  Problem p;
  p.shape = {2, 2, 2, 3, 1, 1};
  p.causal = Causal::bottom_right;
  p.key_lengths = {3, 1};
  ExplicitMask m;
  m.batch = 1;  // broadcast over batch
  m.heads = 2;
  m.allowed = {1, 0, 1, 1, 1, 1,   // head 0
               1, 1, 1, 1, 1, 0};  // head 1
  p.mask = m;
  CHECK(allowed(p, 0, 0, 0, 0));
  CHECK_FALSE(allowed(p, 0, 0, 0, 1));  // explicit mask
  CHECK_FALSE(allowed(p, 0, 0, 0, 2));  // causal (bottom-right: row 0 reads keys 0..1)
  CHECK(allowed(p, 0, 1, 1, 1));
  CHECK_FALSE(allowed(p, 0, 1, 1, 2));  // explicit mask, head 1
  CHECK_FALSE(allowed(p, 1, 0, 1, 1));  // key length of batch 1 is 1
  CHECK(allowed(p, 1, 1, 1, 0));
}

TEST_CASE("a valid problem passes validation") {
  Problem p = square(3, 2);
  Inputs in(p.shape);
  CHECK_NOTHROW(validate(p, in.q, in.k, in.v));
}

TEST_CASE("non-finite inputs are rejected naming the tensor and index") {
  Problem p;
  p.shape = {2, 2, 3, 4, 5, 6};
  Inputs in(p.shape);
  // Q index [1][0][2][3]
  in.q[static_cast<size_t>(((1 * 2 + 0) * 3 + 2) * 5 + 3)] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("Q[b=1][h=0][row=2][col=3] is NaN"));
  in = Inputs(p.shape);
  in.k[7] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("K[b=0][h=0][row=1][col=2] is +inf"));
  in = Inputs(p.shape);
  in.v.back() = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("V[b=1][h=1][row=3][col=5] is -inf"));
}

TEST_CASE("temperature and scale must be finite and positive") {
  Problem p = square(2, 2);
  Inputs in(p.shape);
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
    p.temperature = bad;
    CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("option temperature"));
    p.temperature = 1.0;
    p.scale = bad;
    CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("option scale"));
    p.scale.reset();
  }
}

TEST_CASE("mismatched tensor sizes are rejected naming the tensor") {
  Problem p = square(3, 2);
  Inputs in(p.shape);
  in.v.pop_back();
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("V: has 5 elements; expected"));
  in = Inputs(p.shape);
  in.q.push_back(0);
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("Q: has 7 elements"));
}

TEST_CASE("sizes below one and overflowing shapes are rejected") {
  Problem p = square(3, 2);
  p.shape.n_k = 0;
  CHECK_THROWS_WITH(validate_problem(p), Contains("n_k is 0"));
  p = square(3, 2);
  p.shape.d_v = -4;
  CHECK_THROWS_WITH(validate_problem(p), Contains("d_v is -4"));
  p = square(3, 2);
  p.shape.batch = int64_t{1} << 40;
  p.shape.n_q = int64_t{1} << 30;
  CHECK_THROWS_WITH(validate_problem(p), Contains("overflows"));
}

TEST_CASE("an explicit mask of the wrong shape is rejected") {
  Problem p;
  p.shape = {2, 3, 2, 2, 1, 1};
  Inputs in(p.shape);
  p.mask = ExplicitMask{2, 2, std::vector<uint8_t>(16, 1)};
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("mask: heads dimension is 2"));
  p.mask = ExplicitMask{3, 1, std::vector<uint8_t>(12, 1)};
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("mask: batch dimension is 3"));
  p.mask = ExplicitMask{1, 3, std::vector<uint8_t>(11, 1)};
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("mask: has 11 elements"));
  p.mask = ExplicitMask{1, 3, std::vector<uint8_t>(12, 1)};
  CHECK_NOTHROW(validate(p, in.q, in.k, in.v));
}

TEST_CASE("key lengths must be one per batch element and lie in [0, n_k]") {
  Problem p;
  p.shape = {2, 1, 2, 4, 1, 1};
  Inputs in(p.shape);
  p.empty_rows = EmptyRowPolicy::zero;
  p.key_lengths = {4};
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("key_lengths has 1 entries"));
  p.key_lengths = {4, 5};
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("key_lengths[1] is 5"));
  p.key_lengths = {-1, 2};
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("key_lengths[0] is -1"));
  p.key_lengths = {0, 4};
  CHECK_NOTHROW(validate(p, in.q, in.k, in.v));
}

TEST_CASE("an empty row is rejected under reject, naming batch, head and row") {
  Problem p;
  p.shape = {2, 2, 3, 3, 1, 1};
  Inputs in(p.shape);
  p.key_lengths = {3, 0};
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("batch 1, head 0, query row 0"));
  p.key_lengths.clear();
  ExplicitMask m{1, 2, std::vector<uint8_t>(18, 1)};
  for (int j = 0; j < 3; ++j) m.allowed[static_cast<size_t>(9 + 2 * 3 + j)] = 0;  // head 1, row 2
  p.mask = m;
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("batch 0, head 1, query row 2"));
  p.empty_rows = EmptyRowPolicy::zero;
  CHECK_NOTHROW(validate(p, in.q, in.k, in.v));
}

TEST_CASE("bottom-right causal with more queries than keys leaves empty rows") {
  Problem p;
  p.shape = {1, 1, 4, 2, 1, 1};
  p.causal = Causal::bottom_right;
  Inputs in(p.shape);
  CHECK_THROWS_WITH(validate(p, in.q, in.k, in.v), Contains("batch 0, head 0, query row 0"));
  p.causal = Causal::top_left;
  CHECK_NOTHROW(validate(p, in.q, in.k, in.v));
}

TEST_CASE("canonical names hold only non-default options") {
  Problem p;
  p.shape = {1, 8, 4096, 4096, 64, 64};
  CHECK(canonical_name(p) == "b1h8q4096k4096d64");
  p.causal = Causal::top_left;
  CHECK(canonical_name(p) == "b1h8q4096k4096d64:causal_tl");
  p.shape.d_v = 32;
  p.causal = Causal::bottom_right;
  p.temperature = 0.5;
  p.empty_rows = EmptyRowPolicy::zero;
  CHECK(canonical_name(p) == "b1h8q4096k4096d64v32:causal_br:tau=0.5:empty=zero");
}

TEST_CASE("option parsers name the option and the bad value") {
  CHECK(parse_causal("causal_br") == Causal::bottom_right);
  CHECK(parse_empty_row_policy("zero") == EmptyRowPolicy::zero);
  CHECK_THROWS_WITH(parse_causal("diagonal", "--causal"), Contains("option --causal: 'diagonal'"));
  CHECK_THROWS_WITH(parse_empty_row_policy("skip"), Contains("'skip' is not one of reject, zero"));
}
