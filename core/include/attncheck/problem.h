// The shared description of one scaled dot-product attention problem: shape,
// scale, temperature, masks, empty-row policy, and their validation. The
// reference, the fast path, the properties and the plugin loader all read it,
// so its semantics are the project's semantics (DESIGN.md, "The computation").
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace attncheck {

/// Tensor layout used everywhere: contiguous row-major float32
/// [batch][heads][rows][dim]. Q is [batch][heads][n_q][d_k], K is
/// [batch][heads][n_k][d_k], V is [batch][heads][n_k][d_v] and the output O is
/// [batch][heads][n_q][d_v]. Weights, where asked for, are [batch][heads][n_q][n_k].
struct Shape {
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t n_q = 1;
  int64_t n_k = 1;
  int64_t d_k = 1;
  int64_t d_v = 1;

  int64_t q_size() const { return batch * heads * n_q * d_k; }
  int64_t k_size() const { return batch * heads * n_k * d_k; }
  int64_t v_size() const { return batch * heads * n_k * d_v; }
  int64_t out_size() const { return batch * heads * n_q * d_v; }
  int64_t weights_size() const { return batch * heads * n_q * n_k; }
  bool operator==(const Shape&) const = default;
};

/// Causal masking. top_left: key j is masked for query i when j > i.
/// bottom_right: masked when j > i + (n_k - n_q), the alignment of decoding
/// with a KV cache; both coincide when n_q == n_k.
enum class Causal { none, top_left, bottom_right };

/// What to do with a query row whose every key is masked.
/// reject: an error naming the first such row, raised before anything is computed.
/// zero: that row of A and of O is all zeros.
enum class EmptyRowPolicy { reject, zero };

/// Explicit boolean mask [batch][heads][n_q][n_k], nonzero = reading allowed.
/// A leading dimension of 1 broadcasts over batch (or heads).
struct ExplicitMask {
  int64_t batch = 1;
  int64_t heads = 1;
  std::vector<uint8_t> allowed;
  bool operator==(const ExplicitMask&) const = default;
};

/// One attention problem. Masks combine: a key is readable only when the causal
/// rule, the key length of its batch element and the explicit mask all allow it.
struct Problem {
  Shape shape;
  std::optional<double> scale;       ///< multiplier of QKᵀ; 1/√d_k when unset
  double temperature = 1.0;          ///< τ > 0; logits are (S + M) / τ
  Causal causal = Causal::none;
  std::vector<int64_t> key_lengths;  ///< empty, or one valid key count per batch element
  std::optional<ExplicitMask> mask;
  EmptyRowPolicy empty_rows = EmptyRowPolicy::reject;
  bool operator==(const Problem&) const = default;

  /// The scale in force: the given one, or 1/√d_k.
  double effective_scale() const;
  /// scale / τ: the single multiplier a fused kernel applies to QKᵀ.
  double logit_multiplier() const { return effective_scale() / temperature; }
};

/// Raised for every rejected input. The message names the tensor or option and,
/// where there is one, the index.
class InvalidInput : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Exclusive upper bound on readable keys for query row i of batch element b,
/// from the causal rule and the key length (the explicit mask is not included).
/// Keys j >= key_limit are masked; the result lies in [0, n_k]. Inline: the
/// kernels call it once per query row of every work item.
inline int64_t key_limit(const Problem& p, int64_t b, int64_t i) {
  const Shape& s = p.shape;
  int64_t limit = s.n_k;
  if (p.causal == Causal::top_left) limit = std::min(limit, i + 1);
  if (p.causal == Causal::bottom_right) limit = std::min(limit, i + 1 + (s.n_k - s.n_q));
  if (!p.key_lengths.empty()) limit = std::min(limit, p.key_lengths[static_cast<size_t>(b)]);
  return std::max<int64_t>(limit, 0);
}

/// Whether query i of (b, h) may read key j under every mask in force.
bool allowed(const Problem& p, int64_t b, int64_t h, int64_t i, int64_t j);

/// Checks the problem itself: sizes >= 1 and not overflowing, scale and τ finite
/// and > 0, key lengths in [0, n_k] and one per batch element, explicit mask
/// shape. Throws InvalidInput.
void validate_problem(const Problem& p);

/// Checks tensor sizes against the shape and that every value of Q, K, V is
/// finite (naming the tensor and its [b][h][row][col] index).
/// Throws InvalidInput.
void validate_tensors(const Problem& p, std::span<const float> q,
                      std::span<const float> k, std::span<const float> v);

/// Under EmptyRowPolicy::reject, throws InvalidInput naming the first (batch,
/// head, row) whose every key is masked. Does nothing under the zero policy.
void validate_empty_rows(const Problem& p);

/// All of the above, in that order: what every entry point calls before it
/// computes or writes anything.
void validate(const Problem& p, std::span<const float> q, std::span<const float> k,
              std::span<const float> v);

/// The one canonical string of a problem, e.g. `b1h8q4096k4096d64:causal_tl`.
/// It holds only non-default options and is the test name, the benchmark name,
/// the JSON key, the CLI filter and the repro line.
std::string canonical_name(const Problem& p);

std::string to_string(Causal c);
std::string to_string(EmptyRowPolicy e);
/// Parse "none" / "top_left" / "bottom_right" (or "causal_tl" / "causal_br");
/// throws InvalidInput naming `option`.
Causal parse_causal(const std::string& text, const std::string& option = "causal");
EmptyRowPolicy parse_empty_row_policy(const std::string& text,
                                      const std::string& option = "empty_rows");

}  // namespace attncheck
