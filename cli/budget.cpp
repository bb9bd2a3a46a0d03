#include "budget.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace attncheck::cli {

int64_t parse_byte_count(const std::string& text, const std::string& option) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  int shift = 0;
  if (ptr + 1 == end) {
    switch (*ptr) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      case 'T': case 't': shift = 40; break;
      default: shift = -1;
    }
  } else if (ptr != end) {
    shift = -1;
  }
  if (text.empty() || ec != std::errc() || shift < 0 || value <= 0 || value > (INT64_MAX >> shift))
    throw InvalidInput(fmt::format("option {}: '{}' is not a positive byte count (e.g. 512M, 8G)", option, text));
  return value << shift;
}

double estimated_bytes(const Shape& s, bool weights, double score_bytes) {
  const auto d = [](int64_t x) { return static_cast<double>(x); };
  const double slices = d(s.batch) * d(s.heads);
  const double floats = slices * (d(s.n_q) * d(s.d_k) + d(s.n_k) * d(s.d_k) + d(s.n_k) * d(s.d_v) +
                                  d(s.n_q) * d(s.d_v) + (weights ? d(s.n_q) * d(s.n_k) : 0.0));
  return 4.0 * floats + score_bytes * d(s.n_q) * d(s.n_k);
}

void check_memory_budget(const Shape& shape, bool weights, double score_bytes, int64_t max_bytes,
                         const std::string& what) {
  const double need = estimated_bytes(shape, weights, score_bytes);
  if (need > static_cast<double>(max_bytes))
    throw InvalidInput(fmt::format(
        "{} (batch {}, heads {}, n_q {}, n_k {}, d_k {}, d_v {}) needs about {:.3g} GiB, more than "
        "--max-bytes {} ({:.3g} GiB); raise --max-bytes to run it anyway",
        what, shape.batch, shape.heads, shape.n_q, shape.n_k, shape.d_k, shape.d_v, need / 1073741824.0,
        max_bytes, static_cast<double>(max_bytes) / 1073741824.0));
}

std::shared_ptr<std::string> add_max_bytes_option(CLI::App* cmd) {
  auto text = std::make_shared<std::string>(kDefaultMaxBytes);
  cmd->add_option("--max-bytes", *text,
                  "Refuse sizes whose buffers would need more memory than this (K, M, G, T suffixes)")
      ->capture_default_str();
  return text;
}

}  // namespace attncheck::cli
