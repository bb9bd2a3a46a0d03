#include "abi.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "attncheck/plugin.h"

namespace attncheck {
namespace {

// Capabilities field for each ATTN_FEATURE_* bit, in bit order.
constexpr bool Capabilities::*kFeatureFields[] = {
    &Capabilities::cross,           &Capabilities::dv_ne_dk,
    &Capabilities::batch_heads,     &Capabilities::scale,
    &Capabilities::temperature,     &Capabilities::causal_top_left,
    &Capabilities::causal_bottom_right, &Capabilities::key_padding,
    &Capabilities::explicit_mask,   &Capabilities::empty_row_reject,
    &Capabilities::empty_row_zero,  &Capabilities::weights,
};

}  // namespace

const std::vector<std::string>& feature_names() {
  static const std::vector<std::string> names = {
      "cross",           "dv_ne_dk",       "batch_heads",      "scale",
      "temperature",     "causal_top_left", "causal_bottom_right", "key_padding",
      "explicit_mask",   "empty_row_reject", "empty_row_zero",  "weights"};
  return names;
}

Capabilities capabilities_from_features(uint32_t features) {
  Capabilities c;
  for (size_t bit = 0; bit < std::size(kFeatureFields); ++bit)
    c.*kFeatureFields[bit] = (features >> bit) & 1u;
  c.threads = false;
  return c;
}

std::vector<std::string> missing_features(const Capabilities& capabilities) {
  std::vector<std::string> missing;
  for (size_t bit = 0; bit < std::size(kFeatureFields); ++bit)
    if (!(capabilities.*kFeatureFields[bit])) missing.push_back(feature_names()[bit]);
  return missing;
}

int call_timeout_ms(const Shape& s, int timeout_ms, int start_up_ms) {
  const double flops = 2.0 * static_cast<double>(s.batch) * static_cast<double>(s.heads) *
                       static_cast<double>(s.n_q) * static_cast<double>(s.n_k) *
                       static_cast<double>(s.d_k + s.d_v);
  constexpr double kFlopsPerMs = 1e4;  // 10 MFLOP/s
  const double tenth = timeout_ms / 10.0;
  const double ms = tenth + std::max(0, start_up_ms) + flops / kFlopsPerMs;
  return static_cast<int>(std::max(1.0, std::min(static_cast<double>(timeout_ms), std::ceil(ms))));
}

int start_up_allowance_ms(bool fresh_child, std::optional<double> first_call_ms, int timeout_ms) {
  if (!fresh_child) return 0;
  if (!first_call_ms) return timeout_ms;  // the run's first call: imports, JIT, thread pools
  const double twice = std::ceil(2 * *first_call_ms);
  return static_cast<int>(std::min<double>(timeout_ms, std::max(timeout_ms / 10.0, twice)));
}

namespace plugin_detail {

Precision precision_from_abi(int32_t precision, const std::string& who) {
  switch (precision) {
    case ATTN_PRECISION_FP32: return Precision::fp32;
    case ATTN_PRECISION_BF16: return Precision::bf16;
    case ATTN_PRECISION_FP16: return Precision::fp16;
    default:
      throw InvalidInput(fmt::format(
          "{}: precision is {}; expected ATTN_PRECISION_FP32 (0), _BF16 (1) or _FP16 (2)", who,
          precision));
  }
}

int32_t precision_from_name(const std::string& name) {
  if (name == "fp32") return ATTN_PRECISION_FP32;
  if (name == "bf16") return ATTN_PRECISION_BF16;
  if (name == "fp16") return ATTN_PRECISION_FP16;
  return -1;
}

int32_t mask_kind(const Problem& p) {
  if (p.mask) return ATTN_MASK_EXPLICIT;
  if (p.causal == Causal::top_left) return ATTN_MASK_CAUSAL_TOP_LEFT;
  if (p.causal == Causal::bottom_right) return ATTN_MASK_CAUSAL_BOTTOM_RIGHT;
  return ATTN_MASK_NONE;
}

std::string mask_kind_name(int32_t kind) {
  switch (kind) {
    case ATTN_MASK_CAUSAL_TOP_LEFT: return "causal_top_left";
    case ATTN_MASK_CAUSAL_BOTTOM_RIGHT: return "causal_bottom_right";
    case ATTN_MASK_EXPLICIT: return "explicit";
    default: return "none";
  }
}

ExplicitMask abi_mask(const Problem& p) {
  if (!p.mask) return {};
  ExplicitMask m = *p.mask;
  if (p.causal == Causal::none) return m;
  // Fold the causal rule into the explicit mask: the ABI carries one mask kind.
  const int64_t n_q = p.shape.n_q, n_k = p.shape.n_k;
  const int64_t offset = p.causal == Causal::bottom_right ? n_k - n_q : 0;
  for (int64_t s = 0; s < m.batch * m.heads; ++s)
    for (int64_t i = 0; i < n_q; ++i)
      for (int64_t j = 0; j < n_k; ++j)
        if (j > i + offset) m.allowed[static_cast<size_t>((s * n_q + i) * n_k + j)] = 0;
  return m;
}

void check_structure(const Problem& p, std::span<const float> q, std::span<const float> k,
                     std::span<const float> v, std::span<const float> out,
                     std::span<const float> weights) {
  validate_problem(p);
  const Shape& s = p.shape;
  const auto check = [](const char* name, size_t got, int64_t want) {
    if (got != static_cast<size_t>(want))
      throw InvalidInput(
          fmt::format("tensor {} has {} elements; the shape needs {}", name, got, want));
  };
  check("Q", q.size(), s.q_size());
  check("K", k.size(), s.k_size());
  check("V", v.size(), s.v_size());
  check("out", out.size(), s.out_size());
  if (!weights.empty()) check("weights", weights.size(), s.weights_size());
}

bool has_empty_row(const Problem& p) {
  const Shape& s = p.shape;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.n_q; ++i) {
        bool any = false;
        for (int64_t j = 0; j < key_limit(p, b, i) && !any; ++j) any = allowed(p, b, h, i, j);
        if (!any) return true;
      }
  return false;
}

uint32_t features_needed(const Problem& p) {
  const Shape& s = p.shape;
  uint32_t f = 0;
  if (s.n_q != s.n_k) f |= ATTN_FEATURE_CROSS;
  if (s.d_v != s.d_k) f |= ATTN_FEATURE_DV_NE_DK;
  if (s.batch > 1 || s.heads > 1) f |= ATTN_FEATURE_BATCH_HEADS;
  if (p.scale && *p.scale != 1.0 / std::sqrt(static_cast<double>(s.d_k))) f |= ATTN_FEATURE_SCALE;
  if (p.temperature != 1.0) f |= ATTN_FEATURE_TEMPERATURE;
  if (p.causal == Causal::top_left) f |= ATTN_FEATURE_CAUSAL_TOP_LEFT;
  if (p.causal == Causal::bottom_right) f |= ATTN_FEATURE_CAUSAL_BOTTOM_RIGHT;
  if (!p.key_lengths.empty()) f |= ATTN_FEATURE_KEY_PADDING;
  if (p.mask) f |= ATTN_FEATURE_EXPLICIT_MASK;
  // The policy matters only when some row has no readable key.
  if (has_empty_row(p))
    f |= p.empty_rows == EmptyRowPolicy::reject ? ATTN_FEATURE_EMPTY_ROW_REJECT
                                                : ATTN_FEATURE_EMPTY_ROW_ZERO;
  return f;
}

void check_declared(const Problem& p, uint32_t features, bool weights_asked,
                    const std::string& who) {
  uint32_t missing = features_needed(p) & ~features;
  if (weights_asked && !(features & ATTN_FEATURE_WEIGHTS)) missing |= ATTN_FEATURE_WEIGHTS;
  if (missing == 0) return;
  const int bit = std::countr_zero(missing);
  throw InvalidInput(fmt::format("{} does not declare feature {} that problem {} needs", who,
                                 feature_names()[static_cast<size_t>(bit)], canonical_name(p)));
}

float poison_value() { return std::bit_cast<float>(kPoisonBits); }
bool is_poison(float x) { return std::bit_cast<uint32_t>(x) == kPoisonBits; }

}  // namespace plugin_detail
}  // namespace attncheck
