#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>

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
