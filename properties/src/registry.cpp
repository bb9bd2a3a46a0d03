#include "attncheck/registry.h"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "attncheck/attention.h"
#include "attncheck/builtin_implementations.h"
#include "attncheck/problem.h"

namespace attncheck {
namespace {

struct Entry {
  ImplementationFactory factory;
  std::string description;
};

void register_builtins(std::map<std::string, Entry>& r);

// Built-ins are registered on first use, so no static-initialisation order or
// linker dropping can lose them.
std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  static std::once_flag once;
  std::call_once(once, [] { register_builtins(r); });
  return r;
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

void register_builtins(std::map<std::string, Entry>& r) {
  r["fused"] = {[](const std::string&) { return make_fused_implementation(); },
                "the fused SIMD attention (fp32, online softmax, threads)"};
  r["fused:"] = {[](const std::string& method) { return make_fused_implementation(method); },
                 fmt::format("the fused attention with one decode scoring method forced on the decode path "
                             "(n_q <= {}, or <= {} against n_k >= {}) ({}), on any machine",
                             kDecodeMaxQueryRows, kDecodeWideMaxQueryRows, kDecodeWideMinKeys,
                             fmt::join(decode_scoring_methods(), ", "))};
  r["reference-double"] = {[](const std::string&) { return make_reference_implementation("double"); },
                           "the reference in double"};
  r["reference-long-double"] = {
      [](const std::string&) { return make_reference_implementation("long double"); },
      "the reference in long double"};
  r["reference-mp50"] = {[](const std::string&) { return make_reference_implementation("mp50"); },
                         "the reference in 50 decimal digits (slow)"};
  r["naive-fp32"] = {[](const std::string&) { return make_naive_implementation(Precision::fp32); },
                     "a naive row-by-row fp32 attention (reverse summation order)"};
  r["naive-fp16"] = {[](const std::string&) { return make_naive_implementation(Precision::fp16); },
                     "the naive attention of the fp16 class: inputs, O and A rounded to fp16, computed in fp32"};
  r["naive-bf16"] = {[](const std::string&) { return make_naive_implementation(Precision::bf16); },
                     "the naive attention of the bf16 class: inputs, O and A rounded to bf16, computed in fp32"};
#ifdef ATTNCHECK_HAVE_PEERS
  r["naive-eigen"] = {[](const std::string&) { return make_naive_eigen_implementation(); },
                      "the naive fp32 Eigen composition of the bench peers"};
#endif
  for (const auto& [flaw, name, killed_by] : all_flaws()) {
    const Flaw f = flaw;
    const std::string full = "mutant:" + name;
    r[full] = {[f, full](const std::string&) { return make_naive_implementation(Precision::fp32, f, full); },
               "a deliberately broken fp32 attention: " + name};
  }
}

}  // namespace

void register_implementation(const std::string& name_or_prefix, ImplementationFactory factory,
                             const std::string& description) {
  auto& r = registry();
  std::lock_guard lock(registry_mutex());
  r[name_or_prefix] = {std::move(factory), description};
}

std::unique_ptr<Implementation> make_implementation(const std::string& spec) {
  auto& r = registry();
  ImplementationFactory factory;
  std::string argument;
  {
    std::lock_guard lock(registry_mutex());
    if (auto it = r.find(spec); it != r.end() && !spec.ends_with(':')) {
      factory = it->second.factory;
    } else {
      size_t best = 0;
      for (const auto& [name, entry] : r) {
        if (name.ends_with(':') && spec.starts_with(name) && name.size() > best) {
          best = name.size();
          factory = entry.factory;
          argument = spec.substr(name.size());
        }
      }
    }
  }
  if (!factory) {
    std::string known;
    for (const auto& [name, description] : implementation_list())
      known += (known.empty() ? "" : ", ") + (name.ends_with(':') ? name + "<argument>" : name);
    throw InvalidInput(fmt::format("option --impl: unknown implementation '{}'; known: {}", spec, known));
  }
  return factory(argument);
}

std::vector<std::pair<std::string, std::string>> implementation_list() {
  auto& r = registry();
  std::lock_guard lock(registry_mutex());
  std::vector<std::pair<std::string, std::string>> list;
  for (const auto& [name, entry] : r) list.emplace_back(name, entry.description);
  return list;
}

}  // namespace attncheck
