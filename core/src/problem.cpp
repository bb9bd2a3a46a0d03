#include "attncheck/problem.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace attncheck {
namespace {

[[noreturn]] void fail(const std::string& message) { throw InvalidInput(message); }

// Product of sizes, refusing overflow so that hostile shapes cannot wrap around.
int64_t checked_product(std::initializer_list<int64_t> dims, const char* what) {
  int64_t result = 1;
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(result, d, &result))
      fail(fmt::format("shape: the number of elements of {} overflows 64 bits", what));
  }
  return result;
}

std::string describe(float x) {
  if (std::isnan(x)) return "NaN";
  return x > 0 ? "+inf" : "-inf";
}

void check_finite(const char* name, std::span<const float> data, int64_t batch, int64_t heads,
                  int64_t rows, int64_t cols) {
  for (size_t idx = 0; idx < data.size(); ++idx) {
    if (std::isfinite(data[idx])) continue;
    const int64_t i = static_cast<int64_t>(idx);
    const int64_t col = i % cols;
    const int64_t row = (i / cols) % rows;
    const int64_t h = (i / (cols * rows)) % heads;
    const int64_t b = i / (cols * rows * heads);
    (void)batch;
    fail(fmt::format("{}[b={}][h={}][row={}][col={}] is {}: inputs must be finite", name, b, h,
                     row, col, describe(data[idx])));
  }
}

}  // namespace

double Problem::effective_scale() const {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(shape.d_k));
}

bool allowed(const Problem& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (j >= key_limit(p, b, i)) return false;
  if (!p.mask) return true;
  const ExplicitMask& m = *p.mask;
  const int64_t mb = m.batch == 1 ? 0 : b;
  const int64_t mh = m.heads == 1 ? 0 : h;
  const int64_t idx = ((mb * m.heads + mh) * p.shape.n_q + i) * p.shape.n_k + j;
  return m.allowed[static_cast<size_t>(idx)] != 0;
}

void validate_problem(const Problem& p) {
  const Shape& s = p.shape;
  const std::pair<const char*, int64_t> dims[] = {{"batch", s.batch}, {"heads", s.heads},
                                                  {"n_q", s.n_q},     {"n_k", s.n_k},
                                                  {"d_k", s.d_k},     {"d_v", s.d_v}};
  for (const auto& [name, value] : dims) {
    if (value < 1) fail(fmt::format("shape: {} is {}; every size must be at least 1", name, value));
  }
  checked_product({s.batch, s.heads, s.n_q, s.d_k}, "Q");
  checked_product({s.batch, s.heads, s.n_k, std::max(s.d_k, s.d_v)}, "K/V");
  checked_product({s.batch, s.heads, s.n_q, std::max(s.d_v, s.n_k)}, "O/weights");

  if (p.scale && !(std::isfinite(*p.scale) && *p.scale > 0))
    fail(fmt::format("option scale is {}; it must be finite and > 0", *p.scale));
  if (!(std::isfinite(p.temperature) && p.temperature > 0))
    fail(fmt::format("option temperature is {}; it must be finite and > 0", p.temperature));

  if (!p.key_lengths.empty()) {
    if (static_cast<int64_t>(p.key_lengths.size()) != s.batch)
      fail(fmt::format("key_lengths has {} entries; expected one per batch element ({})",
                       p.key_lengths.size(), s.batch));
    for (size_t b = 0; b < p.key_lengths.size(); ++b) {
      const int64_t len = p.key_lengths[b];
      if (len < 0 || len > s.n_k)
        fail(fmt::format("key_lengths[{}] is {}; it must lie in [0, n_k={}]", b, len, s.n_k));
    }
  }

  if (p.mask) {
    const ExplicitMask& m = *p.mask;
    if (m.batch != 1 && m.batch != s.batch)
      fail(fmt::format("mask: batch dimension is {}; expected 1 or batch={}", m.batch, s.batch));
    if (m.heads != 1 && m.heads != s.heads)
      fail(fmt::format("mask: heads dimension is {}; expected 1 or heads={}", m.heads, s.heads));
    const int64_t expected = checked_product({m.batch, m.heads, s.n_q, s.n_k}, "mask");
    if (static_cast<int64_t>(m.allowed.size()) != expected)
      fail(fmt::format("mask: has {} elements; expected [{}][{}][n_q={}][n_k={}] = {}",
                       m.allowed.size(), m.batch, m.heads, s.n_q, s.n_k, expected));
  }
}

void validate_tensors(const Problem& p, std::span<const float> q, std::span<const float> k,
                      std::span<const float> v) {
  const Shape& s = p.shape;
  const struct {
    const char* name;
    std::span<const float> data;
    int64_t rows, cols;
  } tensors[] = {{"Q", q, s.n_q, s.d_k}, {"K", k, s.n_k, s.d_k}, {"V", v, s.n_k, s.d_v}};
  for (const auto& t : tensors) {
    const int64_t expected = s.batch * s.heads * t.rows * t.cols;
    if (static_cast<int64_t>(t.data.size()) != expected)
      fail(fmt::format("{}: has {} elements; expected [batch={}][heads={}][{}][{}] = {}", t.name,
                       t.data.size(), s.batch, s.heads, t.rows, t.cols, expected));
  }
  for (const auto& t : tensors) check_finite(t.name, t.data, s.batch, s.heads, t.rows, t.cols);
}

void validate_empty_rows(const Problem& p) {
  if (p.empty_rows != EmptyRowPolicy::reject) return;
  const Shape& s = p.shape;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      // Without an explicit mask the heads of one batch element share their rows.
      if (!p.mask && h > 0) break;
      for (int64_t i = 0; i < s.n_q; ++i) {
        const int64_t limit = key_limit(p, b, i);
        bool any = !p.mask && limit > 0;  // without an explicit mask, the limit decides
        for (int64_t j = 0; j < limit && !any; ++j) any = allowed(p, b, h, i, j);
        if (!any)
          fail(fmt::format(
              "empty row: batch {}, head {}, query row {} has every key masked "
              "(empty-row policy is reject; use zero to output zeros)",
              b, h, i));
      }
    }
  }
}

void validate(const Problem& p, std::span<const float> q, std::span<const float> k,
              std::span<const float> v) {
  validate_problem(p);
  validate_tensors(p, q, k, v);
  validate_empty_rows(p);
}

std::string to_string(Causal c) {
  switch (c) {
    case Causal::none: return "none";
    case Causal::top_left: return "top_left";
    case Causal::bottom_right: return "bottom_right";
  }
  return "?";
}

std::string to_string(EmptyRowPolicy e) { return e == EmptyRowPolicy::reject ? "reject" : "zero"; }

Causal parse_causal(const std::string& text, const std::string& option) {
  if (text == "none") return Causal::none;
  if (text == "top_left" || text == "causal_tl" || text == "tl") return Causal::top_left;
  if (text == "bottom_right" || text == "causal_br" || text == "br") return Causal::bottom_right;
  fail(fmt::format("option {}: '{}' is not one of none, top_left, bottom_right", option, text));
}

EmptyRowPolicy parse_empty_row_policy(const std::string& text, const std::string& option) {
  if (text == "reject") return EmptyRowPolicy::reject;
  if (text == "zero") return EmptyRowPolicy::zero;
  fail(fmt::format("option {}: '{}' is not one of reject, zero", option, text));
}

std::string canonical_name(const Problem& p) {
  const Shape& s = p.shape;
  std::string name = fmt::format("b{}h{}q{}k{}d{}", s.batch, s.heads, s.n_q, s.n_k, s.d_k);
  if (s.d_v != s.d_k) name += fmt::format("v{}", s.d_v);
  if (p.causal == Causal::top_left) name += ":causal_tl";
  if (p.causal == Causal::bottom_right) name += ":causal_br";
  if (!p.key_lengths.empty()) name += ":keylen";
  if (p.mask) name += fmt::format(":mask{}x{}", p.mask->batch, p.mask->heads);
  if (p.scale) name += fmt::format(":scale={:g}", *p.scale);
  if (p.temperature != 1.0) name += fmt::format(":tau={:g}", p.temperature);
  if (p.empty_rows == EmptyRowPolicy::zero) name += ":empty=zero";
  return name;
}

}  // namespace attncheck
