// Pieces shared by the plugin loader and the exec: client: feature bits,
// precision classes and the structural checks done before any child runs.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "attn_plugin.h"
#include "attncheck/implementation.h"
#include "attncheck/problem.h"

namespace attncheck::plugin_detail {

/// ATTN_PRECISION_* as Precision; throws InvalidInput naming `who` for an unknown class.
Precision precision_from_abi(int32_t precision, const std::string& who);
/// "fp32" / "bf16" / "fp16" as ATTN_PRECISION_*; -1 when unknown.
int32_t precision_from_name(const std::string& name);

/// ATTN_MASK_* of a problem: causal kinds, explicit, or none. A problem with
/// both a causal rule and an explicit mask cannot be expressed in the ABI;
/// the explicit mask is then combined with the causal rule into one mask.
int32_t mask_kind(const Problem& p);
/// The explicit mask passed to the plugin, with the causal rule folded in when
/// both are present ([mask_batch][mask_heads][n_q][n_k]); empty when none.
ExplicitMask abi_mask(const Problem& p);
std::string mask_kind_name(int32_t kind);

/// Checks the problem (validate_problem) and that the tensor spans have the
/// sizes of its shape, naming the tensor; throws InvalidInput. Done before
/// anything is copied for a child.
void check_structure(const Problem& p, std::span<const float> q, std::span<const float> k,
                     std::span<const float> v, std::span<const float> out,
                     std::span<const float> weights);

/// Whether some query row of the problem has no readable key.
bool has_empty_row(const Problem& p);
/// Features a problem needs, as ATTN_FEATURE_* bits (WEIGHTS not included).
uint32_t features_needed(const Problem& p);
/// Throws InvalidInput when the problem needs a feature outside `features`,
/// naming it: such problems are never sent to a child.
void check_declared(const Problem& p, uint32_t features, bool weights_asked,
                    const std::string& who);

/// The bit pattern written to outputs before a call: a quiet NaN with a
/// payload no arithmetic produces, so a computed NaN is told from an element
/// never written.
constexpr uint32_t kPoisonBits = 0x7fc0dead;
float poison_value();
bool is_poison(float x);

}  // namespace attncheck::plugin_detail
