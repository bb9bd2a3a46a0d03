// Template bodies of reference.h. Included only by the one .cpp per scalar type
// that instantiates them, so Eigen over multiprecision is compiled once.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <boost/multiprecision/eigen.hpp>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <stdexcept>
#include <string>

#include "attncheck/reference.h"

namespace attncheck::detail {

// acc += a * b, with `product` as scratch space. For MPFR numbers this is two
// in-place calls with no allocation (measured faster than mpfr_fma at 50
// digits): the two matrix products are almost all of the reference's time.
template <class T>
inline void multiply_add(T& acc, const T& a, const T& b, T& /*product*/) {
  acc += a * b;
}
template <unsigned Digits>
inline void multiply_add(
    boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<Digits>,
                                  boost::multiprecision::et_off>& acc,
    const boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<Digits>,
                                        boost::multiprecision::et_off>& a,
    const boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<Digits>,
                                        boost::multiprecision::et_off>& b,
    boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<Digits>,
                                  boost::multiprecision::et_off>& product) {
  mpfr_mul(product.backend().data(), a.backend().data(), b.backend().data(), MPFR_RNDN);
  mpfr_add(acc.backend().data(), acc.backend().data(), product.backend().data(), MPFR_RNDN);
}

// The tables are computed in Eigen matrices over T and handed out as plain
// RefMatrix storage (reference.h says why no Eigen type leaves the library).
template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class T>
struct SliceTables {
  Matrix<T> Q, K, V, R, S, M, L, A, O;
};

template <class T>
RefMatrix<T> to_table(const Matrix<T>& m) {
  RefMatrix<T> t(m.rows(), m.cols());
  std::copy(m.data(), m.data() + m.size(), t.data());
  return t;
}

// A float converts exactly to every scalar type used here (through double).
template <class T>
Matrix<T> slice_matrix(std::span<const float> data, int64_t slice, int64_t rows, int64_t cols) {
  Matrix<T> m(rows, cols);
  const size_t base = static_cast<size_t>(slice * rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      m(i, j) = T(static_cast<double>(data[base + static_cast<size_t>(i * cols + j)]));
  return m;
}

template <class T>
T scale_in(const Problem& p) {
  using std::sqrt;
  // The default 1/√d_k is computed in T, not rounded through double.
  if (p.scale) return T(*p.scale);
  return T(1) / sqrt(T(static_cast<double>(p.shape.d_k)));
}

// The tables of slice (b, h) of an already validated problem.
template <class T>
SliceTables<T> compute_slice(const Problem& p, std::span<const float> q,
                                 std::span<const float> k, std::span<const float> v, int64_t b,
                                 int64_t h) {
  using std::exp;
  using std::isfinite;
  const Shape& s = p.shape;
  const int64_t slice = b * s.heads + h;
  const T zero(0);
  const T minus_inf = -std::numeric_limits<T>::infinity();
  const T scale = scale_in<T>(p);
  const T tau(p.temperature);

  SliceTables<T> t;
  t.Q = slice_matrix<T>(q, slice, s.n_q, s.d_k);
  t.K = slice_matrix<T>(k, slice, s.n_k, s.d_k);
  t.V = slice_matrix<T>(v, slice, s.n_k, s.d_v);
  t.R.resize(s.n_q, s.n_k);
  t.S.resize(s.n_q, s.n_k);
  t.M.resize(s.n_q, s.n_k);
  t.L.resize(s.n_q, s.n_k);
  t.A.resize(s.n_q, s.n_k);
  t.O.resize(s.n_q, s.d_v);

  T acc, product;
  for (int64_t i = 0; i < s.n_q; ++i) {
    for (int64_t j = 0; j < s.n_k; ++j) {
      acc = zero;
      for (int64_t d = 0; d < s.d_k; ++d) multiply_add(acc, t.Q(i, d), t.K(j, d), product);
      t.R(i, j) = acc;
      t.S(i, j) = acc * scale;
      t.M(i, j) = allowed(p, b, h, i, j) ? zero : minus_inf;
      t.L(i, j) = (t.S(i, j) + t.M(i, j)) / tau;
    }

    // Stable softmax over the allowed keys: subtract the row's max finite logit.
    bool any_allowed = false;
    T row_max = minus_inf;
    for (int64_t j = 0; j < s.n_k; ++j) {
      if (t.M(i, j) != zero) continue;
      any_allowed = true;
      if (t.L(i, j) > row_max) row_max = t.L(i, j);
    }
    if (!any_allowed) {
      // Empty row; validate() let it through, so the policy is zero.
      t.A.row(i).setConstant(zero);
      t.O.row(i).setConstant(zero);
      continue;
    }
    if (!isfinite(row_max))
      throw std::range_error(fmt::format(
          "reference: the logits of batch {}, head {}, row {} overflow this scalar type "
          "(largest is {}); use mp50",
          b, h, i, static_cast<double>(row_max)));
    T sum = zero;
    for (int64_t j = 0; j < s.n_k; ++j) {
      if (t.M(i, j) != zero) {
        t.A(i, j) = zero;  // masked weights are exactly zero
      } else {
        t.A(i, j) = exp(t.L(i, j) - row_max);
        sum += t.A(i, j);
      }
    }
    for (int64_t j = 0; j < s.n_k; ++j) t.A(i, j) /= sum;

    for (int64_t c = 0; c < s.d_v; ++c) {
      acc = zero;
      for (int64_t j = 0; j < s.n_k; ++j) multiply_add(acc, t.A(i, j), t.V(j, c), product);
      t.O(i, c) = acc;
    }
  }
  return t;
}

}  // namespace attncheck::detail

namespace attncheck {

template <class T>
ReferenceTables<T> reference_tables(const Problem& problem, std::span<const float> q,
                                    std::span<const float> k, std::span<const float> v,
                                    int64_t b, int64_t h) {
  validate(problem, q, k, v);
  if (b < 0 || b >= problem.shape.batch)
    throw InvalidInput(
        fmt::format("batch index {} is out of range [0, {})", b, problem.shape.batch));
  if (h < 0 || h >= problem.shape.heads)
    throw InvalidInput(
        fmt::format("head index {} is out of range [0, {})", h, problem.shape.heads));
  const detail::SliceTables<T> t = detail::compute_slice<T>(problem, q, k, v, b, h);
  using detail::to_table;
  return ReferenceTables<T>{to_table(t.Q), to_table(t.K), to_table(t.V),
                            to_table(t.R), to_table(t.S), to_table(t.M),
                            to_table(t.L), to_table(t.A), to_table(t.O)};
}

template <class T>
std::vector<T> reference_attention(const Problem& problem, std::span<const float> q,
                                   std::span<const float> k, std::span<const float> v,
                                   std::vector<T>* weights) {
  validate(problem, q, k, v);
  const Shape& s = problem.shape;
  // Computed in full before anything is written, so a range error leaves `weights` alone.
  std::vector<T> out(static_cast<size_t>(s.out_size()));
  std::vector<T> a(weights ? static_cast<size_t>(s.weights_size()) : 0);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const detail::SliceTables<T> t = detail::compute_slice<T>(problem, q, k, v, b, h);
      const int64_t slice = b * s.heads + h;
      std::copy(t.O.data(), t.O.data() + t.O.size(),
                out.begin() + static_cast<std::ptrdiff_t>(slice * s.n_q * s.d_v));
      if (weights)
        std::copy(t.A.data(), t.A.data() + t.A.size(),
                  a.begin() + static_cast<std::ptrdiff_t>(slice * s.n_q * s.n_k));
    }
  }
  if (weights) *weights = std::move(a);
  return out;
}

}  // namespace attncheck

// Use inside namespace attncheck.
#define ATTNCHECK_REFERENCE_INSTANTIATE(T)                                                    \
  template ReferenceTables<T> reference_tables<T>(                                            \
      const Problem&, std::span<const float>, std::span<const float>, std::span<const float>, \
      int64_t, int64_t);                                                                      \
  template std::vector<T> reference_attention<T>(                                             \
      const Problem&, std::span<const float>, std::span<const float>, std::span<const float>, \
      std::vector<T>*);
