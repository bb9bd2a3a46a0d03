// The peers against the long double reference, on small cases of every mask
// kind and shape, and their rejection of bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "attncheck/peers.h"
#include "attncheck/reference.h"

using namespace attncheck;

namespace {

using Peer = std::function<void(const Problem&, const float*, const float*, const float*, float*)>;

struct NamedPeer {
  std::string name;
  Peer run;
};

std::vector<NamedPeer> peers() {
  return {
      {"naive-eigen", [](auto& p, auto q, auto k, auto v, auto o) { naive_eigen_attention(p, q, k, v, o); }},
      {"naive-eigen threads=3", [](auto& p, auto q, auto k, auto v, auto o) { naive_eigen_attention(p, q, k, v, o, 3); }},
      {"naive-openblas", [](auto& p, auto q, auto k, auto v, auto o) { naive_openblas_attention(p, q, k, v, o); }},
      {"naive-openblas threads=2", [](auto& p, auto q, auto k, auto v, auto o) { naive_openblas_attention(p, q, k, v, o, 2); }},
      {"reference-double", [](auto& p, auto q, auto k, auto v, auto o) { reference_double_attention(p, q, k, v, o); }},
  };
}

struct Inputs {
  std::vector<float> q, k, v;
};

Inputs random_inputs(const Shape& s, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Inputs in{std::vector<float>(static_cast<size_t>(s.q_size())),
            std::vector<float>(static_cast<size_t>(s.k_size())),
            std::vector<float>(static_cast<size_t>(s.v_size()))};
  for (auto* t : {&in.q, &in.k, &in.v})
    for (float& x : *t) x = normal(rng);
  return in;
}

Problem shaped(int64_t batch, int64_t heads, int64_t n_q, int64_t n_k, int64_t d_k, int64_t d_v) {
  Problem p;
  p.shape = {batch, heads, n_q, n_k, d_k, d_v};
  return p;
}

ExplicitMask random_mask(const Problem& p, int64_t batch, int64_t heads, unsigned seed) {
  std::mt19937 rng(seed);
  ExplicitMask m{batch, heads, {}};
  m.allowed.resize(static_cast<size_t>(batch * heads * p.shape.n_q * p.shape.n_k));
  for (auto& a : m.allowed) a = (rng() % 3) != 0;
  return m;
}

struct NamedProblem {
  std::string name;
  Problem problem;
};

std::vector<NamedProblem> cases() {
  std::vector<NamedProblem> all;
  auto add = [&](const std::string& name, Problem p) { all.push_back({name, std::move(p)}); };
  add("1x1", shaped(1, 1, 1, 1, 1, 1));
  add("square", shaped(1, 1, 16, 16, 8, 8));
  add("odd sizes around the vector width", shaped(1, 1, 17, 65, 7, 7));
  add("cross n_q < n_k", shaped(1, 1, 3, 70, 4, 4));
  add("cross n_q > n_k", shaped(1, 1, 70, 3, 4, 4));
  add("d_v != d_k", shaped(2, 3, 7, 9, 8, 3));
  for (Causal c : {Causal::top_left, Causal::bottom_right}) {
    for (auto [nq, nk] : {std::pair<int64_t, int64_t>{9, 9}, {5, 17}, {17, 5}}) {
      Problem p = shaped(2, 2, nq, nk, 5, 6);
      p.causal = c;
      p.empty_rows = EmptyRowPolicy::zero;  // bottom-right with n_q > n_k has empty rows
      add("causal " + to_string(c) + " " + std::to_string(nq) + "x" + std::to_string(nk), p);
    }
  }
  {
    Problem p = shaped(3, 2, 6, 20, 4, 4);
    p.key_lengths = {20, 7, 1};
    add("key lengths", p);
    p.key_lengths = {20, 0, 3};
    p.empty_rows = EmptyRowPolicy::zero;
    add("key length 0 under the zero policy", p);
  }
  for (auto [mb, mh] : {std::pair<int64_t, int64_t>{1, 1}, {2, 1}, {1, 3}, {2, 3}}) {
    Problem p = shaped(2, 3, 6, 19, 4, 5);
    p.mask = random_mask(p, mb, mh, static_cast<unsigned>(10 * mb + mh));
    p.empty_rows = EmptyRowPolicy::zero;
    add("explicit mask " + std::to_string(mb) + "x" + std::to_string(mh), p);
  }
  {
    Problem p = shaped(2, 1, 8, 8, 4, 4);
    p.causal = Causal::top_left;
    p.key_lengths = {5, 8};
    p.mask = random_mask(p, 1, 1, 7);
    p.empty_rows = EmptyRowPolicy::zero;
    add("causal, key lengths and mask combined", p);
  }
  for (double tau : {1e-3, 0.5, 1e3}) {
    Problem p = shaped(1, 2, 5, 11, 4, 4);
    p.temperature = tau;
    add("temperature " + std::to_string(tau), p);
  }
  {
    Problem p = shaped(1, 1, 5, 11, 4, 4);
    p.scale = 2.5;
    add("explicit scale", p);
  }
  return all;
}

}  // namespace

TEST_CASE("every peer agrees with the long double reference on every mask kind and shape", "[peers]") {
  unsigned seed = 1;
  for (const auto& [case_name, problem] : cases()) {
    const Inputs in = random_inputs(problem.shape, seed++);
    const std::vector<long double> expected = reference_attention<long double>(problem, in.q, in.k, in.v);
    for (const auto& peer : peers()) {
      INFO(peer.name << " on " << case_name << " (" << canonical_name(problem) << ")");
      std::vector<float> out(static_cast<size_t>(problem.shape.out_size()), 12345.0f);
      peer.run(problem, in.q.data(), in.k.data(), in.v.data(), out.data());
      double worst = 0.0;
      for (size_t i = 0; i < out.size(); ++i)
        worst = std::max(worst, static_cast<double>(std::fabs(static_cast<long double>(out[i]) - expected[i])));
      INFO("max abs error " << worst);
      CHECK(worst < 2e-5);
    }
  }
}

TEST_CASE("empty rows under the zero policy are exactly zero in every peer", "[peers]") {
  Problem p = shaped(2, 1, 4, 6, 3, 3);
  p.key_lengths = {0, 6};
  p.empty_rows = EmptyRowPolicy::zero;
  const Inputs in = random_inputs(p.shape, 99);
  for (const auto& peer : peers()) {
    INFO(peer.name);
    std::vector<float> out(static_cast<size_t>(p.shape.out_size()), 12345.0f);
    peer.run(p, in.q.data(), in.k.data(), in.v.data(), out.data());
    for (size_t i = 0; i < 4 * 3; ++i) CHECK(out[i] == 0.0f);  // batch element 0
    CHECK(out[4 * 3] != 0.0f);                                  // batch element 1 is computed
  }
}

TEST_CASE("masked keys' huge K and V leave every peer's output unchanged", "[peers]") {
  Problem p = shaped(1, 1, 5, 9, 4, 4);
  p.key_lengths = {6};
  Inputs in = random_inputs(p.shape, 5);
  for (const auto& peer : peers()) {
    INFO(peer.name);
    std::vector<float> before(static_cast<size_t>(p.shape.out_size())), after(before.size());
    peer.run(p, in.q.data(), in.k.data(), in.v.data(), before.data());
    Inputs hostile = in;
    for (size_t j = 6 * 4; j < hostile.k.size(); ++j) hostile.k[j] = 1e30f;
    for (size_t j = 6 * 4; j < hostile.v.size(); ++j) hostile.v[j] = 1e30f;
    peer.run(p, hostile.q.data(), hostile.k.data(), hostile.v.data(), after.data());
    CHECK(before == after);
  }
}

TEST_CASE("the multithreaded Eigen peer is bitwise identical to one thread", "[peers]") {
  Problem p = shaped(3, 2, 13, 21, 8, 8);
  const Inputs in = random_inputs(p.shape, 3);
  std::vector<float> one(static_cast<size_t>(p.shape.out_size())), many(one.size());
  naive_eigen_attention(p, in.q.data(), in.k.data(), in.v.data(), one.data(), 1);
  naive_eigen_attention(p, in.q.data(), in.k.data(), in.v.data(), many.data(), 4);
  CHECK(one == many);
}

TEST_CASE("every peer rejects bad input naming it, and writes nothing", "[peers]") {
  struct Bad {
    std::string name;
    std::function<void(Problem&, Inputs&)> spoil;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {"NaN in Q", [](Problem&, Inputs& in) { in.q[5] = std::nanf(""); }, "Q"},
      {"inf in V", [](Problem&, Inputs& in) { in.v[2] = INFINITY; }, "V"},
      {"temperature 0", [](Problem& p, Inputs&) { p.temperature = 0.0; }, "temperature"},
      {"key length past n_k", [](Problem& p, Inputs&) { p.key_lengths = {99}; }, "key_lengths"},
      {"empty row under reject", [](Problem& p, Inputs&) { p.key_lengths = {0}; }, "empty row"},
      {"mask of the wrong shape", [](Problem& p, Inputs&) { p.mask = ExplicitMask{1, 1, {1, 1}}; }, "mask"},
  };
  for (const auto& peer : peers()) {
    for (const auto& b : bad) {
      INFO(peer.name << ": " << b.name);
      Problem p = shaped(1, 1, 4, 6, 3, 3);
      Inputs in = random_inputs(p.shape, 11);
      b.spoil(p, in);
      std::vector<float> out(static_cast<size_t>(p.shape.out_size()), 12345.0f);
      CHECK_THROWS_AS(peer.run(p, in.q.data(), in.k.data(), in.v.data(), out.data()), InvalidInput);
      CHECK_THROWS_WITH(peer.run(p, in.q.data(), in.k.data(), in.v.data(), out.data()),
                        Catch::Contains(b.message));
      CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 12345.0f; }));
    }
  }
}

// The floor's sum in double over the bytes moved_bytes() counts: Q, and each
// slice's K and V rows below the last key its batch element's rows may read.
double expected_floor_sum(const Problem& p, const Inputs& in) {
  const Shape& s = p.shape;
  double total = 0.0;
  for (float x : in.q) total += x;
  for (int64_t b = 0; b < s.batch; ++b) {
    int64_t last = 0;
    for (int64_t i = 0; i < s.n_q; ++i) last = std::max(last, key_limit(p, b, i));
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t slice = b * s.heads + h;
      for (int64_t j = 0; j < last * s.d_k; ++j) total += in.k[static_cast<size_t>(slice * s.n_k * s.d_k + j)];
      for (int64_t j = 0; j < last * s.d_v; ++j) total += in.v[static_cast<size_t>(slice * s.n_k * s.d_v + j)];
    }
  }
  return total;
}

TEST_CASE("the read floor reads every counted byte once, and none past the last readable key", "[peers]") {
  struct Case {
    std::string name;
    Problem problem;
  };
  std::vector<Case> cases;
  cases.push_back({"decode, 3 heads", shaped(1, 3, 1, 1000, 64, 48)});
  cases.push_back({"odd sizes", shaped(2, 2, 5, 77, 13, 7)});
  Problem causal = shaped(1, 2, 4, 300, 16, 16);
  causal.causal = Causal::top_left;  // rows read keys 0..3 only
  cases.push_back({"causal top-left", causal});
  Problem lengths = shaped(2, 2, 3, 200, 8, 8);
  lengths.key_lengths = {150, 20};
  cases.push_back({"key lengths", lengths});
  for (const auto& c : cases) {
    for (int threads : {1, 2, 3, 7}) {
      INFO(c.name << ", threads " << threads);
      const Problem& p = c.problem;
      Inputs in = random_inputs(p.shape, 21);
      // Keys past the last readable one hold values that would show in the sum if read.
      for (int64_t b = 0; b < p.shape.batch; ++b) {
        int64_t last = 0;
        for (int64_t i = 0; i < p.shape.n_q; ++i) last = std::max(last, key_limit(p, b, i));
        for (int64_t h = 0; h < p.shape.heads; ++h) {
          const int64_t slice = b * p.shape.heads + h;
          for (int64_t j = last * p.shape.d_k; j < p.shape.n_k * p.shape.d_k; ++j)
            in.k[static_cast<size_t>(slice * p.shape.n_k * p.shape.d_k + j)] = 1e6f;
          for (int64_t j = last * p.shape.d_v; j < p.shape.n_k * p.shape.d_v; ++j)
            in.v[static_cast<size_t>(slice * p.shape.n_k * p.shape.d_v + j)] = 1e6f;
        }
      }
      std::vector<float> out(static_cast<size_t>(p.shape.out_size()), 12345.0f);
      read_floor(p, in.q.data(), in.k.data(), in.v.data(), out.data(), threads);
      CHECK(out[0] == Approx(expected_floor_sum(p, in)).margin(1e-3));
      CHECK(std::all_of(out.begin() + 1, out.end(), [](float x) { return x == 0.0f; }));
    }
  }
}

TEST_CASE("the read floor rejects bad options and null tensors, naming them, and writes nothing", "[peers]") {
  Problem p = shaped(1, 1, 4, 6, 3, 3);
  Inputs in = random_inputs(p.shape, 11);
  std::vector<float> out(static_cast<size_t>(p.shape.out_size()), 12345.0f);
  Problem cold = p;
  cold.temperature = 0.0;
  CHECK_THROWS_WITH(read_floor(cold, in.q.data(), in.k.data(), in.v.data(), out.data()), Catch::Contains("temperature"));
  Problem long_keys = p;
  long_keys.key_lengths = {99};
  CHECK_THROWS_WITH(read_floor(long_keys, in.q.data(), in.k.data(), in.v.data(), out.data()),
                    Catch::Contains("key_lengths"));
  CHECK_THROWS_WITH(read_floor(p, in.q.data(), nullptr, in.v.data(), out.data()), Catch::Contains("K: null"));
  CHECK_THROWS_AS(read_floor(p, in.q.data(), in.k.data(), in.v.data(), nullptr), InvalidInput);
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 12345.0f; }));
}
