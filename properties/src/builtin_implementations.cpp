#include "attncheck/builtin_implementations.h"

#include <fmt/format.h>

#include <cmath>

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

class FusedImplementation : public Implementation {
 public:
  std::string name() const override { return "fused"; }
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
    attention(p, q.data(), k.data(), v.data(), out.data(), options);
  }
};

#ifdef ATTNCHECK_HAVE_PEERS
class NaiveEigenImplementation : public Implementation {
 public:
  std::string name() const override { return "naive-eigen"; }
  Capabilities capabilities() const override { return {}; }
  Precision precision() const override { return Precision::fp32; }
  void forward(const Problem& p, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::span<float> out, std::span<float>, int) override {
    check_lengths(p, q, k, v, out);
    naive_eigen_attention(p, q.data(), k.data(), v.data(), out.data());
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
  return std::make_unique<FusedImplementation>();
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
  if (precision != Precision::fp32 && precision != Precision::fp64 && precision != Precision::extended)
    return nullptr;
  return make_naive_implementation(precision);
}

std::vector<std::unique_ptr<Implementation>> make_mutants() {
  std::vector<std::unique_ptr<Implementation>> list;
  for (const auto& [flaw, name, killed_by] : all_flaws())
    list.push_back(make_naive_implementation(Precision::fp32, flaw, "mutant:" + name));
  return list;
}

}  // namespace attncheck
