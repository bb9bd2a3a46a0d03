// A plain, obviously-correct attention in a chosen precision, and the same code
// carrying one deliberate flaw (the mutants the property suite must kill).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "attncheck/problem.h"

namespace attncheck {

/// A deliberate mistake planted in the naive implementation. `none` is the
/// correct algorithm; the others are the chapter's classic mistakes and typical
/// kernel bugs.
enum class Flaw {
  none,
  column_softmax,         ///< softmax over queries (columns of S) instead of keys
  missing_scale,          ///< forgets 1/√d_k (and any given scale)
  mask_after_softmax,     ///< zeroes masked weights after softmax, no renormalisation
  no_max_subtraction,     ///< exp of raw logits: overflows past ~88
  v_rows_misaligned,      ///< key j mixes V row j+1
  causal_off_by_one,      ///< causal limit one key too far
  tail_keys_dropped,      ///< keys past the last multiple of 16 ignored when n_k > 16
  wrong_head_stride,      ///< K/V head stride computed from n_q instead of n_k
  tau_multiplied,         ///< logits multiplied by τ instead of divided
  key_lengths_of_batch0,  ///< key length of batch element 0 used for every element
  relative_error_1e3,     ///< every output off by a relative 1e-3
  fp16_weights,           ///< weights rounded to fp16 before mixing V
};

/// Every flaw but `none`, with its mutant name (e.g. "column_softmax").
std::vector<std::pair<Flaw, std::string>> all_flaws();

/// Shapes as in problem.h: q [b][h][n_q][d_k], k [b][h][n_k][d_k],
/// v [b][h][n_k][d_v], out [b][h][n_q][d_v], weights (optional, may be empty)
/// [b][h][n_q][n_k]. Validates first (InvalidInput, nothing written), then
/// computes row by row in T, summing keys and dot products in reverse order so
/// that its rounding differs from the fused path's.
template <class T>
void naive_attention(const Problem& problem, std::span<const float> q, std::span<const float> k,
                     std::span<const float> v, std::span<float> out, std::span<float> weights,
                     Flaw flaw = Flaw::none);

/// Rounds to the nearest IEEE binary16 value (as a float); used by the fp16 mutant.
float round_to_fp16(float x);

}  // namespace attncheck
