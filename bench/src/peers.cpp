#include "attncheck/peers.h"

#include <cblas.h>

#include <Eigen/Core>
#include <algorithm>
#include <limits>
#include <span>
#include <thread>
#include <vector>

#include "softmax_rows.h"

namespace attncheck {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
constexpr float neg_inf = -std::numeric_limits<float>::infinity();

void validate_pointers(const Problem& p, const float* q, const float* k, const float* v) {
  const Shape& s = p.shape;
  validate_problem(p);  // first, so that the sizes below cannot overflow
  validate(p, std::span<const float>(q, static_cast<size_t>(s.q_size())),
           std::span<const float>(k, static_cast<size_t>(s.k_size())),
           std::span<const float>(v, static_cast<size_t>(s.v_size())));
}

// Writes -inf into every entry of the n_q×n_k logits of slice (b, h) that the
// masks forbid, and into the padding of each row (rows are `stride` >= n_k floats apart).
void mask_logits(const Problem& p, int64_t b, int64_t h, float* logits, int64_t stride) {
  const Shape& s = p.shape;
  for (int64_t i = 0; i < s.n_q; ++i) {
    float* row = logits + i * stride;
    const int64_t limit = key_limit(p, b, i);
    std::fill(row + limit, row + stride, neg_inf);
    if (!p.mask) continue;
    for (int64_t j = 0; j < limit; ++j) {
      if (!allowed(p, b, h, i, j)) row[j] = neg_inf;
    }
  }
}

// The n_q×n_k scratch of the calling thread, reused across calls (it grows and
// never shrinks): at n = 4096 it is 64 MiB, and allocating it per call would
// time page faults rather than the peer's arithmetic.
float* scratch(size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) {
    buffer.clear();
    buffer.shrink_to_fit();
    buffer.resize(floats);
  }
  return buffer.data();
}

// Runs body(slice) for slice = b * heads + h over every slice, on up to `threads` threads.
template <class Body>
void for_each_slice(const Shape& s, int threads, const Body& body) {
  const int64_t slices = s.batch * s.heads;
  const int64_t workers = std::clamp<int64_t>(threads, 1, slices);
  if (workers == 1) {
    for (int64_t slice = 0; slice < slices; ++slice) body(slice);
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      for (int64_t slice = w; slice < slices; slice += workers) body(slice);
    });
  }
  for (auto& t : pool) t.join();
}

}  // namespace

void naive_eigen_attention(const Problem& problem, const float* q, const float* k, const float* v,
                           float* out, int threads) {
  validate_pointers(problem, q, k, v);
  const Shape& s = problem.shape;
  const float multiplier = static_cast<float>(problem.logit_multiplier());
  for_each_slice(s, threads, [&](int64_t slice) {
    const int64_t b = slice / s.heads, h = slice % s.heads;
    Eigen::Map<const RowMatrix> Q(q + slice * s.n_q * s.d_k, s.n_q, s.d_k);
    Eigen::Map<const RowMatrix> K(k + slice * s.n_k * s.d_k, s.n_k, s.d_k);
    Eigen::Map<const RowMatrix> V(v + slice * s.n_k * s.d_v, s.n_k, s.d_v);
    Eigen::Map<RowMatrix> O(out + slice * s.n_q * s.d_v, s.n_q, s.d_v);
    Eigen::Map<RowMatrix> A(scratch(static_cast<size_t>(s.n_q * s.n_k)), s.n_q, s.n_k);
    A.noalias() = Q * K.transpose();
    A *= multiplier;
    mask_logits(problem, b, h, A.data(), s.n_k);
    for (int64_t i = 0; i < s.n_q; ++i) {
      auto row = A.row(i).array();
      const float row_max = row.maxCoeff();
      if (row_max == neg_inf) {  // empty row: the zero policy (reject was raised in validate)
        row.setZero();
        continue;
      }
      row = (row == neg_inf).select(0.0f, (row - row_max).exp());
      row /= row.sum();
    }
    O.noalias() = A * V;
  });
}

void naive_openblas_attention(const Problem& problem, const float* q, const float* k,
                              const float* v, float* out, int threads) {
  validate_pointers(problem, q, k, v);
  const Shape& s = problem.shape;
  const float multiplier = static_cast<float>(problem.logit_multiplier());
  openblas_set_num_threads(std::max(threads, 1));
  const int64_t stride = detail::softmax_stride(s.n_k);
  // Padding columns are set to -inf (masked) for the softmax; the GEMMs never read them.
  float* weights = scratch(static_cast<size_t>(s.n_q * stride));
  const auto n_q = static_cast<blasint>(s.n_q), n_k = static_cast<blasint>(s.n_k);
  const auto d_k = static_cast<blasint>(s.d_k), d_v = static_cast<blasint>(s.d_v);
  const auto ld = static_cast<blasint>(stride);
  for (int64_t slice = 0; slice < s.batch * s.heads; ++slice) {
    const int64_t b = slice / s.heads, h = slice % s.heads;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n_q, n_k, d_k, multiplier,
                q + slice * s.n_q * s.d_k, d_k, k + slice * s.n_k * s.d_k, d_k, 0.0f,
                weights, ld);
    mask_logits(problem, b, h, weights, stride);
    detail::softmax_rows(weights, s.n_q, stride);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_q, d_v, n_k, 1.0f, weights, ld,
                v + slice * s.n_k * s.d_v, d_v, 0.0f, out + slice * s.n_q * s.d_v, d_v);
  }
}

}  // namespace attncheck
