// The high-precision reference: the oracle every other check compares with.
// It computes the nine tables of the chapter (Q, K, V, R, S, M, L, A, O) for one
// (batch, head) slice, and the batched output, in a chosen scalar type, with
// exactly the semantics of DESIGN.md ("The computation").
//
// The template bodies are compiled once per scalar type inside the library
// (double, long double, mp50, mp100); the `extern template` lines below keep
// every other target from recompiling Eigen over multiprecision.
//
// No Eigen type crosses this interface: Eigen's layout and allocator depend on
// the compiler's ISA flags (a program built with -march=native aligns and frees
// Eigen matrices differently from this library), so the tables are handed out
// as plain row-major storage.
#pragma once

#include <boost/multiprecision/mpfr.hpp>
#include <cstdint>
#include <span>
#include <vector>

#include "attncheck/problem.h"

namespace attncheck {

/// 50 and 100 significant decimal digits (MPFR backend: measured about twice
/// as fast as cpp_bin_float at 50 digits and four times at 100). Expression
/// templates are off so that `auto` and Eigen expressions hold plain numbers.
using mp50 = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<50>,
                                           boost::multiprecision::et_off>;
using mp100 = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<100>,
                                            boost::multiprecision::et_off>;

/// A rows×cols table of T in row-major order.
template <class T>
class RefMatrix {
 public:
  RefMatrix() = default;
  RefMatrix(int64_t rows, int64_t cols)
      : rows_(rows), cols_(cols), values_(static_cast<size_t>(rows * cols)) {}
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t size() const { return rows_ * cols_; }
  T& operator()(int64_t i, int64_t j) { return values_[index(i, j)]; }
  const T& operator()(int64_t i, int64_t j) const { return values_[index(i, j)]; }
  /// Row i as a contiguous span of cols() values.
  std::span<const T> row(int64_t i) const {
    return std::span<const T>(values_).subspan(index(i, 0), static_cast<size_t>(cols_));
  }
  const T* data() const { return values_.data(); }
  T* data() { return values_.data(); }

 private:
  size_t index(int64_t i, int64_t j) const { return static_cast<size_t>(i * cols_ + j); }
  int64_t rows_ = 0, cols_ = 0;
  std::vector<T> values_;
};

/// The nine tables of one (batch, head) slice, as in the chapter:
///   Q n_q×d_k, K n_k×d_k, V n_k×d_v (the float inputs, converted exactly);
///   R = Q Kᵀ; S = R · scale (1/√d_k computed in T unless a scale is given);
///   M = 0 where reading is allowed, -inf where masked; L = (S + M) / τ;
///   A = row-wise softmax of L, stabilised by the row's max finite logit;
///   O = A V (n_q×d_v). R, S, M, L, A are n_q×n_k.
/// A row whose every key is masked (only possible under EmptyRowPolicy::zero)
/// has L all -inf and A, O all zeros.
template <class T>
struct ReferenceTables {
  RefMatrix<T> Q, K, V, R, S, M, L, A, O;
};

/// The nine tables of slice (b, h).
/// Shapes: q [batch][heads][n_q][d_k], k [batch][heads][n_k][d_k],
/// v [batch][heads][n_k][d_v], contiguous row-major float32 (problem.h).
/// Validates the whole problem first (attncheck::validate) and throws
/// InvalidInput on bad input or when b or h is out of range. Throws
/// std::range_error when a logit overflows T (only double or long double with
/// an extreme τ or scale can do that; use mp50).
template <class T>
ReferenceTables<T> reference_tables(const Problem& problem, std::span<const float> q,
                                    std::span<const float> k, std::span<const float> v,
                                    int64_t b, int64_t h);

/// The whole batched output O, [batch][heads][n_q][d_v], in T. When `weights`
/// is not null it is resized and filled with A, [batch][heads][n_q][n_k].
/// Validates first; on bad input nothing is written to `weights`.
template <class T>
std::vector<T> reference_attention(const Problem& problem, std::span<const float> q,
                                   std::span<const float> k, std::span<const float> v,
                                   std::vector<T>* weights = nullptr);

#define ATTNCHECK_REFERENCE_EXTERN(T)                                                         \
  extern template ReferenceTables<T> reference_tables<T>(                                     \
      const Problem&, std::span<const float>, std::span<const float>, std::span<const float>, \
      int64_t, int64_t);                                                                      \
  extern template std::vector<T> reference_attention<T>(                                      \
      const Problem&, std::span<const float>, std::span<const float>, std::span<const float>, \
      std::vector<T>*);
ATTNCHECK_REFERENCE_EXTERN(double)
ATTNCHECK_REFERENCE_EXTERN(long double)
ATTNCHECK_REFERENCE_EXTERN(mp50)
ATTNCHECK_REFERENCE_EXTERN(mp100)
#undef ATTNCHECK_REFERENCE_EXTERN

}  // namespace attncheck
