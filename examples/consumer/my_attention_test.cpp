// A project's own attention, checked by attncheck's property suite inside its
// own Catch2 tests (find_package(attncheck) → attncheck::properties).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <attn_plugin.h>
#include <attncheck/implementation.h>
#include <attncheck/problem.h>
#include <attncheck/reference.h>
#include <attncheck/verify.h>

#include <cmath>
#include <vector>

static_assert(ATTN_PLUGIN_ABI_VERSION == 1, "the installed plugin header is reachable");

namespace {

// Straightforward attention in double; `forget_scale` is a planted bug.
class MyAttention final : public attncheck::Implementation {
 public:
  explicit MyAttention(bool forget_scale = false) : forget_scale_(forget_scale) {}
  std::string name() const override { return forget_scale_ ? "my-attention-buggy" : "my-attention"; }
  attncheck::Capabilities capabilities() const override {
    attncheck::Capabilities c;
    c.weights = true;
    return c;
  }
  attncheck::Precision precision() const override { return attncheck::Precision::fp32; }

  void forward(const attncheck::Problem& p, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::span<float> out, std::span<float> weights, int) override {
    attncheck::validate(p, q, k, v);
    const attncheck::Shape& s = p.shape;
    const double multiplier = (forget_scale_ ? 1.0 : p.effective_scale()) / p.temperature;
    std::vector<double> w(static_cast<size_t>(s.n_k));
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t i = 0; i < s.n_q; ++i) {
          const int64_t slice = b * s.heads + h;
          double max = -INFINITY, sum = 0;
          for (int64_t j = 0; j < s.n_k; ++j) {
            if (!attncheck::allowed(p, b, h, i, j)) continue;
            double dot = 0;
            for (int64_t c = 0; c < s.d_k; ++c)
              dot += double(q[size_t((slice * s.n_q + i) * s.d_k + c)]) * k[size_t((slice * s.n_k + j) * s.d_k + c)];
            w[size_t(j)] = dot * multiplier;
            max = std::max(max, w[size_t(j)]);
          }
          for (int64_t j = 0; j < s.n_k; ++j) {
            w[size_t(j)] = attncheck::allowed(p, b, h, i, j) ? std::exp(w[size_t(j)] - max) : 0.0;
            sum += w[size_t(j)];
          }
          for (int64_t c = 0; c < s.d_v; ++c) {
            double acc = 0;
            for (int64_t j = 0; j < s.n_k; ++j) acc += w[size_t(j)] * v[size_t((slice * s.n_k + j) * s.d_v + c)];
            out[size_t((slice * s.n_q + i) * s.d_v + c)] = sum > 0 ? float(acc / sum) : 0.0f;
          }
          if (!weights.empty())
            for (int64_t j = 0; j < s.n_k; ++j)
              weights[size_t((slice * s.n_q + i) * s.n_k + j)] = sum > 0 ? float(w[size_t(j)] / sum) : 0.0f;
        }
  }

 private:
  bool forget_scale_;
};

attncheck::VerifyOptions small_budget() {
  attncheck::VerifyOptions options;
  options.seed = 3;
  options.cases = 10;
  options.max_n = 10;
  options.failures_dir = "";  // nothing written from a test
  return options;
}

}  // namespace

TEST_CASE("my attention satisfies every attncheck property") {
  MyAttention impl;
  const attncheck::VerifyReport report = attncheck::run_verify(impl, small_budget());
  for (const attncheck::PropertyResult& r : report.properties) {
    INFO(r.name << ": " << attncheck::to_string(r.status) << " " << r.message);
    CHECK((r.status == attncheck::Status::passed || r.status == attncheck::Status::skipped));
  }
  CHECK(attncheck::all_passed(report));
}

TEST_CASE("the suite catches a planted bug: the scale left out") {
  MyAttention impl(/*forget_scale=*/true);
  CHECK_FALSE(attncheck::all_passed(attncheck::run_verify(impl, small_budget())));
}

// Built with -march=native (cmake/install.cmake) while the library is not: the
// reference's tables must cross that boundary safely (plain storage, no Eigen
// type whose alignment depends on the ISA flags).
TEST_CASE("the reference's tables cross into a program built with other ISA flags") {
  attncheck::Problem p;
  p.shape = {1, 1, 3, 4, 2, 2};
  p.causal = attncheck::Causal::top_left;
  const std::vector<float> q{1, 0, 0, 1, 1, 1}, k{1, 0, 0, 1, 1, 1, -1, 0}, v{1, 2, 3, 4, 5, 6, 7, 8};
  const auto t = attncheck::reference_tables<double>(p, q, k, v, 0, 0);
  REQUIRE((t.A.rows() == 3 && t.A.cols() == 4 && t.O.rows() == 3 && t.O.cols() == 2));
  for (int64_t i = 0; i < 3; ++i) {
    double sum = 0;
    for (double a : t.A.row(i)) sum += a;
    CHECK(sum == Approx(1.0));
  }
  CHECK(t.A(0, 1) == 0.0);  // causal: row 0 reads key 0 only
  CHECK(t.O(0, 0) == Approx(1.0));
}
