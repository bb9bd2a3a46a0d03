// RapidCheck generators for attention cases. Shapes are generated first and
// tensors from them (gen::mapcat), so shrinking reduces sizes before values;
// every choice shrinks towards its simplest option (no mask, τ = 1, small
// integers). Float values favour what breaks attention code: exact ties for
// the max, logits past exp's overflow, rows whose logit scales differ by
// hundreds, tiny and subnormal values, exact zeros, repeated V rows and outputs
// that cancel to near zero.
//
// Edges (DESIGN.md "Properties"): a share of the cases has long rows (n_k in the
// thousands, with few queries and modest d so that the oracle stays cheap);
// another share has peaked rows (Q and K near 1e3, logits up to ~1e6, rows
// near one-hot) or products near the float maximum (Q and K in 1e18..1e20,
// so that some dot products, scaled logits or logits over τ overflow float).
// Values never leave the request's precision class: the 1e20 profiles are only
// drawn for classes that hold them, and for the others (fp16) Q and K are
// scaled by powers of two until no Σ|q·k|·scale/τ exceeds half the class's
// largest value.
//
// Resolvable logits (docs/tolerance.md "Inconclusive"): a class narrower than
// float stores Q and K rounded to it, so a logit of magnitude L may be off by
// about 2·u·L, beyond the tolerance model's first order once L passes a few
// hundred (fp16) or a few tens (bf16). For those classes kResolvablePercent %
// of the cases have Q and K scaled by powers of two until every
// Σ|q·k|·scale/τ is at most resolvable_logit(class) (integer Q and K: reduced
// to signs and fewer components instead, for the logit gap of
// zero_limit_logit_gap); the rest keep their magnitudes, so that the
// inconclusive path is still exercised. Wider classes draw nothing for it.
//
// Cost: tensors of more than kElementwiseMaxElements values are drawn from one
// seed (as long rows are); smaller ones element by element, so that shrinking
// reaches simple values where a case is small enough to read.
#pragma once

#include <rapidcheck.h>

#include <string>
#include <vector>

#include "attncheck/case.h"
#include "attncheck/implementation.h"

namespace attncheck {

/// What a property needs from its cases, on top of what the implementation supports.
struct CaseRequest {
  Capabilities caps;
  int64_t max_n = 48;           ///< n_q, n_k at most this (sizes 1, 15, 16, 17, 48, 130 favoured)
  int64_t max_d = 48;           ///< d_k, d_v at most this
  bool masked_key = false;      ///< some mask in force (explicit, key lengths or causal)
  bool causal = false;          ///< a causal mask, either alignment
  bool no_causal = false;       ///< rows are free to move (query permutation)
  bool position_free = false;   ///< no causal and no key lengths (key permutation)
  bool empty_row = false;       ///< at least one row with every key masked
  bool multi_slice = false;     ///< batch·heads > 1
  bool integer_qk = false;      ///< Q and K hold small integers (exact dot products)
  bool fixed_temperature = false;  ///< τ = 1 (the property sets its own)
  /// The class of the implementation the cases are for (verify sets it from
  /// impl.precision()): no generated value is beyond it.
  Precision precision = Precision::fp32;
  /// Long rows: kLongRowPercent % of the cases have n_k in [1000, max_long_n_k]
  /// (1024, 1025, 2048, 2049, 4096 favoured) with n_q ≤ 16 and d ≤ 64 (n_q = 1,
  /// d ≤ 16 for extended and multiprecision classes, whose oracle is
  /// multiprecision). 0 turns them off; so do max_n < kLongRowsMinMaxN (a run
  /// restricted to small shapes, e.g. --max-n 8 for a slow plugin), max_long_n_k
  /// ≤ max_n, and an implementation without cross attention (n_q = n_k).
  /// Shrinking tries the ordinary shapes first, then shorter long rows.
  int64_t max_long_n_k = 4096;
};

/// The share of long-row cases, in percent.
inline constexpr int kLongRowPercent = 12;
/// Long rows are generated only when max_n is at least this.
inline constexpr int64_t kLongRowsMinMaxN = 64;
/// Long rows have at most this many queries.
inline constexpr int64_t kLongRowMaxQueries = 16;

/// Share of the cases of a narrow class (fp16, bf16) whose logits the class resolves, in percent.
inline constexpr int kResolvablePercent = 90;
/// Tensors with more values than this are drawn from one seed, not element by element.
inline constexpr int64_t kElementwiseMaxElements = 256;
/// The largest logit magnitude Σ|q·k|·scale/τ a class resolves well: 0.1/(2u)
/// for classes narrower than float (fp16 ≈ 102, bf16 12.8), infinity for the others.
double resolvable_logit(Precision precision);
/// The gap between distinct integer logits temperature_zero_limit makes (its
/// scale/τ): 100 (exp(−100) ≈ 4e-44) for float and wider, 20 (exp(−20) ≈ 2e-9,
/// still below the class's resolution times any row length) for narrow classes,
/// whose rounding of the inputs grows with the logits.
double zero_limit_logit_gap(Precision precision);

/// Cases for `request`, labelled with "aux" (a number each property uses for its
/// own choices: permutations, shifts, which keys to replace) so that a case
/// file alone replays the property exactly.
rc::Gen<Case> gen_case(const CaseRequest& request);

/// Generators of the pieces, exposed for tests.
rc::Gen<int64_t> gen_length(int64_t max);
/// n_k of a long row: 1000, 1024, 1025, 2047, 2048, 2049, 4095, 4096 (those up
/// to max) or any length in [min(1000, max), max]; shrinks towards 1000.
rc::Gen<int64_t> gen_long_length(int64_t max);
/// True when `request` generates long rows at all.
bool long_rows_enabled(const CaseRequest& request);
rc::Gen<Shape> gen_shape(const CaseRequest& request);
rc::Gen<Problem> gen_problem(const CaseRequest& request, const Shape& shape);

/// Names of the capabilities the generator would use but `caps` rules out.
std::vector<std::string> missing_capabilities(const Capabilities& caps);

/// A pick from weighted options that shrinks towards the first option.
template <class T>
rc::Gen<T> pick(std::vector<std::pair<int, T>> options) {
  int total = 0;
  for (const auto& o : options) total += o.first;
  // Resized so that every option is reachable from the first case on.
  return rc::gen::map(rc::gen::resize(100, rc::gen::inRange(0, total)), [options](int x) {
    for (const auto& [weight, value] : options) {
      if (x < weight) return value;
      x -= weight;
    }
    return options.back().second;
  });
}

}  // namespace attncheck
