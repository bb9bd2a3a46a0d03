#include "attncheck/generators.h"

#include <algorithm>
#include <cmath>

namespace attncheck {
namespace {

using rc::Gen;
namespace gen = rc::gen;

// A non-negative integer in [0, max] that shrinks towards 0 at any size.
Gen<int> natural(int max) { return gen::resize(100, gen::inRange(0, max + 1)); }

// 0, -1, 1, -2, 2, ...: shrinks towards 0.
Gen<int> signed_int(int max_abs) {
  return gen::map(natural(2 * max_abs), [](int x) { return x % 2 ? -(x + 1) / 2 : x / 2; });
}

enum class Profile { simple, uniform, wide, huge, tiny };

// One tensor value in a profile; every profile shrinks towards 0.
Gen<float> gen_value(Profile profile) {
  switch (profile) {
    case Profile::simple:  // small integers: exact ties and exact dot products
      return gen::map(signed_int(3), [](int x) { return static_cast<float>(x); });
    case Profile::uniform:  // 20-bit fractions in [-2, 2]
      return gen::map(signed_int(1 << 21), [](int x) { return std::ldexp(static_cast<float>(x), -20); });
    case Profile::wide:  // magnitudes from 2^-30 to 2^6, with zeros
      return gen::apply(
          [](int m, int e) { return m == 0 ? 0.0f : std::ldexp(static_cast<float>(m), e - 50); },
          signed_int(1 << 20), natural(36));
    case Profile::huge:  // 8..64: logits past exp's overflow (≈ 88) without max subtraction
      return gen::map(signed_int(1 << 12), [](int x) {
        return x == 0 ? 0.0f : std::copysign(8.0f + std::ldexp(static_cast<float>(std::abs(x)), -6), static_cast<float>(x));
      });
    case Profile::tiny:  // exact zeros, subnormals and values near the bottom of float
      return gen::map(pick<float>({{4, 0.0f}, {2, 0x1p-149f}, {2, -0x1p-140f}, {2, 0x1.8p-127f},
                                   {2, -1e-30f}, {2, 1e-20f}, {2, 1.0f}}),
                      [](float x) { return x; });
  }
  return gen::just(0.0f);
}

Gen<std::vector<float>> gen_tensor(int64_t count, Profile profile) {
  return gen::container<std::vector<float>>(static_cast<size_t>(count), gen_value(profile));
}

// Structures planted in the tensors after their values are drawn.
struct Structure {
  bool tie = false;          // K row 1 = K row 0: an exact tie for the max
  bool repeat_v = false;     // V row n_k-1 = V row 0
  bool cancel_v = false;     // V row 1 = -V row 0: outputs near zero by cancellation
  bool row_scales = false;   // Q rows scaled by 1, 32, 256: logit ranges differ by hundreds
  bool key_shift = false;    // K += 16: each row's logits shifted by hundreds
};

void plant(const Structure& st, const Shape& s, std::vector<float>& q, std::vector<float>& k,
           std::vector<float>& v) {
  for (int64_t slice = 0; slice < s.batch * s.heads; ++slice) {
    float* Q = q.data() + slice * s.n_q * s.d_k;
    float* K = k.data() + slice * s.n_k * s.d_k;
    float* V = v.data() + slice * s.n_k * s.d_v;
    if (st.tie && s.n_k >= 2) std::copy(K, K + s.d_k, K + s.d_k);
    if (st.repeat_v && s.n_k >= 2) std::copy(V, V + s.d_v, V + (s.n_k - 1) * s.d_v);
    if (st.cancel_v && s.n_k >= 2)
      for (int64_t c = 0; c < s.d_v; ++c) V[s.d_v + c] = -V[c];
    if (st.row_scales)
      for (int64_t i = 0; i < s.n_q; ++i)
        for (int64_t t = 0; t < s.d_k; ++t) Q[i * s.d_k + t] *= (i % 3 == 0 ? 1.0f : i % 3 == 1 ? 32.0f : 256.0f);
    if (st.key_shift)
      for (int64_t x = 0; x < s.n_k * s.d_k; ++x) K[x] += 16.0f;
  }
}

// The first key every row of a valid reject-policy problem can read, found so
// that an explicit mask can always leave one readable key per row.
int64_t smallest_limit(const Problem& p, int64_t i) {
  int64_t limit = p.shape.n_k;
  for (int64_t b = 0; b < p.shape.batch; ++b) limit = std::min(limit, key_limit(p, b, i));
  return limit;
}

}  // namespace

Gen<int64_t> gen_length(int64_t max) {
  std::vector<std::pair<int, int64_t>> options;
  // Small sizes first (shrinking lands there), then the sizes around a
  // 16-float vector (15, 16, 17, 48 = 3·16, 130 = 8·16 + 2) and around a
  // 64-key block (63, 64, 65, 128, 130: more than one block, with a tail).
  for (int64_t n = 1; n <= std::min<int64_t>(max, 9); ++n) options.push_back({n <= 4 ? 4 : 2, n});
  for (int64_t n : {15, 16, 17, 31, 33, 48, 63, 64, 65, 128, 130})
    if (n <= max) options.push_back({3, n});
  return pick(options);
}

Gen<Shape> gen_shape(const CaseRequest& r) {
  return gen::exec([r] {
    Shape s;
    if (r.caps.batch_heads) {
      s.batch = 1 + *natural(2);
      s.heads = 1 + *natural(2);
      if (r.multi_slice && s.batch * s.heads == 1) s.heads = 2;
    }
    s.n_q = *gen_length(r.max_n);
    s.n_k = r.caps.cross ? *gen_length(r.max_n) : s.n_q;
    if (r.masked_key && s.n_k < 2) s.n_k = r.caps.cross ? 2 : (s.n_q = 2);
    s.d_k = *gen_length(r.max_d);
    s.d_v = r.caps.dv_ne_dk ? *gen_length(r.max_d) : s.d_k;
    return s;
  });
}

Gen<Problem> gen_problem(const CaseRequest& r, const Shape& s) {
  return gen::exec([r, s] {
    const Capabilities& caps = r.caps;
    Problem p;
    p.shape = s;

    // Empty-row policy: reject (with no empty rows) unless the property wants
    // empty rows or the implementation only zeroes them.
    std::vector<std::pair<int, EmptyRowPolicy>> policies;
    if (caps.empty_row_reject) policies.push_back({3, EmptyRowPolicy::reject});
    if (caps.empty_row_zero) policies.push_back({r.empty_row ? 3 : 1, EmptyRowPolicy::zero});
    if (policies.empty()) policies.push_back({1, EmptyRowPolicy::reject});
    p.empty_rows = *pick(policies);
    const bool avoid_empty = p.empty_rows == EmptyRowPolicy::reject && !r.empty_row;

    std::vector<std::pair<int, Causal>> causal;
    if (!r.causal) causal.push_back({4, Causal::none});
    if (!r.no_causal && !r.position_free) {
      if (caps.causal_top_left) causal.push_back({2, Causal::top_left});
      if (caps.causal_bottom_right) causal.push_back({2, Causal::bottom_right});
    }
    if (causal.empty()) causal.push_back({1, Causal::none});
    p.causal = *pick(causal);
    // Bottom-right with n_q > n_k leaves the first rows empty.
    if (p.causal == Causal::bottom_right && s.n_q > s.n_k && avoid_empty)
      p.causal = caps.causal_top_left ? Causal::top_left : Causal::none;

    const bool want_mask = r.masked_key && p.causal == Causal::none;
    if (caps.key_padding && !r.position_free && *pick<bool>({{3, false}, {want_mask ? 3 : 1, true}})) {
      for (int64_t b = 0; b < s.batch; ++b) {
        const int lo = avoid_empty ? 1 : 0;
        p.key_lengths.push_back(s.n_k - *natural(static_cast<int>(s.n_k - lo)));
      }
    }

    if (caps.explicit_mask && *pick<bool>({{3, false}, {want_mask ? 4 : 1, true}})) {
      ExplicitMask m;
      m.batch = *pick<int64_t>({{1, 1}, {1, s.batch}});
      m.heads = *pick<int64_t>({{1, 1}, {1, s.heads}});
      const int64_t count = m.batch * m.heads * s.n_q * s.n_k;
      m.allowed = *gen::container<std::vector<uint8_t>>(static_cast<size_t>(count),
                                                        pick<uint8_t>({{3, 1}, {2, 0}}));
      p.mask = m;
      if (avoid_empty) {
        // At least one readable key per row: allow one below every batch element's limit.
        for (int64_t mb = 0; mb < m.batch; ++mb)
          for (int64_t mh = 0; mh < m.heads; ++mh)
            for (int64_t i = 0; i < s.n_q; ++i) {
              const int64_t limit = smallest_limit(p, i);
              uint8_t* row = p.mask->allowed.data() + ((mb * m.heads + mh) * s.n_q + i) * s.n_k;
              if (limit > 0 && std::none_of(row, row + limit, [](uint8_t x) { return x != 0; }))
                row[(i * 7 + 3) % limit] = 1;
            }
      }
    }

    if (r.empty_row) {
      // Plant one empty row where the implementation can express it.
      const int64_t row = *natural(static_cast<int>(s.n_q - 1));
      if (p.mask) {
        uint8_t* m = p.mask->allowed.data() + row * s.n_k;
        std::fill(m, m + s.n_k, uint8_t{0});
      } else if (caps.key_padding) {
        if (p.key_lengths.empty()) p.key_lengths.assign(static_cast<size_t>(s.batch), s.n_k);
        p.key_lengths[static_cast<size_t>(*natural(static_cast<int>(s.batch - 1)))] = 0;
      } else if (caps.explicit_mask) {
        ExplicitMask m;
        m.allowed.assign(static_cast<size_t>(s.n_q * s.n_k), 1);
        std::fill(m.allowed.begin() + row * s.n_k, m.allowed.begin() + (row + 1) * s.n_k, uint8_t{0});
        p.mask = m;
      }
    }

    if (caps.scale && *pick<bool>({{4, false}, {1, true}}))
      p.scale = *pick<double>({{1, 1.0}, {1, 0.5}, {1, 2.0}, {1, 0.125}, {1, 3.0}});
    if (caps.temperature && !r.fixed_temperature && *pick<bool>({{2, false}, {1, true}})) {
      // log-uniform over [1e-3, 1e3], shrinking towards 1
      const int exponent = *natural(3000);
      const bool below = *pick<bool>({{1, false}, {1, true}});
      p.temperature = std::pow(10.0, (below ? -exponent : exponent) / 1000.0);
    }
    return p;
  });
}

Gen<Case> gen_case(const CaseRequest& r) {
  return gen::mapcat(gen_shape(r), [r](const Shape& s) {
    return gen::mapcat(gen_problem(r, s), [r](const Problem& p) {
      return gen::exec([r, p] {
        const Shape& shape = p.shape;
        std::vector<std::pair<int, Profile>> qk = {{4, Profile::simple}};
        if (!r.integer_qk)
          qk.insert(qk.end(), {{4, Profile::uniform}, {2, Profile::wide}, {2, Profile::huge}, {1, Profile::tiny}});
        const std::vector<std::pair<int, Profile>> vp = {
            {4, Profile::simple}, {4, Profile::uniform}, {2, Profile::wide}, {1, Profile::tiny}};
        Case c;
        c.problem = p;
        c.q = *gen_tensor(shape.q_size(), *pick(qk));
        c.k = *gen_tensor(shape.k_size(), *pick(qk));
        c.v = *gen_tensor(shape.v_size(), *pick(vp));
        Structure st;
        st.tie = *pick<bool>({{3, false}, {1, true}});
        st.repeat_v = *pick<bool>({{4, false}, {1, true}});
        st.cancel_v = *pick<bool>({{4, false}, {1, true}});
        st.row_scales = *pick<bool>({{4, false}, {1, true}});
        st.key_shift = *pick<bool>({{4, false}, {1, true}});
        plant(st, shape, c.q, c.k, c.v);
        c.labels["aux"] = std::to_string(*natural(1 << 20));
        return c;
      });
    });
  });
}

std::vector<std::string> missing_capabilities(const Capabilities& c) {
  std::vector<std::string> missing;
  const std::pair<bool, const char*> all[] = {
      {c.cross, "cross"},
      {c.dv_ne_dk, "dv_ne_dk"},
      {c.batch_heads, "batch_heads"},
      {c.scale, "scale"},
      {c.temperature, "temperature"},
      {c.causal_top_left, "causal_top_left"},
      {c.causal_bottom_right, "causal_bottom_right"},
      {c.key_padding, "key_padding"},
      {c.explicit_mask, "explicit_mask"},
      {c.empty_row_reject, "empty_row_reject"},
      {c.empty_row_zero, "empty_row_zero"}};
  for (const auto& [has, name] : all)
    if (!has) missing.push_back(name);
  return missing;
}

}  // namespace attncheck
