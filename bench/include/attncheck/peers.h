// The peers the fused implementation is benchmarked against, and that the
// property suite uses as naive fp32 compositions with a different summation
// order. Each materialises the full n_q×n_k weight matrix of one (batch, head)
// slice at a time: S = QKᵀ, a row-wise stable softmax, O = A V.
//
// Shapes (contiguous row-major float32, see problem.h):
//   q   [batch][heads][n_q][d_k]
//   k   [batch][heads][n_k][d_k]
//   v   [batch][heads][n_k][d_v]
//   out [batch][heads][n_q][d_v]
// Full semantics of DESIGN.md: scale, τ, causal masks of both alignments, key
// lengths, explicit masks with broadcasting, both empty-row policies. Each
// entry validates first (attncheck::validate) and throws InvalidInput without
// writing `out` on bad input.
#pragma once

#include "attncheck/problem.h"

namespace attncheck {

/// Eigen fp32 GEMMs and an Eigen row softmax. Eigen has no runtime dispatch,
/// so its kernels use the baseline instruction set of the build (SSE2 on
/// x86-64). threads > 1 spreads the (batch, head) slices over that many threads.
void naive_eigen_attention(const Problem& problem, const float* q, const float* k, const float* v,
                           float* out, int threads = 1);

/// OpenBLAS cblas_sgemm, a Highway-vectorised row softmax (runtime dispatch),
/// cblas_sgemm. OpenBLAS runs single-threaded unless threads > 1.
void naive_openblas_attention(const Problem& problem, const float* q, const float* k,
                              const float* v, float* out, int threads = 1);

/// The double-precision reference (reference_attention<double>) rounded to
/// float. Slow: meant for small n.
void reference_double_attention(const Problem& problem, const float* q, const float* k,
                                const float* v, float* out);

/// Not attention: the memory floor of a call of this problem, benchmarked
/// beside the implementations (`bench --impl read-floor`) so that a shape bound
/// by memory is judged against a read measured in the same run, under the same
/// load, rather than only against the bandwidth probe. Reads exactly the bytes
/// moved_bytes() counts (Q, and each slice's K and V up to the last key any
/// query row of its batch element may read) once, `threads` threads (from the
/// fused path's thread pool, as fma_floor's) each summing a contiguous share
/// in address order; writes out[0] = that sum (in
/// double, rounded to float) and zeros elsewhere, so O is written once too.
/// Checks the problem's sizes and options (validate_problem), not the values.
void read_floor(const Problem& problem, const float* q, const float* k, const float* v, float* out,
                int threads = 1);

/// What the floors (read_floor, and fma_floor in bench.h) check before they
/// run: the problem's sizes and options (validate_problem), not the values,
/// and that no tensor is null (InvalidInput naming it).
void check_floor_call(const Problem& problem, const float* q, const float* k, const float* v, const float* out);
/// What they write: out[0] = value (rounded to float), zeros elsewhere, so
/// that O is written once.
void write_floor_output(const Problem& problem, float* out, double value);

}  // namespace attncheck
