#include <catch2/catch.hpp>

#include <cmath>

#include "attncheck/report.h"

using namespace attncheck;

namespace {

/// time = c · n^exponent with a deterministic ±2 % wobble, n = 64 … 4096.
std::vector<std::pair<double, double>> power_series(double exponent) {
  std::vector<std::pair<double, double>> points;
  for (double n = 64; n <= 4096; n *= 2) points.emplace_back(n, 3e-9 * std::pow(n, exponent) * (1 + 0.02 * std::sin(n)));
  return points;
}

}  // namespace

TEST_CASE("the fitted exponent of a synthetic n² series is 2 within 0.01") {
  const auto fit = fit_power_law(power_series(2));
  REQUIRE(fit);
  CHECK(std::abs(fit->exponent - 2) < 0.01);
  CHECK(fit->n_min == 256);
  CHECK(fit->n_max == 4096);
  CHECK(fit->points == 5);
  CHECK_FALSE(fit->all_points);
}

TEST_CASE("the fitted exponent of a synthetic n³ series is 3 within 0.01") {
  const auto fit = fit_power_law(power_series(3));
  REQUIRE(fit);
  CHECK(std::abs(fit->exponent - 3) < 0.01);
}

TEST_CASE("the fit ignores n below 256 when at least two points lie at or above it") {
  // Linear below 256 (overheads dominate), quadratic from 256 on.
  std::vector<std::pair<double, double>> points = {{64, 64}, {128, 128}};
  for (double n = 256; n <= 2048; n *= 2) points.emplace_back(n, n * n);
  const auto fit = fit_power_law(points);
  REQUIRE(fit);
  CHECK(fit->exponent == Approx(2).margin(1e-9));
  CHECK(fit->coefficient == Approx(1).epsilon(1e-9));
  CHECK(fit->n_min == 256);
}

TEST_CASE("with fewer than two points at n >= 256 the fit uses all points and says so") {
  const auto fit = fit_power_law({{64, 1}, {128, 4}, {256, 16}});
  REQUIRE(fit);
  CHECK(fit->all_points);
  CHECK(fit->exponent == Approx(2).margin(1e-9));
  CHECK(fit->n_min == 64);
  CHECK(fit->points == 3);
}

TEST_CASE("one n, or only non-positive times, gives no fit") {
  CHECK_FALSE(fit_power_law({{512, 1.0}}));
  CHECK_FALSE(fit_power_law({{512, 1.0}, {512, 1.1}}));
  CHECK_FALSE(fit_power_law({{256, 0.0}, {512, -1.0}}));
}
