// The kernels' exp for softmax arguments (SoftmaxExp: VSCALEFPS on AVX-512, the exponent field on AVX2,
// hn::Exp elsewhere), on every target this machine runs: within one ulp of
// exp over [-104, 0], exactly 1 at 0, and 0 for arguments that round to 0,
// for -inf (masked keys) and for NaN, as hn::Exp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attncheck/attention.h"
#include "kernel_args.h"

namespace {

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

uint32_t to_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// |got − want| in units of the last place of want rounded to float (subnormals: 2⁻¹⁴⁹).
double ulps(float got, long double want) {
  const float w = static_cast<float>(want);
  const float a = std::fabs(w);
  const float ulp = a < std::numeric_limits<float>::min() ? std::numeric_limits<float>::denorm_min()
                                                          : std::nextafter(a, INFINITY) - a;
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / ulp);
}

struct Restore {
  ~Restore() { attncheck::force_target(""); }
};

}  // namespace

TEST_CASE("the softmax exp is within one ulp over [-104, 0] on every target") {
  // Every 97th float from -0 down to -104 (about 11.6 million), plus both ends.
  std::vector<float> x;
  const uint32_t lo = to_bits(-0.0f), hi = to_bits(-104.0f);
  for (uint32_t u = lo; u < hi; u += 97) x.push_back(from_bits(u));
  x.push_back(-104.0f);
  std::vector<float> out(x.size());
  Restore restore;
  for (const std::string& target : attncheck::available_targets()) {
    attncheck::force_target(target);
    attncheck::detail::softmax_exp(x.data(), out.data(), x.size());
    double worst = 0;
    float worst_at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = ulps(out[i], std::exp(static_cast<long double>(x[i])));
      if (e > worst) worst = e, worst_at = x[i];
    }
    INFO(target << ": worst " << worst << " ulp at x = " << worst_at);
    CHECK(worst <= 1.0);
  }
}

TEST_CASE("the softmax exp of 0, -inf, NaN and arguments past -104") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // More values than one vector holds on any target, so the tail is taken too.
  std::vector<float> x = {0.0f, -0.0f, -inf, nan, -104.0f, -105.0f, -1e30f, -150.0f,
                          -103.9f, -87.5f, -1e-30f, -0.5f, -1.0f, -20.0f, -60.0f, -88.0f,
                          -inf, 0.0f, -3.0f};
  std::vector<float> out(x.size());
  Restore restore;
  for (const std::string& target : attncheck::available_targets()) {
    INFO(target);
    attncheck::force_target(target);
    attncheck::detail::softmax_exp(x.data(), out.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      INFO("x = " << x[i]);
      if (x[i] == 0.0f) CHECK(out[i] == 1.0f);
      else if (!(x[i] > -104.0f)) CHECK(out[i] == 0.0f);
      else CHECK(ulps(out[i], std::exp(static_cast<long double>(x[i]))) <= 1.0);
    }
  }
}

TEST_CASE("the softmax exp of four vectors at once gives each vector's own bits") {
  // Blocks whose lanes are all >= -87 (one multiplication for the block) and
  // blocks with one lane below it, -inf or NaN (each vector on its own), and a
  // tail shorter than a block.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x;
  for (int i = 0; i < 4000; ++i) x.push_back(-0.0217f * static_cast<float>(i % 4001));  // [-86.8, 0]
  for (const float odd : {-87.5f, -88.0f, -103.0f, -inf, nan, -1e30f}) {
    for (size_t i = 0; i < 128; ++i) x.push_back(-0.5f * static_cast<float>(i % 7));
    x[x.size() - 77] = odd;  // one lane of one block among the 128 values just added
  }
  x.push_back(-1.0f);
  std::vector<float> one(x.size()), blocks(x.size());
  Restore restore;
  for (const std::string& target : attncheck::available_targets()) {
    INFO(target);
    attncheck::force_target(target);
    attncheck::detail::softmax_exp(x.data(), one.data(), x.size());
    attncheck::detail::softmax_exp_blocks(x.data(), blocks.data(), x.size());
    size_t differ = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (to_bits(one[i]) == to_bits(blocks[i])) continue;
      if (differ++ == 0)
        UNSCOPED_INFO("first at x = " << x[i] << ": " << one[i] << " one by one, " << blocks[i] << " in blocks");
    }
    CHECK(differ == 0);
  }
}
