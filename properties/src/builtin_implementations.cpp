#include "attncheck/builtin_implementations.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attncheck/attention.h"
#include "attncheck/reference.h"
#ifdef ATTNCHECK_HAVE_PEERS
#include "attncheck/peers.h"
#endif

namespace attncheck {
namespace {

// Entry points that take raw pointers cannot see a tensor's length, so the
// wrapper checks lengths (naming the tensor) and leaves the rest to them.
void check_lengths(const Problem& p, std::span<const float> q, std::span<const float> k,
                   std::span<const float> v, std::span<float> out) {
  validate_problem(p);
  const Shape& s = p.shape;
  const std::pair<const char*, std::pair<size_t, int64_t>> sizes[] = {
      {"Q", {q.size(), s.q_size()}}, {"K", {k.size(), s.k_size()}},
      {"V", {v.size(), s.v_size()}}, {"out", {out.size(), s.out_size()}}};
  for (const auto& [name, got_expected] : sizes)
    if (static_cast<int64_t>(got_expected.first) != got_expected.second)
      throw InvalidInput(fmt::format("{}: has {} elements; expected {}", name, got_expected.first,
                                     got_expected.second));
}

constexpr std::pair<const char*, DecodeScoring> kDecodeScoringMethods[] = {
    {"key_by_key", DecodeScoring::key_by_key},
    {"four_keys", DecodeScoring::four_keys},
    {"rows_in_lanes", DecodeScoring::rows_in_lanes}};

// Forces a decode scoring method for one call; the automatic choice again after it.
class ForcedDecodeScoring {
 public:
  explicit ForcedDecodeScoring(DecodeScoring scoring) : forced_(scoring != DecodeScoring::automatic) {
    if (forced_) force_decode_scoring(scoring);
  }
  ~ForcedDecodeScoring() {
    if (forced_) force_decode_scoring(DecodeScoring::automatic);
  }
  ForcedDecodeScoring(const ForcedDecodeScoring&) = delete;
  ForcedDecodeScoring& operator=(const ForcedDecodeScoring&) = delete;

 private:
  bool forced_;
};

class FusedImplementation : public Implementation {
 public:
  FusedImplementation(std::string name, DecodeScoring scoring) : name_(std::move(name)), scoring_(scoring) {}
  std::string name() const override { return name_; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.weights = false;
    c.threads = true;
    return c;
  }
  Precision precision() const override { return Precision::fp32; }
  void forward(const Problem& p, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::span<float> out, std::span<float>,
               int threads) override {
    check_lengths(p, q, k, v, out);
    AttentionOptions options;
    options.threads = threads;
    const ForcedDecodeScoring forced(scoring_);
    attention(p, q.data(), k.data(), v.data(), out.data(), options);
  }

 private:
  std::string name_;
  DecodeScoring scoring_;
};

#ifdef ATTNCHECK_HAVE_PEERS
// The bench peer computes S = QKᵀ·(scale/τ) in fp32 and a row softmax; a row
// whose fp32 logits overflow comes back as NaN (a +inf logit) or zeros (every
// readable logit −inf, taken for an empty row). The wrapper declines such a
// row (Unsupported naming it), as DESIGN.md "Range" asks; the peer's own
// arithmetic is unchanged.
class NaiveEigenImplementation : public Implementation {
 public:
  std::string name() const override { return "naive-eigen"; }
  Capabilities capabilities() const override { return {}; }
  Precision precision() const override { return Precision::fp32; }
  void forward(const Problem& p, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::span<float> out, std::span<float>, int) override {
    check_lengths(p, q, k, v, out);
    naive_eigen_attention(p, q.data(), k.data(), v.data(), out.data());
    decline_overflowed_rows(p, q, k, out);
  }

 private:
  // Throws Unsupported for the first row (batch, head, row order) with a
  // readable key where the peer's logits or output are not finite. The peer
  // keeps its logits to itself, so they are recomputed as it computes them
  // (fp32 dot product, then × fp32(scale/τ)) in slices where one could
  // overflow; elsewhere only the output is checked. A readable −inf logit
  // beside a finite one is not declined: its weight is exactly 0 either way.
  void decline_overflowed_rows(const Problem& p, std::span<const float> q, std::span<const float> k,
                               std::span<const float> out) const {
    const Shape& s = p.shape;
    const float multiplier = static_cast<float>(p.logit_multiplier());
    // Every stage of a logit (the sum, × scale, / τ) grows by at most this,
    // as in out_of_class_range.
    const long double scale = p.effective_scale(), tau = p.temperature;
    const long double stretch = std::max({1.0L, scale, 1 / tau, scale / tau});
    const long double largest = std::numeric_limits<float>::max();
    auto row_name = [](int64_t b, int64_t h, int64_t i) { return fmt::format("row [{}][{}][{}]", b, h, i); };
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t slice = b * s.heads + h;
        const float* Q = q.data() + slice * s.n_q * s.d_k;
        const float* K = k.data() + slice * s.n_k * s.d_k;
        const float* O = out.data() + slice * s.n_q * s.d_v;
        // No partial sum of a dot product exceeds d_k·max|q|·max|k|: when that
        // times the multiplier stays below half of float's largest value, no
        // logit of the slice can overflow.
        float qmax = 0, kmax = 0;
        for (int64_t x = 0; x < s.n_q * s.d_k; ++x) qmax = std::max(qmax, std::fabs(Q[x]));
        for (int64_t x = 0; x < s.n_k * s.d_k; ++x) kmax = std::max(kmax, std::fabs(K[x]));
        const bool may_overflow =
            static_cast<long double>(s.d_k) * qmax * kmax * stretch > largest / 2;
        for (int64_t i = 0; i < s.n_q; ++i) {
          int64_t readable = 0, first = -1, up = -1, not_finite = 0;
          bool all_down = true;
          float up_value = 0;
          long double magnitude = 0;  // the largest Σ|q·k| of a readable key
          for (int64_t j = 0; j < s.n_k; ++j) {
            if (!allowed(p, b, h, i, j)) continue;
            ++readable;
            if (first < 0) first = j;
            if (!may_overflow) continue;
            float dot = 0;
            long double sum = 0;
            for (int64_t t = 0; t < s.d_k; ++t) {
              dot += Q[i * s.d_k + t] * K[j * s.d_k + t];
              sum += std::fabs(static_cast<long double>(Q[i * s.d_k + t]) * K[j * s.d_k + t]);
            }
            magnitude = std::max(magnitude, sum);
            const float logit = dot * multiplier;
            if (!std::isfinite(logit)) ++not_finite;
            if ((std::isnan(logit) || logit == std::numeric_limits<float>::infinity()) && up < 0) up = j, up_value = logit;
            all_down = all_down && logit == -std::numeric_limits<float>::infinity();
          }
          if (readable == 0) continue;  // an empty row: the zero policy's zeros
          const float* o = O + i * s.d_v;
          int64_t bad_col = -1;
          bool zeros = true;
          for (int64_t c = 0; c < s.d_v; ++c) {
            if (!std::isfinite(o[c]) && bad_col < 0) bad_col = c;
            zeros = zeros && o[c] == 0;
          }
          const char* got = bad_col >= 0 ? (std::isnan(o[bad_col]) ? "NaN" : "inf") : zeros ? "zeros" : "finite values";
          if (may_overflow && up >= 0)
            throw Unsupported(fmt::format("{}: {}: the fp32 logit of readable key {} (recomputed as the peer computes it) is {} ({} of the row's {} readable "
                                          "logits are not finite); the Eigen peer returns {} for this row",
                                          name(), row_name(b, h, i), up, up_value, not_finite, readable, got));
          if (may_overflow && all_down)
            throw Unsupported(fmt::format("{}: {}: every readable logit overflows to -inf ({} keys; the first is key "
                                          "{}); the Eigen peer returns {} for this row",
                                          name(), row_name(b, h, i), readable, first, got));
          // Eigen may sum a dot product in another order than the loop above:
          // a row of zeros where some logit could overflow is the peer taking
          // its −inf logits for an empty row.
          if (zeros && magnitude * stretch > largest)
            throw Unsupported(fmt::format("{}: {}: the output row is all zeros and a readable key's Σ|q·k| = {:.3g} "
                                          "can overflow fp32 (the peer's logits overflowed to -inf)",
                                          name(), row_name(b, h, i), static_cast<double>(magnitude)));
          if (bad_col >= 0)
            throw Unsupported(fmt::format("{}: {}: O column {} is {} (an fp32 logit or the weighted sum of V "
                                          "overflowed)",
                                          name(), row_name(b, h, i), bad_col, o[bad_col]));
        }
      }
  }
};
#endif

// An in-process implementation that also returns the weights: name, precision
// and capabilities are the same for the reference and the naive ones.
class WeightsImplementation : public Implementation {
 public:
  WeightsImplementation(std::string name, Precision precision)
      : name_(std::move(name)), precision_(precision) {}
  std::string name() const override { return name_; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.weights = true;
    return c;
  }
  Precision precision() const override { return precision_; }

 private:
  std::string name_;
  Precision precision_;
};

template <class T>
class ReferenceImplementation : public WeightsImplementation {
 public:
  using WeightsImplementation::WeightsImplementation;
  void forward(const Problem& p, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::span<float> out, std::span<float> weights,
               int) override {
    std::vector<T> w;
    const std::vector<T> o = reference_attention<T>(p, q, k, v, weights.empty() ? nullptr : &w);
    if (o.size() != out.size() || (!weights.empty() && w.size() != weights.size()))
      throw InvalidInput("out: wrong number of elements for the shape");
    for (size_t i = 0; i < o.size(); ++i) out[i] = static_cast<float>(o[i]);
    for (size_t i = 0; i < w.size(); ++i) weights[i] = static_cast<float>(w[i]);
  }
};

template <class T>
class NaiveImplementation : public WeightsImplementation {
 public:
  NaiveImplementation(std::string name, Precision precision, Flaw flaw)
      : WeightsImplementation(std::move(name), precision), flaw_(flaw) {}
  void forward(const Problem& p, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::span<float> out, std::span<float> weights,
               int) override {
    naive_attention<T>(p, q, k, v, out, weights, flaw_);
  }

 private:
  Flaw flaw_;
};

// A correct implementation of a class narrower than float (fp16, bf16): Q, K
// and V rounded to the class, the naive attention in float, O and A rounded to
// the class. It declines (Unsupported) what the class cannot hold: an input
// beyond the class's largest finite value, or a readable key's float logit
// that overflows.
class NarrowNaiveImplementation : public WeightsImplementation {
 public:
  NarrowNaiveImplementation(std::string name, Precision precision, Flaw flaw)
      : WeightsImplementation(std::move(name), precision), flaw_(flaw) {}
  void forward(const Problem& p, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::span<float> out, std::span<float> weights,
               int) override {
    validate(p, q, k, v);
    const Shape& s = p.shape;
    const std::vector<float> rq = rounded("Q", q, s, s.n_q, s.d_k);
    const std::vector<float> rk = rounded("K", k, s, s.n_k, s.d_k);
    const std::vector<float> rv = rounded("V", v, s, s.n_k, s.d_v);
    try {
      naive_attention<float>(p, rq, rk, rv, out, weights, flaw_, LogitOverflow::reject);
    } catch (const Unsupported& e) {
      throw Unsupported(fmt::format("{}: {}", name(), e.what()));
    }
    for (float& x : out) x = round_to_class(x, precision());
    for (float& x : weights) x = round_to_class(x, precision());
  }

 private:
  // The tensor ([batch][heads][rows][cols]) rounded to the class; Unsupported
  // naming the first value beyond the class's largest finite value.
  std::vector<float> rounded(const char* tensor, std::span<const float> x, const Shape& s, int64_t rows,
                             int64_t cols) const {
    const PrecisionClass& pc = precision_class(precision());
    std::vector<float> r(x.size());
    for (size_t idx = 0; idx < x.size(); ++idx) {
      if (std::fabs(static_cast<double>(x[idx])) > pc.largest) {
        const int64_t i = static_cast<int64_t>(idx);
        throw Unsupported(fmt::format("{}: {}[b={}][h={}][row={}][col={}] = {:g} is beyond {}'s largest finite value {:g}",
                                      name(), tensor, i / (cols * rows * s.heads), i / (cols * rows) % s.heads,
                                      i / cols % rows, i % cols, x[idx], to_string(precision()), pc.largest));
      }
      r[idx] = round_to_class(x[idx], precision());
    }
    return r;
  }
  Flaw flaw_;
};

}  // namespace

#ifdef ATTNCHECK_HAVE_PEERS
std::unique_ptr<Implementation> make_naive_eigen_implementation() {
  return std::make_unique<NaiveEigenImplementation>();
}
#endif

std::unique_ptr<Implementation> make_fused_implementation() {
  return std::make_unique<FusedImplementation>("fused", DecodeScoring::automatic);
}

std::unique_ptr<Implementation> make_fused_implementation(const std::string& decode_scoring) {
  for (const auto& [name, scoring] : kDecodeScoringMethods)
    if (decode_scoring == name) return std::make_unique<FusedImplementation>("fused:" + decode_scoring, scoring);
  throw InvalidInput(fmt::format("option --impl: unknown decode scoring method 'fused:{}'; known: {}",
                                 decode_scoring, fmt::join(decode_scoring_methods(), ", ")));
}

std::vector<std::string> decode_scoring_methods() {
  std::vector<std::string> names;
  for (const auto& method : kDecodeScoringMethods) names.emplace_back(method.first);
  return names;
}

std::unique_ptr<Implementation> make_reference_implementation(const std::string& precision) {
  if (precision == "double")
    return std::make_unique<ReferenceImplementation<double>>("reference-double", Precision::fp64);
  if (precision == "long double")
    return std::make_unique<ReferenceImplementation<long double>>("reference-long-double",
                                                                  Precision::extended);
  if (precision == "mp50")
    return std::make_unique<ReferenceImplementation<mp50>>("reference-mp50", Precision::multiprecision);
  throw InvalidInput(fmt::format("reference precision '{}' is not one of double, long double, mp50", precision));
}

std::unique_ptr<Implementation> make_naive_implementation(Precision precision, Flaw flaw,
                                                          const std::string& name) {
  const std::string label = name.empty() ? "naive-" + to_string(precision) : name;
  switch (precision) {
    case Precision::fp32: return std::make_unique<NaiveImplementation<float>>(label, precision, flaw);
    case Precision::fp64: return std::make_unique<NaiveImplementation<double>>(label, precision, flaw);
    case Precision::extended:
      return std::make_unique<NaiveImplementation<long double>>(label, precision, flaw);
    case Precision::fp16:
    case Precision::bf16: return std::make_unique<NarrowNaiveImplementation>(label, precision, flaw);
    default: break;
  }
  throw InvalidInput(fmt::format("no naive implementation in {}", to_string(precision)));
}

std::unique_ptr<Implementation> make_naive_peer(Precision precision) {
  switch (precision) {
    case Precision::fp32:
    case Precision::fp64:
    case Precision::extended:
    case Precision::fp16:  // naive-fp16 / naive-bf16: the class's rounding around the float naive
    case Precision::bf16: return make_naive_implementation(precision);
    default: return nullptr;
  }
}

std::vector<std::unique_ptr<Implementation>> make_mutants() {
  std::vector<std::unique_ptr<Implementation>> list;
  for (const auto& [flaw, name, killed_by] : all_flaws())
    list.push_back(make_naive_implementation(Precision::fp32, flaw, "mutant:" + name));
  return list;
}

}  // namespace attncheck
