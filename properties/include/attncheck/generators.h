// RapidCheck generators for attention cases. Shapes are generated first and
// tensors from them (gen::mapcat), so shrinking reduces sizes before values;
// every choice shrinks towards its simplest option (no mask, τ = 1, small
// integers). Float values favour what breaks attention code: exact ties for
// the max, logits past exp's overflow, rows whose logit scales differ by
// hundreds, tiny and subnormal values, exact zeros, repeated V rows and outputs
// that cancel to near zero.
#pragma once

#include <rapidcheck.h>

#include <string>
#include <vector>

#include "attncheck/case.h"
#include "attncheck/implementation.h"

namespace attncheck {

/// What a property needs from its cases, on top of what the implementation supports.
struct CaseRequest {
  Capabilities caps;
  int64_t max_n = 48;           ///< n_q, n_k at most this (sizes 1, 15, 16, 17, 48, 130 favoured)
  int64_t max_d = 48;           ///< d_k, d_v at most this
  bool masked_key = false;      ///< some mask in force (explicit, key lengths or causal)
  bool causal = false;          ///< a causal mask, either alignment
  bool no_causal = false;       ///< rows are free to move (query permutation)
  bool position_free = false;   ///< no causal and no key lengths (key permutation)
  bool empty_row = false;       ///< at least one row with every key masked
  bool multi_slice = false;     ///< batch·heads > 1
  bool integer_qk = false;      ///< Q and K hold small integers (exact dot products)
  bool fixed_temperature = false;  ///< τ = 1 (the property sets its own)
};

/// Cases for `request`, labelled with "aux" (a number each property uses for its
/// own choices: permutations, shifts, which keys to replace) so that a case
/// file alone replays the property exactly.
rc::Gen<Case> gen_case(const CaseRequest& request);

/// Generators of the pieces, exposed for tests.
rc::Gen<int64_t> gen_length(int64_t max);
rc::Gen<Shape> gen_shape(const CaseRequest& request);
rc::Gen<Problem> gen_problem(const CaseRequest& request, const Shape& shape);

/// Names of the capabilities the generator would use but `caps` rules out.
std::vector<std::string> missing_capabilities(const Capabilities& caps);

/// A pick from weighted options that shrinks towards the first option.
template <class T>
rc::Gen<T> pick(std::vector<std::pair<int, T>> options) {
  int total = 0;
  for (const auto& o : options) total += o.first;
  // Resized so that every option is reachable from the first case on.
  return rc::gen::map(rc::gen::resize(100, rc::gen::inRange(0, total)), [options](int x) {
    for (const auto& [weight, value] : options) {
      if (x < weight) return value;
      x -= weight;
    }
    return options.back().second;
  });
}

}  // namespace attncheck
