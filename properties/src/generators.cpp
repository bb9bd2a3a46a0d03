#include "attncheck/generators.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

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

enum class Profile { simple, uniform, wide, huge, tiny, peaked, near_max };

// Peaked: ±(512 + m/16), m < 2^14: magnitudes in [512, 1536), logits up to ~1e6.
float peaked_value(int x) {
  return x == 0 ? 0.0f
                : std::copysign(512.0f + std::ldexp(static_cast<float>(std::abs(x)), -4), static_cast<float>(x));
}
// Near the float maximum: ±10^(18 + 2·m/2^12), magnitudes in [1e18, 1e20):
// products 1e36..1e40 around float's largest value 3.4e38.
float near_max_value(int x) {
  return x == 0 ? 0.0f
                : std::copysign(static_cast<float>(std::pow(10.0, 18.0 + 2.0 * std::abs(x) / 4097.0)),
                                static_cast<float>(x));
}

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
    case Profile::peaked:
      return gen::map(signed_int(1 << 14), peaked_value);
    case Profile::near_max:
      return gen::map(signed_int(1 << 12), near_max_value);
  }
  return gen::just(0.0f);
}

// The same distributions drawn from a plain random engine, for tensors too
// large to shrink element by element (long rows).
float sample_value(Profile profile, std::mt19937_64& rng) {
  auto signed_draw = [&rng](int max_abs) {
    const int x = static_cast<int>(rng() % static_cast<uint64_t>(2 * max_abs + 1));
    return x % 2 ? -(x + 1) / 2 : x / 2;
  };
  switch (profile) {
    case Profile::simple: return static_cast<float>(signed_draw(3));
    case Profile::uniform: return std::ldexp(static_cast<float>(signed_draw(1 << 21)), -20);
    case Profile::wide: {
      const int m = signed_draw(1 << 20);
      return m == 0 ? 0.0f : std::ldexp(static_cast<float>(m), static_cast<int>(rng() % 37) - 50);
    }
    case Profile::huge: {
      const int x = signed_draw(1 << 12);
      return x == 0 ? 0.0f
                    : std::copysign(8.0f + std::ldexp(static_cast<float>(std::abs(x)), -6), static_cast<float>(x));
    }
    case Profile::tiny: {
      static const float values[] = {0.0f, 0.0f, 0x1p-149f, -0x1p-140f, 0x1.8p-127f, -1e-30f, 1e-20f, 1.0f};
      return values[rng() % 8];
    }
    case Profile::peaked: return peaked_value(signed_draw(1 << 14));
    case Profile::near_max: return near_max_value(signed_draw(1 << 12));
  }
  return 0.0f;
}

// Element by element (shrinkable), or, with `seeded`, from one drawn seed that
// does not shrink: a long row's keys are not worth shrinking value by value
// (its shape shrinks first) and would make every case slow to generate.
// Tensors of more than kElementwiseMaxElements values are always seeded:
// element-by-element generation costs milliseconds per case for them, and their
// values are not read by whoever shrinks (the shape shrinks first, and small
// shapes are element by element again).
Gen<std::vector<float>> gen_tensor(int64_t count, Profile profile, bool seeded) {
  if (!seeded && count <= kElementwiseMaxElements) return gen::container<std::vector<float>>(static_cast<size_t>(count), gen_value(profile));
  return gen::map(gen::noShrink(natural(1 << 30)), [count, profile](int seed) {
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    std::vector<float> t(static_cast<size_t>(count));
    for (float& x : t) x = sample_value(profile, rng);
    return t;
  });
}

// Extreme values a case may carry beyond its profiles, chosen per case.
enum class Edge {
  none,
  peaked,      // Q and K peaked: logits up to ~1e6, rows near one-hot
  near_max,    // Q and K in 1e18..1e20: some products and logits overflow float
  near_max_q,  // Q in 1e18..1e20, K ordinary: huge finite logits (large queries)
  near_max_k,  // K near the maximum, Q ordinary
};

double largest_abs(const std::vector<float>& t) {
  double m = 0;
  for (float x : t) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

void scale_by_power_of_two(std::vector<float>& t, int e) {
  for (float& x : t) x = std::ldexp(x, e);
}

// The largest Σ_t |q_t·k_t|·stretch over every query and key of a slice
// (masks ignored: an upper bound of every readable logit's magnitude), where
// stretch = max(1, scale, 1/τ, scale/τ) covers every stage of the logit. When
// the cheap bound d_k·max|q|·max|k|·stretch is at most `enough`, that bound.
double largest_logit_magnitude(const Case& c, double enough) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  const double scale = p.effective_scale(), tau = p.temperature;
  const double stretch = std::max({1.0, scale, 1 / tau, scale / tau});
  const double quick = static_cast<double>(s.d_k) * largest_abs(c.q) * largest_abs(c.k) * stretch;
  if (quick <= enough) return quick;
  double m = 0;
  for (int64_t slice = 0; slice < s.batch * s.heads; ++slice)
    for (int64_t i = 0; i < s.n_q; ++i)
      for (int64_t j = 0; j < s.n_k; ++j) {
        double sum = 0;
        const float* q = c.q.data() + (slice * s.n_q + i) * s.d_k;
        const float* k = c.k.data() + (slice * s.n_k + j) * s.d_k;
        for (int64_t t = 0; t < s.d_k; ++t) sum += std::fabs(static_cast<double>(q[t]) * k[t]);
        m = std::max(m, sum);
      }
  return m * stretch;
}

// Whether the case's logits stay below half the class's largest value.
bool logits_fit(const Case& c, const PrecisionClass& cls) {
  return largest_logit_magnitude(c, cls.largest / 2) <= cls.largest / 2;
}

// Scales tensors by powers of two until every value lies within the class and,
// unless `allow_overflow`, every logit below half its largest value.
void fit_to_class(Case& c, const PrecisionClass& cls, bool allow_overflow) {
  const double largest = std::min<double>(cls.largest, std::numeric_limits<float>::max());
  for (std::vector<float>* t : {&c.q, &c.k, &c.v}) {
    const double m = largest_abs(*t);
    if (m > largest) scale_by_power_of_two(*t, -static_cast<int>(std::ceil(std::log2(m / largest))) - 1);
  }
  if (allow_overflow || logits_fit(c, cls)) return;
  const double m = largest_logit_magnitude(c, 0);
  const int e = static_cast<int>(std::ceil(std::log2(m / (cls.largest / 2)))) + 1;
  scale_by_power_of_two(c.q, -(e + 1) / 2);
  scale_by_power_of_two(c.k, -e / 2);
}

// Scales Q and K by powers of two until every Σ|q·k|·stretch is at most `limit`.
void scale_logits_below(Case& c, double limit) {
  const double m = largest_logit_magnitude(c, limit);
  if (m <= limit) return;
  const int e = static_cast<int>(std::ceil(std::log2(m / limit)));
  scale_by_power_of_two(c.q, -(e + 1) / 2);
  scale_by_power_of_two(c.k, -e / 2);
}

// Integer Q and K whose dot products, times `gap`, the class resolves: no
// Σ_t|q_t·k_t| above `limit` (at least 1). Q and K become their signs (ties
// and zeros survive) and Q keeps only its first floor(limit) components.
void integers_below(Case& c, double limit) {
  const Shape& s = c.problem.shape;
  if (static_cast<double>(s.d_k) * largest_abs(c.q) * largest_abs(c.k) <= limit) return;
  auto sign = [](float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f; };
  for (float& x : c.q) x = sign(x);
  for (float& x : c.k) x = sign(x);
  const int64_t keep = std::max<int64_t>(1, static_cast<int64_t>(std::floor(limit)));
  for (int64_t row = 0; row < static_cast<int64_t>(c.q.size()) / s.d_k; ++row)
    for (int64_t t = keep; t < s.d_k; ++t) c.q[static_cast<size_t>(row * s.d_k + t)] = 0.0f;
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

bool multiprecision_oracle(Precision p) { return p == Precision::extended || p == Precision::multiprecision; }

// A long row's shape: one slice (two for multi_slice), few queries, modest d.
Gen<Shape> gen_long_shape(const CaseRequest& r) {
  return gen::exec([r] {
    Shape s;
    if (r.caps.batch_heads && r.multi_slice) {
      if (*pick<bool>({{1, false}, {1, true}})) s.batch = 2;
      else s.heads = 2;
    }
    const bool mp = multiprecision_oracle(r.precision);
    s.n_q = mp ? 1 : *gen_length(kLongRowMaxQueries);
    s.n_k = *gen_long_length(r.max_long_n_k);
    const int64_t max_d = std::min<int64_t>(r.max_d, mp ? 16 : 64);
    s.d_k = *gen_length(max_d);
    s.d_v = r.caps.dv_ne_dk ? *gen_length(max_d) : s.d_k;
    return s;
  });
}

}  // namespace

double resolvable_logit(Precision precision) {
  if (!narrower_than_float(precision)) return std::numeric_limits<double>::infinity();
  return 0.1 / (2 * precision_class(precision).unit_roundoff);
}

double zero_limit_logit_gap(Precision precision) { return narrower_than_float(precision) ? 20.0 : 100.0; }

bool long_rows_enabled(const CaseRequest& r) {
  return r.max_long_n_k > 0 && r.max_long_n_k > r.max_n && r.max_n >= kLongRowsMinMaxN && r.caps.cross;
}

Gen<int64_t> gen_long_length(int64_t max) {
  std::vector<std::pair<int, int64_t>> options;
  for (int64_t n : {1000, 1024, 1025, 2047, 2048, 2049, 4095, 4096})
    if (n <= max) options.push_back({2, n});
  options.push_back({4, -1});  // any length
  const int64_t lo = std::min<int64_t>(1000, max);
  return gen::mapcat(pick(options), [lo, max](int64_t n) {
    return n > 0 ? gen::just(n) : gen::resize(100, gen::inRange<int64_t>(lo, max + 1));
  });
}

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
    if (long_rows_enabled(r) && *pick<bool>({{100 - kLongRowPercent, false}, {kLongRowPercent, true}}))
      return *gen_long_shape(r);
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
      if (s.n_k > r.max_n || count > kElementwiseMaxElements) {  // from one seed, as large tensors
        std::mt19937_64 rng(static_cast<uint64_t>(*gen::noShrink(natural(1 << 30))));
        m.allowed.resize(static_cast<size_t>(count));
        for (uint8_t& x : m.allowed) x = rng() % 5 < 3 ? 1 : 0;
      } else {
        m.allowed = *gen::container<std::vector<uint8_t>>(static_cast<size_t>(count),
                                                          pick<uint8_t>({{3, 1}, {2, 0}}));
      }
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
        const PrecisionClass& cls = precision_class(r.precision);
        // Inputs of 1e20 only for classes that hold them (not fp16).
        const bool holds_near_max = cls.largest >= 1e21;
        // Narrow classes: most cases with logits the class resolves (drawn
        // only for them, so that wider classes' seeds keep their meaning).
        const bool resolvable =
            narrower_than_float(r.precision) &&
            *pick<bool>({{kResolvablePercent, true}, {100 - kResolvablePercent, false}});
        std::vector<std::pair<int, Edge>> edges = {{80, Edge::none}};
        if (!r.integer_qk) {
          // Mask requests favour large queries: masked keys meet huge logits.
          edges.push_back({r.masked_key ? 12 : 8, Edge::peaked});
          if (holds_near_max && !resolvable)
            edges.insert(edges.end(),
                         {{5, Edge::near_max}, {r.masked_key ? 10 : 3, Edge::near_max_q}, {2, Edge::near_max_k}});
        }
        const Edge edge = *pick(edges);
        std::vector<std::pair<int, Profile>> qk = {{4, Profile::simple}};
        if (!r.integer_qk)
          qk.insert(qk.end(), {{4, Profile::uniform}, {2, Profile::wide}, {2, Profile::huge}, {1, Profile::tiny}});
        const std::vector<std::pair<int, Profile>> vp = {
            {4, Profile::simple}, {4, Profile::uniform}, {2, Profile::wide}, {1, Profile::tiny}};
        Profile qp = *pick(qk), kp = *pick(qk);
        const Profile vpp = *pick(vp);
        if (edge == Edge::peaked) qp = kp = Profile::peaked;
        if (edge == Edge::near_max || edge == Edge::near_max_q) qp = Profile::near_max;
        if (edge == Edge::near_max || edge == Edge::near_max_k) kp = Profile::near_max;
        // Ordinary shapes never exceed max_n: n_k beyond it is a long row.
        const bool long_row = shape.n_k > r.max_n;
        Case c;
        c.problem = p;
        c.q = *gen_tensor(shape.q_size(), qp, false);
        c.k = *gen_tensor(shape.k_size(), kp, long_row);
        c.v = *gen_tensor(shape.v_size(), vpp, long_row);
        Structure st;
        st.tie = *pick<bool>({{3, false}, {1, true}});
        st.repeat_v = *pick<bool>({{4, false}, {1, true}});
        st.cancel_v = *pick<bool>({{4, false}, {1, true}});
        st.row_scales = *pick<bool>({{4, false}, {1, true}});
        st.key_shift = *pick<bool>({{4, false}, {1, true}});
        // Resolvable integers become signs: no scaled rows or shifted keys.
        if (resolvable && r.integer_qk) st.row_scales = st.key_shift = false;
        const std::vector<float> q0 = c.q, k0 = c.k, v0 = c.v;
        plant(st, shape, c.q, c.k, c.v);
        const bool allow_overflow = edge == Edge::near_max || edge == Edge::near_max_q || edge == Edge::near_max_k;
        if (r.integer_qk && !logits_fit(c, cls)) {
          // Scaling would break the integers: plant without the scaled rows.
          st.row_scales = st.key_shift = false;
          c.q = q0, c.k = k0, c.v = v0;
          plant(st, shape, c.q, c.k, c.v);
          // Still too large (a small τ): a larger τ, by powers of two, instead.
          while (!logits_fit(c, cls) && c.problem.temperature < 1e3) c.problem.temperature *= 2;
        }
        fit_to_class(c, cls, allow_overflow);
        if (resolvable) {
          const double limit = resolvable_logit(r.precision);
          // Integers: ties at the zero limit's gap stay below a logit error of ~0.2.
          if (r.integer_qk) integers_below(c, std::floor(2 * limit / zero_limit_logit_gap(r.precision)));
          else scale_logits_below(c, limit);
        }
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
