#include <catch2/catch.hpp>
#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <system_error>
#include <vector>

#include "attncheck/cpu.h"
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

TEST_CASE("a thread placed on one CPU runs there, and gets its CPUs back after", "[peak][cpu]") {
  const std::vector<int> cpus = attncheck::allowed_cpus();
  REQUIRE_FALSE(cpus.empty());
  const int before = attncheck::confined_cpu();
  for (int cpu : cpus) {
    INFO("CPU " << cpu);
    {
      const attncheck::OnCpu placed(cpu);
      CHECK(attncheck::confined_cpu() == cpu);
      CHECK(::sched_getcpu() == cpu);
    }
    CHECK(attncheck::confined_cpu() == before);
    CHECK(attncheck::allowed_cpus() == cpus);
  }
  {
    const attncheck::OnCpu unplaced(-1);  // no CPU: nothing changes
    CHECK(attncheck::allowed_cpus() == cpus);
  }
  // A CPU the machine does not have is refused, and the thread keeps its CPUs.
  const int missing = CPU_SETSIZE - 1;
  if (::sysconf(_SC_NPROCESSORS_CONF) < missing) {
    CHECK_THROWS_AS(attncheck::OnCpu(missing), std::system_error);
    CHECK(attncheck::allowed_cpus() == cpus);
  }
}

TEST_CASE("CPU lists are written as the kernel writes them", "[cpu]") {
  CHECK(attncheck::cpu_list({}).empty());
  CHECK(attncheck::cpu_list({3}) == "3");
  CHECK(attncheck::cpu_list({0, 1}) == "0-1");
  CHECK(attncheck::cpu_list({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8");
}

TEST_CASE("the read bandwidth probe gives a figure for each CPU asked for, and leaves the caller free", "[peak][cpu]") {
  ::setenv("ATTNCHECK_BANDWIDTH_MIB", "64", 1);
  const std::vector<int> cpus = attncheck::allowed_cpus();
  const std::vector<double> each = attncheck::measure_read_bandwidth_by_cpu(cpus);
  REQUIRE(each.size() == cpus.size());
  for (double gbps : each) {
    CHECK(gbps > 0.0);
    CHECK(gbps < 10000.0);
  }
  CHECK(attncheck::allowed_cpus() == cpus);  // the caller is free again
}
