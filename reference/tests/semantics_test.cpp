// The reference computes exactly the semantics of DESIGN.md.
#include <Eigen/Core>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "attncheck/reference.h"
#include "test_support.h"

using namespace attncheck;
using attncheck::test::problem_of;
using attncheck::test::Tensors;

namespace {

// A table seen as an Eigen matrix, for the products the checks below use.
template <class T>
auto eigen(const RefMatrix<T>& m) {
  return Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      m.data(), m.rows(), m.cols());
}

template <class T>
bool all_zero(std::span<const T> row) {
  return std::all_of(row.begin(), row.end(), [](const T& x) { return x == 0; });
}

template <class T>
double worst_difference(const RefMatrix<T>& a, const RefMatrix<mp100>& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  mp100 worst = 0;
  for (int64_t i = 0; i < a.rows(); ++i)
    for (int64_t j = 0; j < a.cols(); ++j) worst = std::max(worst, mp100(abs(mp100(a(i, j)) - b(i, j))));
  return static_cast<double>(worst);
}

}  // namespace

TEST_CASE("cross-attention with d_v != d_k has the chapter's shapes and unit row sums") {
  const Problem p = problem_of({1, 1, 3, 5, 4, 2});
  const Tensors x(p.shape);
  const auto t = reference_tables<double>(p, x.q, x.k, x.v, 0, 0);
  CHECK((t.Q.rows() == 3 && t.Q.cols() == 4));
  CHECK((t.K.rows() == 5 && t.K.cols() == 4));
  CHECK((t.V.rows() == 5 && t.V.cols() == 2));
  for (const auto* m : {&t.R, &t.S, &t.M, &t.L, &t.A}) CHECK((m->rows() == 3 && m->cols() == 5));
  CHECK((t.O.rows() == 3 && t.O.cols() == 2));
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(eigen(t.A).row(i).sum() == Approx(1.0).epsilon(1e-15));
    CHECK(eigen(t.A).row(i).minCoeff() >= 0.0);
  }
  // O = A V, and R = Q Kᵀ, checked with Eigen's own products in double.
  CHECK((eigen(t.O) - eigen(t.A) * eigen(t.V)).cwiseAbs().maxCoeff() < 1e-14);
  CHECK((eigen(t.R) - eigen(t.Q) * eigen(t.K).transpose()).cwiseAbs().maxCoeff() < 1e-14);
  CHECK((eigen(t.S) - eigen(t.R) * 0.5).cwiseAbs().maxCoeff() == 0.0);  // 1/√4
}

TEST_CASE("the default scale 1/sqrt(d_k) is computed in the reference's precision") {
  const Problem p = problem_of({1, 1, 1, 1, 3, 1});
  const std::vector<float> q{1, 1, 1}, k{1, 0, 0}, v{1};
  const auto t = reference_tables<mp50>(p, q, k, v, 0, 0);
  // Rounded through double, 1/√3 would be off by about 1e-17.
  CHECK(abs(t.S(0, 0) - 1 / sqrt(mp50(3))) < mp50("1e-48"));
}

TEST_CASE("a given scale and the temperature enter as S = R·scale and L = S/τ") {
  Problem p = problem_of({1, 1, 2, 3, 2, 2});
  p.scale = 0.3;
  p.temperature = 0.7;
  const Tensors x(p.shape);
  const auto t = reference_tables<mp50>(p, x.q, x.k, x.v, 0, 0);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      CHECK(t.S(i, j) == t.R(i, j) * mp50(0.3));  // the double 0.3, converted exactly
      CHECK(t.L(i, j) == t.S(i, j) / mp50(0.7));
    }
}

TEST_CASE("top-left and bottom-right causal masks differ when n_q < n_k") {
  Problem p = problem_of({1, 1, 2, 4, 1, 1});
  const Tensors x(p.shape);
  const double inf = std::numeric_limits<double>::infinity();
  p.causal = Causal::top_left;
  const auto tl = reference_tables<double>(p, x.q, x.k, x.v, 0, 0);
  p.causal = Causal::bottom_right;
  const auto br = reference_tables<double>(p, x.q, x.k, x.v, 0, 0);
  // Top-left: query i reads keys j <= i. Bottom-right: j <= i + (n_k - n_q) = i + 2.
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      INFO("row " << i << " key " << j);
      CHECK(tl.M(i, j) == (j <= i ? 0.0 : -inf));
      CHECK(br.M(i, j) == (j <= i + 2 ? 0.0 : -inf));
      CHECK((tl.A(i, j) == 0.0) == (j > i));
      CHECK((br.A(i, j) == 0.0) == (j > i + 2));
      if (j > i) CHECK(tl.L(i, j) == -inf);
    }
}

TEST_CASE("key lengths and an explicit mask zero exactly the masked weights") {
  Problem p = problem_of({2, 1, 2, 3, 2, 1});
  p.key_lengths = {3, 2};
  p.mask = ExplicitMask{1, 1, {1, 0, 1, /**/ 1, 1, 1}};
  const Tensors x(p.shape);
  const auto t0 = reference_tables<mp50>(p, x.q, x.k, x.v, 0, 0);
  const auto t1 = reference_tables<mp50>(p, x.q, x.k, x.v, 1, 0);
  CHECK(t0.A(0, 1) == 0);
  CHECK(t0.A(0, 0) > 0);
  CHECK(t0.A(1, 2) > 0);
  CHECK(t1.A(0, 2) == 0);  // past key length 2
  CHECK(t1.A(1, 2) == 0);
  CHECK(t1.A(0, 1) == 0);  // explicit mask
}

TEST_CASE("under the zero policy an empty row gives zero weights and a zero output") {
  Problem p = problem_of({2, 1, 2, 2, 1, 2});
  p.key_lengths = {2, 0};
  p.empty_rows = EmptyRowPolicy::zero;
  const Tensors x(p.shape);
  std::vector<double> weights;
  const std::vector<double> out = reference_attention<double>(p, x.q, x.k, x.v, &weights);
  REQUIRE(out.size() == 8);
  REQUIRE(weights.size() == 8);
  for (size_t i = 4; i < 8; ++i) {
    CHECK(out[i] == 0.0);
    CHECK(weights[i] == 0.0);
  }
  // Batch 0 is untouched by batch 1's empty rows: its weights sum to one.
  CHECK(weights[0] + weights[1] == Approx(1.0));
  CHECK(weights[2] + weights[3] == Approx(1.0));
  const auto t = reference_tables<mp50>(p, x.q, x.k, x.v, 1, 0);
  CHECK(all_zero(t.A.row(0)));
  CHECK(all_zero(t.O.row(1)));
  CHECK(t.L(0, 0) == -std::numeric_limits<mp50>::infinity());
}

TEST_CASE("the batched output holds every (batch, head) slice") {
  const Problem p = problem_of({2, 3, 2, 3, 2, 2});
  const Tensors x(p.shape, 5);
  std::vector<long double> weights;
  const std::vector<long double> out = reference_attention<long double>(p, x.q, x.k, x.v, &weights);
  REQUIRE(out.size() == 24);
  REQUIRE(weights.size() == 36);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h) {
      const auto t = reference_tables<long double>(p, x.q, x.k, x.v, b, h);
      const size_t slice = static_cast<size_t>(b * 3 + h);
      for (int64_t i = 0; i < 2; ++i) {
        for (int64_t c = 0; c < 2; ++c)
          CHECK(out[slice * 4 + static_cast<size_t>(i * 2 + c)] == t.O(i, c));
        for (int64_t j = 0; j < 3; ++j)
          CHECK(weights[slice * 6 + static_cast<size_t>(i * 3 + j)] == t.A(i, j));
      }
    }
  // The slices really differ, so a copy of one slice everywhere would fail above.
  CHECK(out[0] != out[20]);
}

TEST_CASE("50 and 100 digits agree to about 1e-49") {
  Problem p = problem_of({1, 2, 5, 7, 3, 4});
  p.causal = Causal::bottom_right;
  p.temperature = 0.85;
  const Tensors x(p.shape, 3);
  for (int64_t h = 0; h < 2; ++h) {
    const auto a = reference_tables<mp50>(p, x.q, x.k, x.v, 0, h);
    const auto b = reference_tables<mp100>(p, x.q, x.k, x.v, 0, h);
    CHECK(worst_difference(a.A, b.A) < 1e-47);
    CHECK(worst_difference(a.O, b.O) < 1e-47);
    // and double is close to them, but not that close
    const auto d = reference_tables<double>(p, x.q, x.k, x.v, 0, h);
    CHECK(worst_difference(d.O, b.O) < 1e-14);
  }
}

TEST_CASE("logits that overflow exp without max subtraction still give the right weights") {
  // Logits 16384 and 16383: e^16384 overflows double and long double.
  const Problem p = problem_of({1, 1, 1, 2, 1, 1});
  const std::vector<float> q{16384.0f}, k{1.0f, 1.0f - 0x1p-14f}, v{0.0f, 1.0f};
  const double e = std::exp(1.0);
  const auto d = reference_tables<double>(p, q, k, v, 0, 0);
  CHECK(d.A(0, 0) == Approx(e / (1 + e)).epsilon(1e-14));
  CHECK(d.A(0, 1) == Approx(1 / (1 + e)).epsilon(1e-14));
  CHECK(d.O(0, 0) == Approx(1 / (1 + e)).epsilon(1e-14));
  const auto ld = reference_tables<long double>(p, q, k, v, 0, 0);
  CHECK(static_cast<double>(ld.A(0, 1)) == Approx(1 / (1 + e)).epsilon(1e-14));
}

TEST_CASE("masked keys' values, even huge ones, do not reach the output") {
  Problem p = problem_of({1, 1, 2, 2, 1, 1});
  p.causal = Causal::top_left;
  std::vector<float> q{1, 1}, k{0.5f, 3e38f}, v{2.0f, 3e38f};
  const auto t = reference_tables<double>(p, q, k, v, 0, 0);
  CHECK(t.A(0, 0) == 1.0);
  CHECK(t.O(0, 0) == 2.0);
}
