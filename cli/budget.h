// --max-bytes: a memory budget checked before a command allocates tensors
// from sizes the user gave (explain --input, verify --replay and --max-n,
// bench --n), so that an absurd size is a clear error (exit 2) instead of an
// out-of-memory crash.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "attncheck/problem.h"

namespace attncheck::cli {

/// The default budget: 8 GiB.
inline constexpr const char* kDefaultMaxBytes = "8G";

/// Bytes per score element (one of n_q·n_k per slice) of the reference's
/// tables: S, M, L and A in up to 100-digit multiprecision.
inline constexpr double kReferenceScoreBytes = 4 * 64.0;

/// "4096", "512M", "8G" (powers of 1024; K, M, G, T) as a byte count.
/// Throws InvalidInput naming `option`.
int64_t parse_byte_count(const std::string& text, const std::string& option = "--max-bytes");

/// What a computation on `shape` holds at once: float32 Q, K, V and O, the
/// weights when asked for, and `score_bytes` per element of one n_q×n_k slice.
/// In double, so that absurd sizes do not overflow.
double estimated_bytes(const Shape& shape, bool weights, double score_bytes);

/// Throws InvalidInput naming `what`, the estimate and --max-bytes when the
/// estimate exceeds the budget.
void check_memory_budget(const Shape& shape, bool weights, double score_bytes, int64_t max_bytes,
                         const std::string& what);

/// Adds --max-bytes to a subcommand; the returned text is read when it runs.
std::shared_ptr<std::string> add_max_bytes_option(CLI::App* cmd);

}  // namespace attncheck::cli
