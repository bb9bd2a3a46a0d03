#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <vector>

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

TEST_CASE("the read bandwidth probe streams a buffer beyond the last-level cache", "[peak]") {
  CHECK(attncheck::read_bandwidth_buffer_bytes() == (size_t{256} << 20));
  ::setenv("ATTNCHECK_BANDWIDTH_MIB", "64", 1);  // quicker to map in a test
  CHECK(attncheck::read_bandwidth_buffer_bytes() == (size_t{64} << 20));
  const double gbps = attncheck::measure_read_bandwidth_gbps(1);
  INFO("measured " << gbps << " GB/s");
  CHECK(std::isfinite(gbps));
  CHECK(gbps > 0.0);
  CHECK(gbps < 10000.0);  // 10 TB/s: not a memory read, so the loop was optimised away
}

TEST_CASE("the probe's sum adds every float exactly once from any start and count", "[peak]") {
  // Small integers: every partial sum is exact, so any float missed or added
  // twice (in the part before the first vector boundary, the vectors or the
  // rest) changes the total.
  std::vector<float> x(600);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7 + 1);
  for (size_t start = 0; start < 20; ++start) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{127}, size_t{128},
                         size_t{129}, size_t{300}, size_t{579}}) {
      INFO("start " << start << ", count " << count);
      double expected = 0.0;
      for (size_t i = start; i < start + count; ++i) expected += x[i];
      CHECK(attncheck::sum_floats(x.data() + start, count) == expected);
    }
  }
}
