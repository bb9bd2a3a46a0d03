// An attention implementation as the property suite sees it: what it supports
// and a forward call. The reference, the fused path, the naive peers, the
// mutants, plugins and subprocesses all plug in through this interface.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

#include "attncheck/problem.h"

namespace attncheck {

/// What an implementation supports. Bits mirror ATTN_FEATURE_* of the plugin
/// ABI; a property only generates problems an implementation declares.
struct Capabilities {
  bool cross = true;                ///< n_q != n_k
  bool dv_ne_dk = true;             ///< d_v != d_k
  bool batch_heads = true;          ///< batch or heads > 1
  bool scale = true;                ///< a scale other than 1/√d_k
  bool temperature = true;          ///< τ != 1
  bool causal_top_left = true;
  bool causal_bottom_right = true;
  bool key_padding = true;          ///< per-batch key lengths
  bool explicit_mask = true;
  bool empty_row_reject = true;     ///< rejects empty rows with InvalidInput
  bool empty_row_zero = true;       ///< outputs zeros for empty rows
  bool weights = false;             ///< can return A
  bool threads = false;             ///< honours a thread count
};

/// The accuracy class an implementation claims; the tolerance model, the
/// generators and the verdicts read its PrecisionClass.
enum class Precision { fp32, bf16, fp16, fp64, extended, multiprecision };
double unit_roundoff(Precision p);
std::string to_string(Precision p);

/// A precision class as data (DESIGN.md "Precision classes"): what values it
/// holds and how finely. Inputs are given in float; a class narrower than
/// float rounds them (and its outputs) to itself.
struct PrecisionClass {
  Precision precision;
  double unit_roundoff;     ///< u = 2^-p for p significand bits
  double largest;           ///< largest finite value
  double smallest_normal;   ///< below it values may be subnormal or flushed to zero
  double subnormal_step;    ///< spacing of the subnormals (smallest positive value)
  double exp_underflow;     ///< exp(x) is below smallest_normal for x below this
  /// Exact weights below this may come back as 0: a note, not a failure
  /// (the class's bottom few binades; fp32: 2^-120).
  double weight_flush_note;
};
const PrecisionClass& precision_class(Precision p);
/// True when the class stores fewer significand bits than float, so that the
/// float inputs are themselves rounded to it.
bool narrower_than_float(Precision p);

/// How an implementation failed other than by a wrong answer. Thrown by
/// forward() of implementations that run out of process (plugins, exec:).
class ImplementationFault : public std::runtime_error {
 public:
  enum class Kind { crashed, timed_out, wrote_out_of_bounds, wrote_input, left_output_unwritten, protocol };
  ImplementationFault(Kind kind, const std::string& detail)
      : std::runtime_error(detail), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

/// Thrown by forward() when an implementation declines a case it cannot hold
/// (values or logits outside its precision class's range). Accepted when the
/// case is out of range for the class, a failure otherwise.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Implementation {
 public:
  virtual ~Implementation() = default;
  virtual std::string name() const = 0;
  /// The name the implementation gives itself (a plugin's attn_plugin.name, an
  /// exec child's handshake name), shown beside name(); empty when it has none.
  virtual std::string declared_name() const { return {}; }
  virtual Capabilities capabilities() const = 0;
  virtual Precision precision() const = 0;

  /// Computes O into `out` ([batch][heads][n_q][d_v]) and, when `weights` is
  /// not empty (only asked when capabilities().weights), A into it
  /// ([batch][heads][n_q][n_k]). `threads` is a hint honoured when
  /// capabilities().threads. Rejects bad input by throwing InvalidInput and
  /// a case outside its precision class by throwing Unsupported.
  virtual void forward(const Problem& problem, std::span<const float> q,
                       std::span<const float> k, std::span<const float> v,
                       std::span<float> out, std::span<float> weights, int threads) = 0;

  /// The compute time the implementation reported for its last forward()
  /// call (plugins and exec children may report it, so that a benchmark can
  /// leave out the isolation's copies and process start-up); empty when it
  /// reported none.
  virtual std::optional<double> last_compute_seconds() const { return std::nullopt; }
};

}  // namespace attncheck
