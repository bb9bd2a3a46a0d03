// The implementations attncheck carries itself, as Implementation objects.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attncheck/implementation.h"
#include "attncheck/naive.h"

namespace attncheck {

/// The fused SIMD path (impl/attention.h), fp32, honours threads.
std::unique_ptr<Implementation> make_fused_implementation();
/// The same, named "fused:<method>", with a decode scoring method (one of
/// decode_scoring_methods()) forced for each call (force_decode_scoring) and
/// the automatic choice restored after it, so that verify and bench run it on
/// any machine. Throws InvalidInput naming --impl for any other method name.
std::unique_ptr<Implementation> make_fused_implementation(const std::string& decode_scoring);
/// The decode scoring methods make_fused_implementation takes: key_by_key,
/// four_keys, rows_in_lanes.
std::vector<std::string> decode_scoring_methods();
/// The reference in double, long double or 50 digits ("double", "long double", "mp50");
/// exposes weights.
std::unique_ptr<Implementation> make_reference_implementation(const std::string& precision);
/// The naive row-by-row attention in float ("fp32"), double ("fp64") or long
/// double ("extended"), with an optional flaw (a mutant). Exposes weights.
/// fp16 and bf16 ("naive-fp16", "naive-bf16"): Q, K, V rounded to the class
/// (nearest, ties to even, with subnormals), the float attention, O and A
/// rounded to the class; Unsupported for an input beyond the class's largest
/// finite value or a readable key whose float logit overflows.
std::unique_ptr<Implementation> make_naive_implementation(Precision precision, Flaw flaw = Flaw::none,
                                                          const std::string& name = "");
/// A naive implementation of the same precision as `precision`, for the
/// naive-ratio rule; null where there is none (fp16, bf16, multiprecision).
std::unique_ptr<Implementation> make_naive_peer(Precision precision);
#ifdef ATTNCHECK_HAVE_PEERS
/// The bench peers' naive fp32 Eigen composition.
std::unique_ptr<Implementation> make_naive_eigen_implementation();
#endif
/// Every mutant, named "mutant:<flaw>".
std::vector<std::unique_ptr<Implementation>> make_mutants();

}  // namespace attncheck
