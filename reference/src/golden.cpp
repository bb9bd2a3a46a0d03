#include "attncheck/golden.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

namespace attncheck {
namespace {

using Mat = RefMatrix<mp100>;

Mat matrix(int64_t rows, int64_t cols, std::initializer_list<mp100> values) {
  Mat m(rows, cols);
  auto it = values.begin();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m(i, j) = *it++;
  return m;
}

mp100 frac(int num, int den) { return mp100(num) / mp100(den); }
mp100 exact(float x) { return mp100(static_cast<double>(x)); }

// The chapter's softmax written literally, A_ij = e^{L_ij} / Σ_r e^{L_ir} over the
// allowed keys, on exact logits. Independent of the reference's stabilised loop.
Mat softmax_rows(const Mat& logits, const std::vector<std::vector<bool>>& allowed) {
  Mat a(logits.rows(), logits.cols());
  for (int64_t i = 0; i < logits.rows(); ++i) {
    mp100 sum = 0;
    for (int64_t j = 0; j < logits.cols(); ++j)
      if (allowed[size_t(i)][size_t(j)]) sum += exp(logits(i, j));
    for (int64_t j = 0; j < logits.cols(); ++j)
      a(i, j) = allowed[size_t(i)][size_t(j)] ? mp100(exp(logits(i, j)) / sum) : mp100(0);
  }
  return a;
}

std::vector<std::vector<bool>> causal(int64_t n) {
  std::vector<std::vector<bool>> m(static_cast<size_t>(n), std::vector<bool>(static_cast<size_t>(n)));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) m[size_t(i)][size_t(j)] = true;
  return m;
}

Mat to_mp(std::span<const float> data, int64_t rows, int64_t cols) {
  Mat m(rows, cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m(i, j) = exact(data[size_t(i * cols + j)]);
  return m;
}

// Plain loops rather than an Eigen product: keeps Eigen's GEMM over mp100 out of this file.
Mat product(const Mat& a, const Mat& b) {
  Mat c(a.rows(), b.cols());
  for (int64_t i = 0; i < a.rows(); ++i)
    for (int64_t j = 0; j < b.cols(); ++j) {
      mp100 sum = 0;
      for (int64_t r = 0; r < a.cols(); ++r) sum += a(i, r) * b(r, j);
      c(i, j) = sum;
    }
  return c;
}

// Logits of a d_k = 1, scale = 1, τ = 1 case: L_ij = q_i k_j, exactly.
Mat outer_logits(const Case& c) {
  const Shape& s = c.problem.shape;
  return product(to_mp(c.q, s.n_q, 1), to_mp(c.k, 1, s.n_k));
}

Case make_case(Shape shape, Causal causal_mask, std::vector<float> q, std::vector<float> k,
               std::vector<float> v, const std::string& name) {
  Case c;
  c.problem.shape = shape;
  c.problem.causal = causal_mask;
  c.q = std::move(q);
  c.k = std::move(k);
  c.v = std::move(v);
  c.labels["golden"] = name;
  return c;
}

std::vector<GoldenCase> build_golden_cases() {
  std::vector<GoldenCase> cases;
  const float ln2 = std::log(2.0f), ln3 = std::log(3.0f), ln99 = std::log(99.0f);

  {
    // Q = K = I₂ are exact in float, so the closed form holds as printed.
    GoldenCase g;
    g.name = "seed-1";
    g.title = "worked example 1: two positions, orthogonal queries and keys";
    g.checked = "A = [[p,q],[q,p]], p = e^a/(e^a+1), a = 1/sqrt(2); O = [[2p,4q],[2q,4p]]";
    g.input = make_case({1, 1, 2, 2, 2, 2}, Causal::none, {1, 0, 0, 1}, {1, 0, 0, 1},
                        {2, 0, 0, 4}, g.name);
    const mp100 a = 1 / sqrt(mp100(2));
    const mp100 p = exp(a) / (exp(a) + 1), q = 1 - p;
    g.A = matrix(2, 2, {p, q, q, p});
    g.O = matrix(2, 2, {2 * p, 4 * q, 2 * q, 4 * p});
    cases.push_back(std::move(g));
  }
  {
    // ln 3 and ln 2 are not floats: the exact answer is the closed form evaluated
    // on the float K; the chapter's rationals are then within float rounding.
    GoldenCase g;
    g.name = "seed-2";
    g.title = "worked example 2: causal attention over three positions";
    g.checked =
        "A, O = closed form on float K = (0, ln3, ln2); within 1e-6 of "
        "A = [[1,0,0],[1/10,9/10,0],[1/6,1/2,1/3]], O = [[2,0],[1/5,18/5],[7/3,8/3]]";
    g.input = make_case({1, 1, 3, 3, 1, 2}, Causal::top_left, {1, 2, 1}, {0, ln3, ln2},
                        {2, 0, 0, 4, 6, 2}, g.name);
    g.A = softmax_rows(outer_logits(g.input), causal(3));
    g.O = product(g.A, to_mp(g.input.v, 3, 2));
    g.chapter_A = matrix(3, 3, {1, 0, 0, frac(1, 10), frac(9, 10), 0, frac(1, 6), frac(1, 2),
                                frac(1, 3)});
    g.chapter_O = matrix(3, 2, {2, 0, frac(1, 5), frac(18, 5), frac(7, 3), frac(8, 3)});
    cases.push_back(std::move(g));
  }
  {
    // Only shapes are fixed by the chapter; the values are arbitrary exact floats.
    GoldenCase g;
    g.name = "exercise-1";
    g.title = "exercise 1: cross-attention shapes Q 4x8, K 6x8, V 6x3";
    g.checked = "R,S,M,L,A are 4x6 and O is 4x3; rows of A sum to 1; A, O agree with mp100";
    std::vector<float> q(32), k(48), v(18);
    for (size_t i = 0; i < q.size(); ++i) q[i] = float(int(i * 5 % 13) - 6) / 8;
    for (size_t i = 0; i < k.size(); ++i) k[i] = float(int(i * 7 % 11) - 5) / 4;
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i * 3 % 7) - 3) / 2;
    g.input = make_case({1, 1, 4, 6, 8, 3}, Causal::none, q, k, v, g.name);
    cases.push_back(std::move(g));
  }
  {
    // K = 0 makes every logit exactly zero.
    GoldenCase g;
    g.name = "exercise-2";
    g.title = "exercise 2: three equal logits";
    g.checked = "A = (1/3, 1/3, 1/3); O = (1, 1) from values (1,0), (0,2), (2,1)";
    g.input = make_case({1, 1, 1, 3, 1, 2}, Causal::none, {1}, {0, 0, 0}, {1, 0, 0, 2, 2, 1},
                        g.name);
    g.A = matrix(1, 3, {frac(1, 3), frac(1, 3), frac(1, 3)});
    g.O = matrix(1, 2, {1, 1});
    cases.push_back(std::move(g));
  }
  {
    // Q = 1 and K = the logits make row 2 the chapter's row (ln2, 0, ln3, 10);
    // the exact answer is the closed form on the float K. Rows 0, 1, 3 are the
    // same causal softmax over their own prefixes.
    GoldenCase g;
    g.name = "exercise-3";
    g.title = "exercise 3: causal row with logits (ln2, 0, ln3, 10), values 0, 2, 4, 100";
    g.checked =
        "A, O = closed form on float K; within 1e-6 of row 2 = (1/3, 1/6, 1/2, 0), "
        "output 7/3";
    g.input = make_case({1, 1, 4, 4, 1, 1}, Causal::top_left, {1, 1, 1, 1}, {ln2, 0, ln3, 10},
                        {0, 2, 4, 100}, g.name);
    g.A = softmax_rows(outer_logits(g.input), causal(4));
    g.O = product(g.A, to_mp(g.input.v, 4, 1));
    const mp100 e10 = exp(mp100(10));
    const mp100 d = 6 + e10;
    g.chapter_A = matrix(4, 4, {1, 0, 0, 0,                          //
                                frac(2, 3), frac(1, 3), 0, 0,        //
                                frac(1, 3), frac(1, 6), frac(1, 2), 0,  //
                                2 / d, 1 / d, 3 / d, e10 / d});
    g.chapter_O = matrix(4, 1, {0, frac(2, 3), frac(7, 3), (2 + 12 + 100 * e10) / d});
    cases.push_back(std::move(g));
  }
  {
    // Logits (ln 99, 0) and (-ln 99, 0) give weights near (0.99, 0.01) and
    // (0.01, 0.99); with equal values both rows output exactly (2, -1).
    GoldenCase g;
    g.name = "exercise-4";
    g.title = "exercise 4: two equal values, two different weight vectors";
    g.checked =
        "A = closed form on float ln99, within 1e-6 of [[0.99,0.01],[0.01,0.99]]; "
        "both rows of O = (2, -1)";
    g.input = make_case({1, 1, 2, 2, 1, 2}, Causal::none, {1, -1}, {ln99, 0}, {2, -1, 2, -1},
                        g.name);
    g.A = softmax_rows(outer_logits(g.input), {{true, true}, {true, true}});
    g.O = matrix(2, 2, {2, -1, 2, -1});
    g.chapter_A = matrix(2, 2, {frac(99, 100), frac(1, 100), frac(1, 100), frac(99, 100)});
    g.chapter_O = g.O;
    cases.push_back(std::move(g));
  }
  return cases;
}

template <class T>
mp100 to_mp100(const T& x) {
  if constexpr (std::is_same_v<T, mp100>) return x;
  else return mp100(x);
}

mp100 element_error(const mp100& got, const mp100& want) {
  return abs(got - want) / std::max(mp100(1), mp100(abs(want)));
}

template <class T>
mp100 matrix_error(const RefMatrix<T>& got, const Mat& want) {
  if (got.rows() != want.rows() || got.cols() != want.cols())
    return std::numeric_limits<mp100>::infinity();
  mp100 worst = 0;
  for (int64_t i = 0; i < got.rows(); ++i)
    for (int64_t j = 0; j < got.cols(); ++j)
      worst = std::max(worst, element_error(to_mp100(got(i, j)), want(i, j)));
  return worst;
}

template <class T>
double worst_error(const GoldenCase& g, const Mat& want_A, const Mat& want_O) {
  const Case& c = g.input;
  const Shape& s = c.problem.shape;
  ReferenceTables<T> t;
  try {
    t = reference_tables<T>(c.problem, c.q, c.k, c.v, 0, 0);
  } catch (const std::exception&) {
    return std::numeric_limits<double>::infinity();
  }
  for (const RefMatrix<T>* m : {&t.R, &t.S, &t.M, &t.L, &t.A})
    if (m->rows() != s.n_q || m->cols() != s.n_k) return std::numeric_limits<double>::infinity();
  if (t.O.rows() != s.n_q || t.O.cols() != s.d_v) return std::numeric_limits<double>::infinity();
  mp100 worst = std::max(matrix_error(t.A, want_A), matrix_error(t.O, want_O));
  for (int64_t i = 0; i < t.A.rows(); ++i) {
    mp100 sum = 0;
    for (int64_t j = 0; j < t.A.cols(); ++j) sum += to_mp100(t.A(i, j));
    worst = std::max(worst, mp100(abs(sum - 1)));
  }
  return static_cast<double>(worst);
}

}  // namespace

const std::vector<GoldenCase>& golden_cases() {
  static const std::vector<GoldenCase> cases = build_golden_cases();
  return cases;
}

std::vector<std::string> builtin_case_names() {
  std::vector<std::string> names;
  for (const GoldenCase& g : golden_cases()) names.push_back(g.name);
  return names;
}

Case builtin_case(const std::string& name) {
  for (const GoldenCase& g : golden_cases())
    if (g.name == name) return g.input;
  throw InvalidInput(fmt::format("option --case: unknown case '{}'; known cases: {}", name,
                                 fmt::join(builtin_case_names(), ", ")));
}

GoldenResult check_golden_case(const GoldenCase& g) {
  GoldenResult r;
  r.name = g.name;
  r.title = g.title;
  r.checked = g.checked;
  Mat want_A = g.A, want_O = g.O;
  if (want_A.size() == 0) {
    const ReferenceTables<mp100> t =
        reference_tables<mp100>(g.input.problem, g.input.q, g.input.k, g.input.v, 0, 0);
    want_A = t.A;
    want_O = t.O;
  }
  r.error_mp50 = worst_error<mp50>(g, want_A, want_O);
  r.error_double = worst_error<double>(g, want_A, want_O);
  if (g.chapter_A.size() != 0)
    r.chapter_error = static_cast<double>(
        std::max(matrix_error(want_A, g.chapter_A), matrix_error(want_O, g.chapter_O)));
  r.pass = r.error_mp50 <= r.tolerance_mp50 && r.error_double <= r.tolerance_double &&
           r.chapter_error <= r.chapter_tolerance;
  return r;
}

std::vector<GoldenResult> check_golden_cases() {
  std::vector<GoldenResult> results;
  for (const GoldenCase& g : golden_cases()) results.push_back(check_golden_case(g));
  return results;
}

}  // namespace attncheck
