// Every bad input of DESIGN.md reaches the reference as an InvalidInput that
// names the tensor, index or option, and nothing is written.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "attncheck/reference.h"
#include "test_support.h"

using namespace attncheck;
using attncheck::test::problem_of;
using attncheck::test::Tensors;
using Catch::Contains;

namespace {

// Expects both entry points to reject the input with `message`, and the
// weights vector to stay as it was.
template <class T>
void expect_rejected(const Problem& p, const Tensors& x, const std::string& message) {
  INFO("expected message containing: " << message);
  CHECK_THROWS_AS(reference_tables<T>(p, x.q, x.k, x.v, 0, 0), InvalidInput);
  CHECK_THROWS_WITH(reference_tables<T>(p, x.q, x.k, x.v, 0, 0), Contains(message));
  std::vector<T> weights{T(7)};
  CHECK_THROWS_WITH(reference_attention<T>(p, x.q, x.k, x.v, &weights), Contains(message));
  CHECK(weights.size() == 1);
  CHECK(weights[0] == T(7));
}

}  // namespace

TEMPLATE_TEST_CASE("non-finite Q, K or V is rejected naming the tensor and index", "", double,
                   long double, mp50, mp100) {
  const Problem p = problem_of({2, 2, 3, 4, 2, 3});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  {
    Tensors x(p.shape);
    x.q[static_cast<size_t>(((1 * 2 + 0) * 3 + 2) * 2 + 1)] = nan;
    expect_rejected<TestType>(p, x, "Q[b=1][h=0][row=2][col=1] is NaN");
  }
  {
    Tensors x(p.shape);
    x.k[static_cast<size_t>(((0 * 2 + 1) * 4 + 3) * 2 + 0)] = inf;
    expect_rejected<TestType>(p, x, "K[b=0][h=1][row=3][col=0] is +inf");
  }
  {
    Tensors x(p.shape);
    x.v.back() = -inf;
    expect_rejected<TestType>(p, x, "V[b=1][h=1][row=3][col=2] is -inf");
  }
}

TEMPLATE_TEST_CASE("temperature and scale must be finite and positive", "", double, mp50) {
  const Tensors x({1, 1, 2, 2, 2, 2});
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    Problem p = problem_of({1, 1, 2, 2, 2, 2});
    p.temperature = bad;
    expect_rejected<TestType>(p, x, "temperature");
    p.temperature = 1;
    p.scale = bad;
    expect_rejected<TestType>(p, x, "scale");
  }
}

TEMPLATE_TEST_CASE("a mask of the wrong shape is rejected", "", double, mp50) {
  Problem p = problem_of({2, 1, 2, 2, 1, 1});
  const Tensors x(p.shape);
  p.mask = ExplicitMask{1, 1, {1, 1, 1}};
  expect_rejected<TestType>(p, x, "mask: has 3 elements");
  p.mask = ExplicitMask{3, 1, std::vector<uint8_t>(12, 1)};
  expect_rejected<TestType>(p, x, "mask: batch dimension is 3");
}

TEMPLATE_TEST_CASE("key lengths outside [0, n_k] are rejected", "", double, mp50) {
  Problem p = problem_of({2, 1, 2, 3, 1, 1});
  p.empty_rows = EmptyRowPolicy::zero;
  const Tensors x(p.shape);
  p.key_lengths = {3, 4};
  expect_rejected<TestType>(p, x, "key_lengths[1] is 4");
  p.key_lengths = {-1, 2};
  expect_rejected<TestType>(p, x, "key_lengths[0] is -1");
}

TEMPLATE_TEST_CASE("tensors of the wrong size are rejected naming the tensor", "", double, mp50) {
  const Problem p = problem_of({1, 1, 2, 3, 2, 2});
  Tensors x(p.shape);
  x.k.pop_back();
  expect_rejected<TestType>(p, x, "K: has 5 elements");
}

TEMPLATE_TEST_CASE("an empty row under reject is named by batch, head and row", "", double,
                   long double, mp50, mp100) {
  Problem p = problem_of({2, 1, 3, 3, 1, 1});
  p.key_lengths = {3, 0};
  const Tensors x(p.shape);
  expect_rejected<TestType>(p, x, "batch 1, head 0, query row 0");
}

TEMPLATE_TEST_CASE("a slice index out of range is rejected", "", double, mp50) {
  const Problem p = problem_of({2, 3, 1, 1, 1, 1});
  const Tensors x(p.shape);
  CHECK_THROWS_WITH(reference_tables<TestType>(p, x.q, x.k, x.v, 2, 0), Contains("batch index 2"));
  CHECK_THROWS_WITH(reference_tables<TestType>(p, x.q, x.k, x.v, 0, 3), Contains("head index 3"));
  CHECK_THROWS_AS(reference_tables<TestType>(p, x.q, x.k, x.v, -1, 0), InvalidInput);
}

TEST_CASE("a logit beyond double's range is an error, not NaN") {
  Problem p = problem_of({1, 1, 1, 1, 1, 1});
  p.temperature = 1e-300;
  const std::vector<float> q{1e30f}, k{1e30f}, v{1};
  CHECK_THROWS_AS(reference_tables<double>(p, q, k, v, 0, 0), std::range_error);
  const auto t = reference_tables<mp50>(p, q, k, v, 0, 0);
  CHECK(t.A(0, 0) == 1);
}
