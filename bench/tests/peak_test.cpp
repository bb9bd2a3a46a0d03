#include <catch2/catch.hpp>
#include <cmath>

#include "attncheck/peak.h"

TEST_CASE("the peak FMA probe returns a positive finite throughput", "[peak]") {
  const double gflops = attncheck::measure_peak_fma_gflops(1);
  INFO("measured " << gflops << " GFLOP/s on " << attncheck::peak_probe_target());
  CHECK(std::isfinite(gflops));
  CHECK(gflops > 0.0);
}

TEST_CASE("the peak FMA probe names the SIMD target it ran on", "[peak]") {
  CHECK_FALSE(attncheck::peak_probe_target().empty());
}
