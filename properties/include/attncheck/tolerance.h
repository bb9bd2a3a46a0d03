// The tolerance model (docs/tolerance.md): a per-element forward error bound
// for attention computed in a given precision, and comparisons that report
// their worst error as a fraction of that bound.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attncheck/case.h"
#include "attncheck/implementation.h"

namespace attncheck {

/// The confidence parameter λ of the probabilistic accumulation model: a sum
/// of n terms in unit roundoff u errs by at most γ̃_n(λ)·Σ|terms|,
/// γ̃_n(λ) = exp(λ√n·u + n·u²/(1−u)) − 1, with probability at least
/// 1 − 2n·exp(−λ²(1−u)²/2) under Higham and Mary's model (λ = 8: 1 − 2n·1.3e-14).
inline constexpr double kLambda = 8.0;
/// Relative error of exp, in units of u, as an implementation evaluates it
/// (a vectorised polynomial to a few ulps).
inline constexpr double kExpUlps = 4.0;
/// A row whose largest relevant logit-error exponent x exceeds this is beyond
/// the first-order model: its verdict is INCONCLUSIVE (outputs are still held
/// to the convex hull of the readable V rows).
inline constexpr double kFirstOrderLimit = 0.5;
/// An oracle is trusted when its own bound is below this fraction of the
/// implementation's bound.
inline constexpr double kOracleTrust = 1e-3;

/// The accumulation factor min(γ_n, γ̃_n(λ)) for n roundings of unit roundoff u:
/// the worst case where it is smaller (n < λ²), the probabilistic one beyond.
double accumulation_factor(int64_t n, double u);

struct BoundOptions {
  /// The precision class of the implementation being bounded.
  Precision precision = Precision::fp32;
  /// Roundings to float of each logit's inputs before the call, e.g. 1 when K
  /// was shifted (K + c is itself rounded); counted with float's unit roundoff.
  int extra_input_roundings = 0;
  /// Q and K hold small integers, so every dot product is exact; only the
  /// scale and temperature multiplications round.
  bool exact_dot_products = false;
};

/// Per-element bounds for one case, and the exact values they were built from.
/// All vectors are in the layout of problem.h.
struct ErrorBounds {
  std::vector<double> out;          ///< bound on |O - O_exact|, [b][h][n_q][d_v]
  std::vector<double> weights;      ///< bound on |A - A_exact|, [b][h][n_q][n_k]
  std::vector<double> a;            ///< exact A (long double, rounded to double)
  std::vector<double> o;            ///< exact O (long double, rounded to double)
  std::vector<double> mixed;        ///< W = Σ_j a_ij·|v_jc|, [b][h][n_q][d_v]
  std::vector<double> hull_lo, hull_hi;  ///< per-column min/max of the readable V rows, [b][h][n_q][d_v]
  /// The part of `out` that allows for underflow and flushed weights: an error
  /// within it is the class's, whatever a peer of the same class does.
  std::vector<double> out_underflow;
  /// What rounding each logit and the output twice more than a peer may cost:
  /// 2u·(Σ_j a_j·|z_j|·|v_jc − o_c| + Σ_j a_j·|v_jc|), z_j the scaled logit.
  /// Two correct implementations that order the same roundings differently
  /// can differ by this much; the naive-ratio rule does not count it.
  std::vector<double> out_reordering;
  std::vector<char> empty_row;      ///< 1 where every key is masked, [b][h][n_q]
  /// 1 where the first-order model does not hold for the row (see
  /// kFirstOrderLimit); its bounds are then only the convex hull's, [b][h][n_q]
  std::vector<char> inconclusive_row;
  std::string inconclusive_reason;  ///< why, for the first such row
};

/// The bound of docs/tolerance.md for every element of O and A. Takes a valid
/// case (validate() it first).
ErrorBounds forward_error_bounds(const Case& c, const BoundOptions& options);

/// How far outside the convex hull of the readable V rows (|V| ≤ vmax) an
/// output of a row of n_k keys may land through rounding alone: the
/// accumulation, the normalisation, the written result's rounding and underflow.
double hull_tolerance(int64_t n_k, double vmax, Precision precision);

/// Why `c` is out of range for `precision`'s class (an input beyond its largest
/// value, or a readable key's product sum, scaled logit or logit beyond it, or an
/// output accumulation that could overflow), naming the tensor and index or the
/// row; nullopt when the class holds it. An implementation may reject such a
/// case (Unsupported or InvalidInput); a wrong number is still a failure.
std::optional<std::string> out_of_class_range(const Case& c, Precision precision);

/// Worst element of a comparison, as a fraction of its bound.
struct Comparison {
  bool ok = true;
  double worst_ratio = 0;  ///< max |got − expected| / bound; +inf for NaN or a zero bound exceeded
  int64_t worst_index = -1;
  double got = 0, expected = 0, error = 0, bound = 0;
  /// Elements returned as exactly 0 whose exact value lies below `flush_note`
  /// (accepted, reported as a note), and the largest such exact value.
  int64_t flushed = 0;
  double largest_flushed = 0;
};

/// Compares element by element; NaN or infinity in `got` always fails. With
/// `flush_note` > 0 (weights: the class's weight_flush_note), an element returned
/// as 0 whose exact value is below it is accepted and counted in `flushed`.
Comparison compare(std::span<const float> got, std::span<const double> expected,
                   std::span<const double> bound, double flush_note = 0);

/// "[b][h][row][col]" for a flat index into a [batch][heads][rows][cols] tensor.
std::string index_name(const Shape& s, int64_t rows, int64_t cols, int64_t flat);

/// Which reference judges a case: mp50 for small problems, long double for
/// large ones where 50 digits would be too slow (its own error is then still
/// ≤ kOracleTrust of the bound); mp100 for implementations that are themselves
/// multiprecision, mp50 for extended ones.
enum class Oracle { long_double, mp50, mp100 };
Oracle choose_oracle(const Problem& p, Precision implementation_precision);
std::string to_string(Oracle o);
double unit_roundoff(Oracle o);

/// The oracle's O (and A when `weights` is not null) rounded to double.
std::vector<double> oracle_attention(Oracle o, const Case& c, std::vector<double>* weights);

/// Problems up to this many multiply-adds (b·h·n_q·n_k·(d_k+d_v)) use mp50.
inline constexpr int64_t kMultiprecisionWork = 60000;

}  // namespace attncheck
