#include "attncheck/properties.h"

#include <algorithm>
#include <stdexcept>

#include "attncheck/builtin_implementations.h"
#include "property_support.h"

// The property checks live in properties_<family>.cpp; this file holds the table.
namespace attncheck {

namespace {

using namespace props;

std::string no_skip(const Capabilities&, Precision) { return {}; }

CaseRequest plain(const Capabilities& caps) {
  CaseRequest r;
  r.caps = caps;
  return r;
}

std::vector<Property> make_properties() {
  using R = CaseRequest;
  std::vector<Property> list;
  auto add = [&](std::string name, std::string sentence, std::function<CaseRequest(const Capabilities&)> request,
                 std::function<Outcome(Implementation&, const Case&, int)> check, bool has_bound = true,
                 std::function<std::string(const Capabilities&, Precision)> skip = no_skip) {
    list.push_back({std::move(name), std::move(sentence), std::move(request), std::move(skip), std::move(check),
                    has_bound});
  };
  add("shape", "every element of O (and A) is written and finite", plain, check_shape, false);
  add("row_sum", "with a V column of ones the output column is 1 (weights sum to one)", plain, check_row_sum);
  add("nonnegative", "with V >= 0 the output is >= 0 (weights are non-negative)", plain, check_nonnegative, false);
  add("mask_zero", "masked weights are exactly 0: replacing masked keys with huge ones (even overflowing logits) leaves O unchanged",
      [](const Capabilities& caps) { R r = plain(caps); r.masked_key = true; return r; }, check_mask_zero, false,
      [](const Capabilities& caps, Precision) {
        return caps.explicit_mask || caps.key_padding || caps.causal_top_left || caps.causal_bottom_right
                   ? std::string()
                   : std::string("implementation supports no mask");
      });
  add("shift_invariance", "adding one vector to every key leaves O unchanged, even past exp's overflow", plain,
      check_shift_invariance);
  add("query_permutation", "permuting the queries permutes the output rows",
      [](const Capabilities& caps) { R r = plain(caps); r.no_causal = true; return r; }, check_query_permutation);
  add("key_value_permutation", "permuting keys with their values (and mask columns) leaves O unchanged",
      [](const Capabilities& caps) { R r = plain(caps); r.position_free = true; return r; },
      check_key_value_permutation);
  add("temperature_zero_limit", "as τ → 0 each row becomes one-hot on its argmax, ties split evenly",
      [](const Capabilities& caps) { R r = plain(caps); r.integer_qk = true; r.fixed_temperature = true; return r; },
      check_temperature_zero_limit, true,
      [](const Capabilities& caps, Precision) { return caps.temperature ? std::string() : std::string("implementation does not support temperature"); });
  add("temperature_infinite_limit", "as τ → ∞ each row becomes uniform over its readable keys",
      [](const Capabilities& caps) { R r = plain(caps); r.fixed_temperature = true; return r; },
      check_temperature_infinite_limit, true,
      [](const Capabilities& caps, Precision) { return caps.temperature ? std::string() : std::string("implementation does not support temperature"); });
  // No long rows: the entropies are read through V = I, so d_v = n_k (a
  // 4096-key row would cost 4096² per row, twice, and as much for the bound).
  add("temperature_monotone", "row entropy is non-decreasing in τ",
      [](const Capabilities& caps) { R r = plain(caps); r.max_long_n_k = 0; return r; }, check_temperature_monotone, true,
      [](const Capabilities& caps, Precision) { return caps.temperature ? std::string() : std::string("implementation does not support temperature"); });
  add("convex_hull", "each output lies within the range of the readable V rows of its column", plain,
      check_convex_hull);
  add("causal_prefix", "row i does not depend on keys and values past its causal limit",
      [](const Capabilities& caps) { R r = plain(caps); r.causal = true; return r; }, check_causal_prefix, false,
      [](const Capabilities& caps, Precision) {
        return caps.causal_top_left || caps.causal_bottom_right ? std::string()
                                                                : std::string("implementation does not support causal masks");
      });
  add("value_linearity", "O is linear in V", plain, check_value_linearity);
  add("batch_head_independence", "each (batch, head) slice equals the same slice computed alone",
      [](const Capabilities& caps) { R r = plain(caps); r.multi_slice = true; return r; },
      check_batch_head_independence, true,
      [](const Capabilities& caps, Precision) { return caps.batch_heads ? std::string() : std::string("implementation does not support batch or heads > 1"); });
  add("empty_row_policy", "empty rows are rejected (reject) or give zero rows of O and A (zero)",
      [](const Capabilities& caps) { R r = plain(caps); r.empty_row = true; return r; }, check_empty_row_policy,
      false, [](const Capabilities& caps, Precision) {
        return (caps.empty_row_reject || caps.empty_row_zero) && (caps.key_padding || caps.explicit_mask)
                   ? std::string()
                   : std::string("implementation can express no empty row");
      });
  add("input_validation", "every bad input is rejected with InvalidInput and nothing is written", plain,
      check_input_validation, false);
  add("differential_reference", "O (and A) agree with the high-precision reference within the tolerance model",
      plain, check_differential_reference);
  add("differential_naive_ratio", "the error is at most 4× a naive same-precision implementation's", plain,
      check_differential_naive_ratio, true, [](const Capabilities&, Precision p) {
        return make_naive_peer(p) ? std::string() : "no naive implementation in " + to_string(p);
      });
  add("thread_determinism", "the output is bitwise identical whatever the thread count",
      [](const Capabilities& caps) { R r = plain(caps); r.multi_slice = true; return r; }, check_thread_determinism,
      false, [](const Capabilities& caps, Precision) {
        return caps.threads ? std::string() : std::string("implementation does not use threads");
      });
  return list;
}

}  // namespace

Run run_implementation(Implementation& impl, const Case& c, bool want_weights, int threads) {
  const Shape& s = c.problem.shape;
  const size_t out_size = static_cast<size_t>(s.out_size());
  const size_t w_size = want_weights ? static_cast<size_t>(s.weights_size()) : 0;
  std::vector<float> out(out_size + kGuard, kNaN), weights(w_size + kGuard, kNaN);
  std::fill(out.begin() + static_cast<std::ptrdiff_t>(out_size), out.end(), kGuardValue);
  std::fill(weights.begin() + static_cast<std::ptrdiff_t>(w_size), weights.end(), kGuardValue);
  impl.forward(c.problem, c.q, c.k, c.v, std::span<float>(out.data(), out_size),
               std::span<float>(weights.data(), w_size), threads);
  for (size_t i = out_size; i < out.size(); ++i)
    if (out[i] != kGuardValue) throw std::runtime_error("forward wrote past the end of out");
  for (size_t i = w_size; i < weights.size(); ++i)
    if (weights[i] != kGuardValue) throw std::runtime_error("forward wrote past the end of weights");
  out.resize(out_size);
  weights.resize(w_size);
  return {std::move(out), std::move(weights)};
}

const std::vector<Property>& all_properties() {
  static const std::vector<Property> list = make_properties();
  return list;
}

const Property* find_property(const std::string& name) {
  for (const Property& p : all_properties())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace attncheck
