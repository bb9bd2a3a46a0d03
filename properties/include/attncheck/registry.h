// Implementations by name, for `--impl NAME`. Built in: fused, fused:<decode
// scoring method>,
// reference-double, reference-long-double, reference-mp50, naive-fp32,
// naive-fp16, naive-bf16, naive-eigen (when the bench peers are built) and mutant:<name> for each
// mutant. Others (plugin:, exec:) register themselves with a prefix.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/implementation.h"

namespace attncheck {

/// Makes an implementation; `argument` is what follows a prefix ("plugin:lib.so"
/// gives "lib.so"), empty for exact names.
using ImplementationFactory = std::function<std::unique_ptr<Implementation>(const std::string& argument)>;

/// Registers an exact name, or a prefix when `name_or_prefix` ends with ':'.
/// Registering a name again replaces it.
void register_implementation(const std::string& name_or_prefix, ImplementationFactory factory,
                             const std::string& description);

/// Exact names first, then the longest matching prefix. An unknown spec throws
/// InvalidInput naming `--impl` and listing the known names.
std::unique_ptr<Implementation> make_implementation(const std::string& spec);

/// (name or prefix, description) of everything registered, sorted by name.
std::vector<std::pair<std::string, std::string>> implementation_list();

}  // namespace attncheck
