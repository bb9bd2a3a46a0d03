// `attncheck bench` records the compute time an implementation reports
// (Implementation::last_compute_seconds) beside the wall time.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "attncheck/bench.h"
#include "attncheck/registry.h"
#include <unistd.h>

using namespace attncheck;

namespace {

/// Writes zeros and says it computed for `reported` seconds (none when negative);
/// each call also sleeps 1 ms, standing in for an isolation's copies.
class FakeTimed : public Implementation {
 public:
  explicit FakeTimed(double reported) : reported_(reported) {}
  std::string name() const override { return "fake-timed"; }
  Capabilities capabilities() const override { return {}; }
  Precision precision() const override { return Precision::fp32; }
  void forward(const Problem&, std::span<const float>, std::span<const float>, std::span<const float>,
               std::span<float> out, std::span<float>, int) override {
    std::fill(out.begin(), out.end(), 0.0f);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::optional<double> last_compute_seconds() const override {
    if (reported_ < 0) return std::nullopt;
    return reported_;
  }

 private:
  double reported_;
};

nlohmann::json run(const std::string& impl, const std::filesystem::path& json_path) {
  BenchOptions options;
  options.impls = {impl};
  options.n = {32};
  options.n_q = {1};
  options.n_k = {256};
  options.d = {16};
  options.repetitions = 1;
  options.min_time = 0.01;
  options.json_path = json_path.string();
  run_benchmarks(options);
  std::ifstream in(json_path);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("bench records the compute time an implementation reports, and the rates it gives") {
  setenv("ATTNCHECK_BANDWIDTH_MIB", "64", 1);  // a short bandwidth probe
  register_implementation("fake-timed:", [](const std::string& argument) {
    return std::make_unique<FakeTimed>(argument == "none" ? -1.0 : std::stod(argument));
  }, "test: reports a fixed compute time");
  const auto dir = std::filesystem::temp_directory_path() / ("attncheck-compute-time-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);

  const auto doc = run("fake-timed:0.0002", dir / "timed.json");
  int checked = 0;
  for (const auto& b : doc["benchmarks"]) {
    if (b.value("run_type", "") != "iteration") continue;
    INFO(b["name"].get<std::string>());
    REQUIRE(b.contains("compute_seconds"));
    CHECK(b["compute_seconds"].get<double>() == Approx(0.0002));
    const double flops_per_call = b["flops"].get<double>() * b["real_time"].get<double>() * 1e-3;  // ms
    CHECK(b["compute_gflops"].get<double>() == Approx(flops_per_call * 1e-9 / 0.0002).epsilon(1e-6));
    const double bytes_per_call = b["bytes"].get<double>() * b["real_time"].get<double>() * 1e-3;
    CHECK(b["compute_gbytes_per_s"].get<double>() == Approx(bytes_per_call * 1e-9 / 0.0002).epsilon(1e-6));
    // The wall time still includes the 1 ms the call took beyond its compute.
    CHECK(b["real_time"].get<double>() >= 1.0);
    ++checked;
  }
  CHECK(checked == 2);  // one square shape, one cross shape

  // An implementation that reports nothing gets no compute counters.
  const auto silent = run("fake-timed:none", dir / "silent.json");
  for (const auto& b : silent["benchmarks"])
    if (b.value("run_type", "") == "iteration") CHECK_FALSE(b.contains("compute_seconds"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("bench still names an unknown implementation with --impl") {
  CHECK_THROWS_WITH(find_bench_implementation("no-such-thing"),
                    Catch::Contains("option --impl: unknown implementation 'no-such-thing'"));
}
