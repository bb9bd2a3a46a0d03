// A plain, obviously-correct attention in a chosen precision, and the same code
// carrying one deliberate flaw (the mutants the property suite must kill).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "attncheck/implementation.h"
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
  relative_error_1e4_long_rows,  ///< every output off by a relative 1e-4, only when n_k ≥ 1024
  key_dropped_past_block,  ///< when n_k > 1024, key 1024 (first past a 1024-key block) ignored
  overflow_zeros,          ///< a row whose float logit max is +inf gets zero output (and weights)
  masked_overflow_nan,     ///< mask added as −∞ to the float logit: a masked +inf logit gives NaN
  peaked_v_misaligned,     ///< on rows whose largest weight is > 0.99, key j mixes V row j+1
};

/// A mutant: its flaw, its name (e.g. "column_softmax") and the properties
/// meant to kill it (a kill counts only as a FAILED verdict of one of them).
struct FlawInfo {
  Flaw flaw;
  std::string name;
  std::vector<std::string> killed_by;
};

/// Every flaw but `none`.
std::vector<FlawInfo> all_flaws();

/// What the naive attention does with a row where a readable key's logit is
/// not finite in T (an fp32 product of 1e20·1e20, a sum of huge products, a
/// tiny τ): DESIGN.md "Range" allows computing it correctly or rejecting it.
enum class LogitOverflow {
  /// Recompute that row's logits and softmax in long double (whose range
  /// holds any float product, scale and τ), so the row is correct; Unsupported
  /// naming the row only if even long double cannot hold a logit.
  widen,
  /// Throw Unsupported naming the row, before anything is written.
  reject,
};

/// Shapes as in problem.h: q [b][h][n_q][d_k], k [b][h][n_k][d_k],
/// v [b][h][n_k][d_v], out [b][h][n_q][d_v], weights (optional, may be empty)
/// [b][h][n_q][n_k]. Validates first (InvalidInput, nothing written), then
/// computes row by row in T, summing keys and dot products in reverse order so
/// that its rounding differs from the fused path's. Masked keys' logits are
/// never computed (a masked key cannot overflow its row); a readable key whose
/// logit is not finite in T is handled as `overflow` says. Nothing is written
/// when it throws.
template <class T>
void naive_attention(const Problem& problem, std::span<const float> q, std::span<const float> k,
                     std::span<const float> v, std::span<float> out, std::span<float> weights,
                     Flaw flaw = Flaw::none, LogitOverflow overflow = LogitOverflow::widen);

/// Rounds to the nearest IEEE binary16 value (as a float), ties to even, with
/// binary16's subnormals below 2^-14 (spacing 2^-24) and ±inf from 65520 up;
/// NaN and ±inf are returned unchanged.
float round_to_fp16(float x);
/// Rounds to the nearest bfloat16 value (as a float), ties to even, with
/// bfloat16's subnormals below 2^-126 (spacing 2^-133) and ±inf from
/// 0x1.ffp127 (halfway past the largest, 0x1.fep127) up; NaN and ±inf unchanged.
float round_to_bf16(float x);
/// Rounds to the class: identity for fp32 and wider, round_to_fp16 or round_to_bf16.
float round_to_class(float x, Precision precision);

}  // namespace attncheck
