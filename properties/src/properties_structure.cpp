#include "property_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "attncheck/tolerance.h"

namespace attncheck::props {

// Where a non-finite output came from, which depends on the transport: exec:
// children send every value, and a plugin's unwritten elements are a fault
// of their own (left_output_unwritten) before this check.
static std::string nonfinite_origin(const Implementation& impl, float x) {
  const std::string name = impl.name();
  if (name.rfind("exec:", 0) == 0) return "as sent in the child's reply";
  if (name.rfind("plugin:", 0) == 0) return "as the plugin wrote it";
  return std::isnan(x) ? "computed, or never written: outputs start as NaN" : "computed";
}

Outcome check_shape(Implementation& impl, const Case& c, int threads) {
  const bool w = impl.capabilities().weights;
  const Run r = run_implementation(impl, c, w, threads);
  const Shape& s = c.problem.shape;
  for (size_t i = 0; i < r.out.size(); ++i)
    if (!std::isfinite(r.out[i]))
      return failed(fmt::format("O{} is {} ({})", index_name(s, s.n_q, s.d_v, static_cast<int64_t>(i)),
                                r.out[i], nonfinite_origin(impl, r.out[i])));
  for (size_t i = 0; i < r.weights.size(); ++i)
    if (!std::isfinite(r.weights[i]))
      return failed(fmt::format("A{} is {} ({})", index_name(s, s.n_q, s.n_k, static_cast<int64_t>(i)),
                                r.weights[i], nonfinite_origin(impl, r.weights[i])));
  return {};
}

Outcome check_row_sum(Implementation& impl, const Case& c0, int threads) {
  Case c = c0;
  const Shape& s = c.problem.shape;
  for (int64_t j = 0; j < s.batch * s.heads * s.n_k; ++j) c.v[static_cast<size_t>(j * s.d_v)] = 1.0f;
  const bool w = impl.capabilities().weights;
  const Run r = run_implementation(impl, c, w, threads);
  const ErrorBounds eb = forward_error_bounds(c, {impl.precision()});
  // Column 0 of O must be 1 on every row that reads a key (0 on empty rows).
  std::vector<float> got;
  std::vector<double> expected, bound;
  for (int64_t row = 0; row < row_count(s); ++row) {
    const size_t idx = static_cast<size_t>(row * s.d_v);
    got.push_back(r.out[idx]);
    expected.push_back(eb.empty_row[static_cast<size_t>(row)] ? 0.0 : 1.0);
    bound.push_back(eb.out[idx]);
  }
  Outcome o = judge(compare(got, expected, bound), s, s.n_q, 1, "O (V column 0 all ones) ", "expected");
  if (!o.ok || !w) return inconclusive_unless_failed(std::move(o), eb);
  got.clear(), expected.clear(), bound.clear();
  for (int64_t row = 0; row < row_count(s); ++row) {
    double total = 0, b = 0;
    for (int64_t j = 0; j < s.n_k; ++j) {
      const size_t idx = static_cast<size_t>(row * s.n_k + j);
      total += r.weights[idx];
      b += eb.weights[idx];
    }
    got.push_back(static_cast<float>(total));
    expected.push_back(eb.empty_row[static_cast<size_t>(row)] ? 0.0 : 1.0);
    bound.push_back(b + 0x1p-24 * static_cast<double>(s.n_k));
  }
  return inconclusive_unless_failed(
      merge(o, judge(compare(got, expected, bound), s, s.n_q, 1, "sum of weights of row ", "expected")), eb);
}

Outcome check_nonnegative(Implementation& impl, const Case& c0, int threads) {
  Case c = c0;
  for (float& x : c.v) x = std::fabs(x);
  const bool w = impl.capabilities().weights;
  const Run r = run_implementation(impl, c, w, threads);
  const Shape& s = c.problem.shape;
  for (size_t i = 0; i < r.out.size(); ++i)
    if (!(r.out[i] >= 0))
      return failed(fmt::format("O{} = {:.9g} with every V >= 0",
                                index_name(s, s.n_q, s.d_v, static_cast<int64_t>(i)), r.out[i]));
  for (size_t i = 0; i < r.weights.size(); ++i)
    if (!(r.weights[i] >= 0))
      return failed(fmt::format("A{} = {:.9g} is negative", index_name(s, s.n_q, s.n_k, static_cast<int64_t>(i)),
                                r.weights[i]));
  return {};
}

Outcome check_empty_row_policy(Implementation& impl, const Case& c, int threads) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  bool any_empty = false;
  for (int64_t b = 0; b < s.batch && !any_empty; ++b)
    for (int64_t h = 0; h < s.heads && !any_empty; ++h)
      for (int64_t i = 0; i < s.n_q && !any_empty; ++i) any_empty = slice_row_empty(p, b, h, i);
  if (!any_empty) return discarded("no empty row");
  if (p.empty_rows == EmptyRowPolicy::reject) {
    try {
      (void)run_implementation(impl, c, false, threads);
      return failed("an empty row under the reject policy was accepted");
    } catch (const InvalidInput&) {
      return {};
    }
  }
  const bool w = impl.capabilities().weights;
  const Run r = run_implementation(impl, c, w, threads);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.n_q; ++i) {
        const size_t row = static_cast<size_t>((b * s.heads + h) * s.n_q + i);
        const bool empty = slice_row_empty(p, b, h, i);
        for (int64_t col = 0; col < s.d_v; ++col) {
          const float x = r.out[row * static_cast<size_t>(s.d_v) + static_cast<size_t>(col)];
          if (empty ? x != 0.0f : !std::isfinite(x))
            return failed(fmt::format("O[{}][{}][{}][{}] = {} on {} row under the zero policy", b, h, i, col, x,
                                      empty ? "an empty" : "a non-empty"),
                          b, h);
        }
        if (empty && w)
          for (int64_t j = 0; j < s.n_k; ++j)
            if (r.weights[row * static_cast<size_t>(s.n_k) + static_cast<size_t>(j)] != 0.0f)
              return failed(fmt::format("A[{}][{}][{}][{}] is not 0 on an empty row", b, h, i, j), b, h);
      }
  return {};
}

// The bad inputs of DESIGN.md, one per case, chosen by the case's aux number.
Outcome check_input_validation(Implementation& impl, const Case& c, int threads) {
  const Capabilities caps = impl.capabilities();
  const Shape& s = c.problem.shape;
  auto rng = aux_rng(c);
  Case bad = c;
  std::vector<std::string> kinds = {"nonfinite", "temperature", "scale", "tensor_length", "zero_size"};
  if (caps.explicit_mask) kinds.push_back("mask_shape");
  if (caps.key_padding) kinds.push_back("key_lengths");
  if (caps.empty_row_reject && (caps.key_padding || caps.explicit_mask)) kinds.push_back("empty_row");
  const std::string kind = kinds[rng() % kinds.size()];
  std::string what;
  // Spans passed to forward; tensor_length shortens or lengthens one.
  std::vector<float> q = c.q, k = c.k, v = c.v;
  if (kind == "nonfinite") {
    const float values[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
    const float value = values[rng() % 3];
    std::vector<float>* tensors[] = {&q, &k, &v};
    const char* names[] = {"Q", "K", "V"};
    const size_t t = rng() % 3;
    const size_t idx = rng() % tensors[t]->size();
    (*tensors[t])[idx] = value;
    what = fmt::format("{}[{}] = {}", names[t], idx, value);
  } else if (kind == "temperature" || kind == "scale") {
    const double values[] = {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity()};
    const double value = values[rng() % 4];
    if (kind == "temperature") bad.problem.temperature = value;
    else bad.problem.scale = value;
    what = fmt::format("{} = {}", kind, value);
  } else if (kind == "tensor_length") {
    std::vector<float>* tensors[] = {&q, &k, &v};
    const char* names[] = {"Q", "K", "V"};
    const size_t t = rng() % 3;
    if (rng() % 2) tensors[t]->push_back(1.0f);
    else tensors[t]->pop_back();
    what = fmt::format("{} with {} elements for the shape {}", names[t], tensors[t]->size(), canonical_name(c.problem));
  } else if (kind == "zero_size") {
    int64_t* dims[] = {&bad.problem.shape.n_q, &bad.problem.shape.n_k, &bad.problem.shape.d_k, &bad.problem.shape.d_v};
    const char* names[] = {"n_q", "n_k", "d_k", "d_v"};
    const size_t d = rng() % 4;
    *dims[d] = 0;
    bad.problem.mask.reset();
    bad.problem.key_lengths.clear();
    q.resize(static_cast<size_t>(bad.problem.shape.q_size()));
    k.resize(static_cast<size_t>(bad.problem.shape.k_size()));
    v.resize(static_cast<size_t>(bad.problem.shape.v_size()));
    what = fmt::format("{} = 0", names[d]);
  } else if (kind == "mask_shape") {
    ExplicitMask m;
    m.batch = s.batch + 1;
    m.allowed.assign(static_cast<size_t>(m.batch * s.n_q * s.n_k), 1);
    if (rng() % 2) {
      m.batch = 1;
      m.allowed.resize(static_cast<size_t>(s.n_q * s.n_k - 1));
    }
    bad.problem.mask = m;
    what = fmt::format("a mask of [{}][{}] with {} elements", m.batch, m.heads, m.allowed.size());
  } else if (kind == "key_lengths") {
    bad.problem.key_lengths.assign(static_cast<size_t>(s.batch), s.n_k);
    switch (rng() % 3) {
      case 0: bad.problem.key_lengths[0] = s.n_k + 1; break;
      case 1: bad.problem.key_lengths[0] = -1; break;
      default: bad.problem.key_lengths.push_back(1); break;
    }
    what = fmt::format("key_lengths {}", fmt::join(bad.problem.key_lengths, ","));
  } else {  // an empty row under the reject policy
    bad.problem.empty_rows = EmptyRowPolicy::reject;
    if (caps.key_padding) {
      bad.problem.key_lengths.assign(static_cast<size_t>(s.batch), s.n_k);
      bad.problem.key_lengths[rng() % static_cast<size_t>(s.batch)] = 0;
    } else {
      ExplicitMask m;
      m.allowed.assign(static_cast<size_t>(s.n_q * s.n_k), 1);
      std::fill_n(m.allowed.begin(), s.n_k, uint8_t{0});
      bad.problem.mask = m;
    }
    what = "an empty row under the reject policy";
  }
  // A failure names the bad input that was sent, not only the case it was made from.
  auto failed_sending = [&](const std::string& message) {
    Outcome o = props::failed(message);
    o.sent = fmt::format("{} on {}", what, canonical_name(bad.problem));
    return o;
  };
  // Guarded buffers pre-filled with a sentinel: nothing may be written.
  const Shape& bs = bad.problem.shape;
  const size_t out_size = static_cast<size_t>(std::max<int64_t>(0, bs.out_size()));
  const size_t w_size = caps.weights ? static_cast<size_t>(std::max<int64_t>(0, bs.weights_size())) : 0;
  std::vector<float> out(out_size + kGuard, kGuardValue), weights(w_size + kGuard, kGuardValue);
  try {
    impl.forward(bad.problem, q, k, v, std::span<float>(out.data(), out_size),
                 std::span<float>(weights.data(), w_size), threads);
  } catch (const InvalidInput&) {
    for (float x : out)
      if (x != kGuardValue) return failed_sending("rejected " + what + " but wrote to out first");
    for (float x : weights)
      if (x != kGuardValue) return failed_sending("rejected " + what + " but wrote to weights first");
    return {};
  } catch (const ImplementationFault&) {
    throw;
  } catch (const std::exception& e) {
    return failed_sending(fmt::format("{} raised '{}' instead of InvalidInput", what, e.what()));
  }
  return failed_sending("accepted bad input: " + what);
}

}  // namespace attncheck::props
