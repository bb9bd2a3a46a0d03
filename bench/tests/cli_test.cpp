// `attncheck bench` end to end: a tiny run whose Google Benchmark JSON must hold
// the names, counters, complexity fits and context, and bad options that must
// fail with exit status 2, a message naming the option, and no file written.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "attncheck/cpu.h"

namespace fs = std::filesystem;

namespace {

struct Outcome {
  int status = -1;
  std::string out, err;
};

fs::path scratch_dir() {
  fs::path dir = fs::temp_directory_path() / ("attncheck-bench-cli-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

Outcome run_cli(const std::string& args) {
  const fs::path out_file = scratch_dir() / "stdout.txt", err_file = scratch_dir() / "stderr.txt";
  const std::string command =
      // A 64 MiB bandwidth probe: mapping 256 MiB takes seconds on some virtual machines.
      "ATTNCHECK_BANDWIDTH_MIB=64 " + std::string(ATTNCHECK_CLI) + " bench " + args + " >" + out_file.string() +
      " 2>" + err_file.string();
  const int raw = std::system(command.c_str());
  Outcome outcome;
  outcome.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  const auto read = [](const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  outcome.out = read(out_file);
  outcome.err = read(err_file);
  return outcome;
}

// Runs bench with `args` writing JSON to scratch_dir()/file; requires success
// and returns the JSON.
nlohmann::json bench_json(const std::string& args, const std::string& file) {
  const fs::path json_path = scratch_dir() / file;
  fs::remove(json_path);
  const Outcome outcome = run_cli(args + " --json " + json_path.string());
  INFO(outcome.err);
  REQUIRE(outcome.status == 0);
  std::ifstream in(json_path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// The bench JSON's iteration runs (no aggregates) by benchmark name.
std::map<std::string, nlohmann::json> iteration_runs(const nlohmann::json& doc) {
  std::map<std::string, nlohmann::json> runs;
  for (const auto& b : doc.at("benchmarks"))
    if (b.value("run_type", "") == "iteration") runs[b.at("name").get<std::string>()] = b;
  return runs;
}

// bench_json's benchmark names.
std::set<std::string> benchmark_names(const std::string& args, const std::string& file) {
  const nlohmann::json doc = bench_json(args, file);
  std::set<std::string> names;
  for (const auto& b : doc.at("benchmarks")) names.insert(b.at("name").get<std::string>());
  return names;
}

}  // namespace

TEST_CASE("attncheck bench writes Google Benchmark JSON with names, counters, BigO and context", "[cli]") {
  const nlohmann::json doc =
      bench_json("--impl naive-eigen --impl naive-openblas --n 64,128 --d 16 --min-time 0.01", "tiny.json");

  const auto& context = doc.at("context");
  const double peak_gflops = std::stod(context.at("peak_fma_gflops").get<std::string>());
  CHECK(peak_gflops > 0.0);
  for (const char* key : {"simd_target", "compiler", "cxx_flags", "cpu_model", "attncheck_version"}) {
    INFO(key);
    CHECK_FALSE(context.at(key).get<std::string>().empty());
  }

  std::set<std::string> iterations, big_o;
  for (const auto& b : doc.at("benchmarks")) {
    const std::string name = b.at("name").get<std::string>();
    INFO(name);
    if (b.at("run_type") == "iteration") {
      iterations.insert(name);
      CHECK(b.at("flops").get<double>() > 0.0);
      CHECK(b.at("gflops").get<double>() > 0.0);
      CHECK(b.at("peak_fraction").get<double>() > 0.0);
      CHECK(b.at("gflops").get<double>() == Approx(b.at("flops").get<double>() * 1e-9));
      // The rate times the time of one call (ms) gives back 4·n²·d useful flops.
      REQUIRE(b.at("time_unit") == "ms");
      const double n = std::stod(name.substr(name.find("/n:") + 3));
      CHECK(b.at("flops").get<double>() * b.at("real_time").get<double>() * 1e-3 ==
            Approx(4.0 * n * n * 16).epsilon(1e-6));
      // One thread: the fraction of one core's peak (rounded to 0.01 GFLOP/s in the context).
      CHECK(b.at("peak_fraction").get<double>() ==
            Approx(b.at("flops").get<double>() / (peak_gflops * 1e9)).epsilon(1e-3));
    } else if (b.value("aggregate_name", "") == "BigO") {
      big_o.insert(name);
      CHECK(b.at("big_o") == "N^2");
    }
  }
  for (const char* impl : {"naive-eigen", "naive-openblas"}) {
    for (int n : {64, 128}) {
      const std::string name = std::string(impl) + "/n:" + std::to_string(n) + "/d:16/mask:none/threads:1";
      INFO(name);
      CHECK(iterations.count(name) == 1);
    }
    const std::string fit = std::string(impl) + "/d:16/mask:none/threads:1_BigO";
    INFO(fit);
    CHECK(big_o.count(fit) == 1);
  }
  CHECK(iterations.size() == 4);
  fs::remove_all(scratch_dir());
}

TEST_CASE("attncheck bench runs cross shapes --n-q × --n-k with bytes, GB/s and the read bandwidth", "[cli]") {
  const nlohmann::json doc = bench_json("--impl fused --n-q 1,3 --n-k 64,200 --n 32 --d 16 --heads 2 --batch 2 "
                                        "--repetitions 1 --min-time 0.01",
                                        "cross.json");
  const auto& context = doc.at("context");
  const double bw1 = std::stod(context.at("read_bandwidth_gbps_1_thread").get<std::string>());
  CHECK(bw1 > 0.0);
  CHECK(std::stod(context.at("read_bandwidth_gbps_all_threads").get<std::string>()) > 0.0);
  CHECK(std::stoll(context.at("read_bandwidth_buffer_bytes").get<std::string>()) >= (int64_t{64} << 20));
  CHECK(context.at("heads") == "2");
  CHECK(context.at("batch") == "2");
  // The probes ran before and after the benchmarks; the roof is the higher of each.
  const auto figure = [&](const std::string& key) { return std::stod(context.at(key).get<std::string>()); };
  for (const std::string key : {"peak_fma_gflops", "peak_fma_gflops_all_threads", "read_bandwidth_gbps_1_thread",
                                 "read_bandwidth_gbps_all_threads"}) {
    INFO(key);
    CHECK(figure(key) == std::max(figure(key + "_before"), figure(key + "_after")));
  }
  const double peak = figure("peak_fma_gflops");
  std::set<std::string> iterations, big_o;
  for (const auto& b : doc.at("benchmarks")) {
    const std::string name = b.at("name").get<std::string>();
    INFO(name);
    if (b.at("run_type") == "iteration") {
      iterations.insert(name);
      // Bytes per call: Q and O (n_q rows of 16), K and V (n_k rows of 16), 2 batch × 2 heads, fp32.
      const bool cross = name.find("/n_q:") != std::string::npos;
      const double n_q = std::stod(name.substr(name.find(cross ? "/n_q:" : "/n:") + (cross ? 5 : 3)));
      const double n_k = cross ? std::stod(name.substr(name.find("/n_k:") + 5)) : n_q;
      const double bytes = 4.0 * 4 * 16 * (2 * n_q + 2 * n_k);
      CHECK(b.at("bytes").get<double>() * b.at("real_time").get<double>() * 1e-3 == Approx(bytes).epsilon(1e-6));
      CHECK(b.at("gbytes_per_s").get<double>() == Approx(b.at("bytes").get<double>() * 1e-9));
      CHECK(b.at("bandwidth_fraction").get<double>() ==
            Approx(b.at("bytes").get<double>() / (bw1 * 1e9)).epsilon(1e-3));
      CHECK(b.at("flops").get<double>() * b.at("real_time").get<double>() * 1e-3 ==
            Approx(4.0 * 4 * 16 * n_q * n_k).epsilon(1e-6));
      CHECK(b.at("peak_fraction").get<double>() == Approx(b.at("gflops").get<double>() / peak).epsilon(1e-3));
    } else if (b.value("aggregate_name", "") == "median") {
      CHECK(b.at("bandwidth_fraction").get<double>() == Approx(b.at("gbytes_per_s").get<double>() / bw1).epsilon(1e-3));
      CHECK(b.at("peak_fraction").get<double>() == Approx(b.at("gflops").get<double>() / peak).epsilon(1e-3));
    } else if (b.value("aggregate_name", "") == "BigO") {
      big_o.insert(name);
      CHECK(b.at("big_o") == (name.find("/n_q:") != std::string::npos ? "N" : "N^2"));
    }
  }
  for (int n_q : {1, 3})
    for (int n_k : {64, 200}) {
      const std::string name = "fused/n_q:" + std::to_string(n_q) + "/n_k:" + std::to_string(n_k) +
                               "/d:16/mask:none/threads:1";
      INFO(name);
      CHECK(iterations.count(name) == 1);
    }
  CHECK(iterations.count("fused/n:32/d:16/mask:none/threads:1") == 1);
  CHECK(iterations.size() == 5);
  CHECK(big_o.count("fused/n_q:1/d:16/mask:none/threads:1_BigO") == 1);
  fs::remove_all(scratch_dir());
}

TEST_CASE("attncheck bench rejects bad options naming the option, exit 2, nothing written", "[cli]") {
  const fs::path json_path = scratch_dir() / "never.json";
  const std::string json = " --json " + json_path.string();
  const std::pair<std::string, std::string> bad[] = {
      {"--impl nope", "--impl"},
      {"--impl naive-eigen --n 0", "--n"},
      {"--impl naive-eigen --n 64,abc", "--n"},
      {"--impl naive-eigen --n 64,,128", "--n"},
      {"--impl naive-eigen --d 1.5", "--d"},
      {"--impl naive-eigen --mask diagonal", "--mask"},
      {"--impl naive-eigen --threads 0", "--threads"},
      {"--impl naive-eigen --min-time abc", "--min-time"},
      {"--impl fused --n-q 1,4", "--n-k"},
      {"--impl fused --n-k 1024", "--n-q"},
      {"--impl fused --n-q 1,0 --n-k 1024", "--n-q"},
      {"--impl fused --n-q 1 --n-k x", "--n-k"},
      {"--impl fused --tensor-offset 17", "--tensor-offset"},
      {"--impl fused --tensor-offset 64", "--tensor-offset"},
      {"--impl fused --tensor-offset -4", "--tensor-offset"},
      {"--impl fused --tensor-offset 16B", "--tensor-offset"},
      {"--impl fused --cpu -1", "--cpu"},
      {"--impl fused --cpu one", "--cpu"},
      {"--impl fused --cpu 1023", "--cpu"},  // not a CPU this process may run on
  };
  for (const auto& [args, option] : bad) {
    INFO(args);
    const Outcome outcome = run_cli(args + json);
    INFO(outcome.err);
    CHECK(outcome.status == 2);
    CHECK(outcome.err.find(option) != std::string::npos);
    CHECK_FALSE(fs::exists(json_path));
  }
  const Outcome unwritable = run_cli("--impl naive-eigen --json /nonexistent-dir/out.json");
  INFO(unwritable.err);
  CHECK(unwritable.status == 2);
  CHECK(unwritable.err.find("--json") != std::string::npos);
  fs::remove_all(scratch_dir());
}

TEST_CASE("attncheck bench times the fused path with a decode scoring method forced, beside the automatic one", "[cli]") {
  const std::set<std::string> names = benchmark_names(
      "--impl fused --impl fused:four_keys --impl fused:rows_in_lanes --n-q 6 --n-k 300 --d 16 "
      "--repetitions 1 --min-time 0.01", "scoring.json");
  for (const std::string impl : {"fused", "fused:four_keys", "fused:rows_in_lanes"}) {
    INFO(impl);
    CHECK(names.count(impl + "/n_q:6/n_k:300/d:16/mask:none/threads:1") == 1);
  }
  const fs::path never = scratch_dir() / "never.json";
  const Outcome bad = run_cli("--impl fused:eight_keys --n-q 6 --n-k 300 --json " + never.string());
  CHECK(bad.status == 2);
  CHECK(bad.err.find("option --impl: unknown decode scoring method 'fused:eight_keys'") != std::string::npos);
  CHECK_FALSE(fs::exists(never));
}

TEST_CASE("attncheck bench measures a plugin, keeping the slashes of its path in the names", "[cli]") {
  const std::string plugin = std::string(ATTNCHECK_EXAMPLE_PLUGIN);
  const std::set<std::string> names =
      benchmark_names("--impl plugin:" + plugin + " --n 16,32 --d 8 --repetitions 1 --min-time 0.01", "plugin.json");
  CHECK(names.count("plugin:" + plugin + "/n:16/d:8/mask:none/threads:1") == 1);
  CHECK(names.count("plugin:" + plugin + "/n:32/d:8/mask:none/threads:1") == 1);
  CHECK(names.count("plugin:" + plugin + "/d:8/mask:none/threads:1_BigO") == 1);
}

TEST_CASE("attncheck bench times the read floor beside fused: bytes and GB/s, no flops", "[cli]") {
  const nlohmann::json doc = bench_json("--impl fused --impl read-floor --n-q 1 --n-k 2048 --d 32 --heads 2 "
                                        "--threads 1,2 --repetitions 1 --min-time 0.01",
                                        "floor.json");
  const std::map<std::string, nlohmann::json> runs = iteration_runs(doc);
  for (const std::string threads : {"1", "2"}) {
    const auto fused = runs.find("fused/n_q:1/n_k:2048/d:32/mask:none/threads:" + threads);
    const auto floor = runs.find("read-floor/n_q:1/n_k:2048/d:32/mask:none/threads:" + threads);
    REQUIRE(fused != runs.end());
    REQUIRE(floor != runs.end());
    // The same bytes counted for both; the floor computes no attention, so it has no flops.
    CHECK(floor->second.at("bytes").get<double>() / floor->second.at("real_time").get<double>() ==
          Approx(floor->second.at("gbytes_per_s").get<double>() * 1e9 /
                 floor->second.at("real_time").get<double>()));
    CHECK(floor->second.at("gbytes_per_s").get<double>() > 0.0);
    CHECK(fused->second.contains("gflops"));
    CHECK_FALSE(floor->second.contains("gflops"));
    CHECK_FALSE(floor->second.contains("peak_fraction"));
  }
}

TEST_CASE("attncheck bench times the FMA floor beside fused: the same flops, at most the FMA peak", "[cli]") {
  const nlohmann::json doc = bench_json("--impl fused --impl fma-floor --n 256 --d 32 --n-q 4 --n-k 4096 "
                                        "--heads 2 --threads 1,2 --repetitions 1 --min-time 0.01",
                                        "fma_floor.json");
  const std::map<std::string, nlohmann::json> runs = iteration_runs(doc);
  size_t checked = 0;
  for (const std::string shape : {"n:256", "n_q:4/n_k:4096"}) {
    for (const std::string threads : {"1", "2"}) {
      const auto fused = runs.find("fused/" + shape + "/d:32/mask:none/threads:" + threads);
      const auto floor = runs.find("fma-floor/" + shape + "/d:32/mask:none/threads:" + threads);
      REQUIRE(fused != runs.end());
      REQUIRE(floor != runs.end());
      INFO(floor->first);
      // "flops" is a rate: times the time per call, the flops of one call, the same for both.
      const auto per_call = [](const nlohmann::json& b) {
        return b.at("flops").get<double>() * b.at("real_time").get<double>();
      };
      CHECK(per_call(floor->second) == Approx(per_call(fused->second)));
      // A floor that skipped its FMAs would run faster than the machine can.
      CHECK(floor->second.at("peak_fraction").get<double>() > 0.0);
      CHECK(floor->second.at("peak_fraction").get<double>() < 1.5);
      // It reads nothing: no bytes.
      CHECK(fused->second.contains("gbytes_per_s"));
      CHECK_FALSE(floor->second.contains("gbytes_per_s"));
      ++checked;
    }
  }
  CHECK(checked == 4);
}

TEST_CASE("attncheck bench ends with each shape's time over the floors timed beside it", "[cli]") {
  const Outcome with = run_cli("--impl fused --impl fma-floor --impl read-floor --n 64 --n-q 2 --n-k 512 --d 16 "
                               "--repetitions 2 --min-time 0.01");
  INFO(with.err);
  REQUIRE(with.status == 0);
  CHECK_THAT(with.out, Catch::Contains("against the floors timed in this run"));
  CHECK_THAT(with.out, Catch::Contains("  fused/n:64/d:16/mask:none/threads:1: × read floor "));
  CHECK_THAT(with.out, Catch::Contains("  fused/n_q:2/n_k:512/d:16/mask:none/threads:1: × read floor "));
  CHECK_THAT(with.out, Catch::Contains(" × FMA floor "));
  CHECK_THAT(with.out, Catch::Contains(" × slower floor "));
  const Outcome without = run_cli("--impl fused --n 64 --d 16 --repetitions 1 --min-time 0.01");
  REQUIRE(without.status == 0);
  CHECK_THAT(without.out, !Catch::Contains("against the floors"));
}

TEST_CASE("attncheck bench --paired-floors times both floors call by call beside each implementation", "[cli]") {
  const nlohmann::json doc = bench_json("--impl fused --impl fma-floor --n 128 --n-q 2 --n-k 2048 --d 32 "
                                        "--threads 1,2 --repetitions 1 --min-time 0.02 --paired-floors",
                                        "paired.json");
  const std::map<std::string, nlohmann::json> runs = iteration_runs(doc);
  size_t checked = 0;
  for (const std::string shape : {"n:128", "n_q:2/n_k:2048"}) {
    for (const std::string threads : {"1", "2"}) {
      const auto fused = runs.find("fused/" + shape + "/d:32/mask:none/threads:" + threads);
      REQUIRE(fused != runs.end());
      const nlohmann::json& b = fused->second;
      INFO(b.dump());
      REQUIRE(b.at("time_unit") == "ms");
      const double own = b.at("real_time").get<double>() * 1e-3;
      const double read = b.at("read_floor_seconds").get<double>(), fma = b.at("fma_floor_seconds").get<double>();
      CHECK(read > 0);
      CHECK(fma > 0);
      // The benchmark's time is fused's calls alone: the floors between them are not in it.
      CHECK(b.at("over_read_floor").get<double>() == Approx(own / read).epsilon(1e-6));
      CHECK(b.at("over_fma_floor").get<double>() == Approx(own / fma).epsilon(1e-6));
      CHECK(b.at("over_roofline").get<double>() == Approx(own / std::max(read, fma)).epsilon(1e-6));
      ++checked;
    }
  }
  CHECK(checked == 4);
  // A floor given as an implementation is timed alone, with no paired counters.
  const auto floor = runs.find("fma-floor/n:128/d:32/mask:none/threads:1");
  REQUIRE(floor != runs.end());
  CHECK_FALSE(floor->second.contains("over_roofline"));

  const Outcome with = run_cli("--impl fused --n 64 --d 16 --repetitions 2 --min-time 0.01 --paired-floors");
  INFO(with.err);
  REQUIRE(with.status == 0);
  CHECK_THAT(with.out, Catch::Contains("against the floors timed call by call beside each implementation"));
  CHECK_THAT(with.out, Catch::Contains("  fused/n:64/d:16/mask:none/threads:1: × read floor "));
  const Outcome without = run_cli("--impl fused --n 64 --d 16 --repetitions 1 --min-time 0.01");
  REQUIRE(without.status == 0);
  CHECK_THAT(without.out, !Catch::Contains("call by call"));
}

TEST_CASE("attncheck bench ends with each shape's thread scaling beside the floors' own", "[cli]") {
  const Outcome with = run_cli("--impl fused --impl fma-floor --n 64 --d 16 --threads 1,2 --repetitions 1 "
                               "--min-time 0.01");
  INFO(with.err);
  REQUIRE(with.status == 0);
  CHECK_THAT(with.out, Catch::Contains("thread scaling (time on 1 thread over time on more"));
  CHECK_THAT(with.out, Catch::Contains("  fused/n:64/d:16/mask:none/threads:2: "));
  CHECK_THAT(with.out, Catch::Contains("x the 1-thread speed, fma-floor "));
  CHECK_THAT(with.out, Catch::Contains("; over the roofline's "));
  // The floors themselves are the comparison, not lines.
  CHECK_THAT(with.out, !Catch::Contains("  fma-floor/n:64/d:16/mask:none/threads:2: "));
  const Outcome one = run_cli("--impl fused --n 64 --d 16 --repetitions 1 --min-time 0.01");
  REQUIRE(one.status == 0);
  CHECK_THAT(one.out, !Catch::Contains("thread scaling"));
}

TEST_CASE("attncheck bench judges runs on several threads against the FMA peak probed on as many threads", "[cli]") {
  // 3 threads: more than the CPUs of a 2-CPU machine, whose roof is then the CPUs' together.
  const nlohmann::json doc =
      bench_json("--impl fused --n 128 --d 16 --threads 1,2,3 --repetitions 2 --min-time 0.01", "threads.json");
  const auto& context = doc.at("context");
  const auto figure = [&](const std::string& key) { return std::stod(context.at(key).get<std::string>()); };
  const double one = figure("peak_fma_gflops"), all = figure("peak_fma_gflops_all_threads");
  const auto cpus = static_cast<double>(std::max(1u, std::thread::hardware_concurrency()));
  CHECK(figure("peak_fma_threads") == cpus);
  CHECK(all > 0.0);
  if (cpus == 1) CHECK(all == one);
  size_t checked = 0;
  for (const auto& b : doc.at("benchmarks")) {
    const std::string aggregate = b.value("aggregate_name", "");
    if (b.value("run_type", "") == "aggregate" && aggregate != "median") continue;
    const std::string name = b.at("name").get<std::string>();
    INFO(name);
    const double threads = std::stod(name.substr(name.find("/threads:") + 9));
    // One core's peak for 1 thread; the probe of the CPUs together for as many
    // threads or more; its share for fewer.
    const double peak = threads == 1 ? one : threads >= cpus ? all : all * threads / cpus;
    CHECK(b.at("peak_fraction").get<double>() == Approx(b.at("gflops").get<double>() / peak).epsilon(1e-3));
    ++checked;
  }
  CHECK(checked == 3 * 3);  // 2 iterations and a median for each thread count
}

TEST_CASE("attncheck bench runs every 1-thread benchmark on the CPU of the 1-thread probes", "[cli][cpu]") {
  const std::vector<int> cpus = attncheck::allowed_cpus();
  REQUIRE_FALSE(cpus.empty());
  // The last CPU, so that a run left free to move is not where it should be by default.
  const int cpu = cpus.back();
  const nlohmann::json doc = bench_json("--impl fused --impl plugin:" + std::string(ATTNCHECK_EXAMPLE_PLUGIN) +
                                            " --n-q 1,20 --n-k 256 --d 16 --threads 1,2 --repetitions 1 "
                                            "--min-time 0.01 --cpu " + std::to_string(cpu),
                                        "cpu.json");
  const auto& context = doc.at("context");
  CHECK(context.at("one_thread_cpu") == std::to_string(cpu));
  if (cpus.size() > 1) {  // the 1-thread read probe on each CPU: "0:31.20,1:35.10"
    const std::string by_cpu = context.at("read_bandwidth_gbps_1_thread_by_cpu").get<std::string>();
    for (int c : cpus) CHECK(by_cpu.find(std::to_string(c) + ":") != std::string::npos);
  }
  int one_thread = 0, more = 0;
  for (const auto& b : doc.at("benchmarks")) {
    if (b.value("run_type", "") != "iteration") continue;
    const std::string name = b.at("name").get<std::string>();
    INFO(name);
    if (name.find("/threads:1") != std::string::npos) {
      CHECK(b.value("label", "") == "CPU " + std::to_string(cpu));
      ++one_thread;
    } else if (cpus.size() > 1) {  // several threads: the calling thread stays free to move
      CHECK_FALSE(b.contains("label"));
      ++more;
    }
  }
  CHECK(one_thread == 4);
  CHECK(more == (cpus.size() > 1 ? 4 : 0));
  fs::remove_all(scratch_dir());
}

TEST_CASE("attncheck bench without --cpu places the 1-thread runs on the CPU that read fastest", "[cli][cpu]") {
  const std::vector<int> cpus = attncheck::allowed_cpus();
  if (cpus.size() < 2) return;  // one CPU: nothing to choose (the test above covers placement)
  const nlohmann::json doc = bench_json("--impl fused --n 16 --d 8 --repetitions 1 --min-time 0.01", "fastest.json");
  const auto& context = doc.at("context");
  // "0:31.20,1:35.10": the CPU with the highest figure is the one chosen (the
  // figures are rounded to 0.01: a CPU within that of the highest may be it).
  std::stringstream by_cpu(context.at("read_bandwidth_gbps_1_thread_by_cpu").get<std::string>());
  std::string item;
  std::map<int, double> gbps;
  while (std::getline(by_cpu, item, ',')) {
    const size_t colon = item.find(':');
    REQUIRE(colon != std::string::npos);
    gbps[std::stoi(item.substr(0, colon))] = std::stod(item.substr(colon + 1));
  }
  CHECK(gbps.size() == cpus.size());
  double best = 0.0;
  for (const auto& [cpu, figure] : gbps) best = std::max(best, figure);
  const int chosen = std::stoi(context.at("one_thread_cpu").get<std::string>());
  REQUIRE(gbps.count(chosen) == 1);
  CHECK(gbps.at(chosen) >= best - 0.011);
  for (const auto& b : doc.at("benchmarks"))
    if (b.value("run_type", "") == "iteration") CHECK(b.value("label", "") == "CPU " + std::to_string(chosen));
  fs::remove_all(scratch_dir());
}
