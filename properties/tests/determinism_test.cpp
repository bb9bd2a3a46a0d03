// Determinism: the same seed gives the same generated cases, the same verdicts
// and the same verify JSON (apart from timings and the date) across runs and
// across --threads; the fused path is bitwise identical across thread counts
// and repeated calls (benchdnn's bitwise mode).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <rapidcheck.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "attncheck/attention.h"
#include "attncheck/generators.h"

using namespace attncheck;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::vector<Case> sample(uint64_t seed, int count) {
  CaseRequest request;
  request.caps.cross = request.caps.dv_ne_dk = request.caps.batch_heads = true;
  request.caps.scale = request.caps.temperature = true;
  request.caps.causal_top_left = request.caps.causal_bottom_right = true;
  request.caps.key_padding = request.caps.explicit_mask = true;
  request.caps.empty_row_reject = request.caps.empty_row_zero = true;
  request.max_n = 70;
  const rc::Gen<Case> gen = gen_case(request);
  std::vector<Case> cases;
  rc::Random random(seed);
  for (int i = 0; i < count; ++i) cases.push_back(gen(random.split(), i * 5).value());
  return cases;
}

// The parts of verify JSON that legitimately change from run to run.
void drop_timings(json& j) {
  if (j.is_object()) {
    j.erase("seconds");
    j.erase("date");
    j.erase("cores_used");  // the thread count itself
    j.erase("case_file");   // each run writes into its own directory
    j.erase("load_avg");    // the machine's load while it ran
    for (auto& [key, value] : j.items()) drop_timings(value);
  } else if (j.is_array()) {
    for (json& e : j) drop_timings(e);
  }
}

const fs::path& scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("attncheck-determinism-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

struct Run {
  json report;
  std::vector<std::string> case_files;  // contents, in name order
};

Run verify(const std::string& impl, int threads, const std::string& tag) {
  const fs::path dir = scratch() / tag;
  const fs::path out = dir / "verify.json";
  fs::create_directories(dir);
  const std::string command = std::string(ATTNCHECK_CLI) + " verify --seed 7 --cases 8 --impl " + impl +
                              " --threads " + std::to_string(threads) + " --json " + out.string() +
                              " --failures-dir " + (dir / "failures").string() + " > " +
                              (dir / "log.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) <= 1);  // 0 passed, 1 some property failed; never a crash or usage error
  Run run;
  std::ifstream in(out);
  run.report = json::parse(in);
  drop_timings(run.report);
  std::vector<fs::path> files;
  if (fs::exists(dir / "failures"))
    for (const auto& e : fs::directory_iterator(dir / "failures")) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::ifstream file(f);
    std::stringstream text;
    text << file.rdbuf();
    run.case_files.push_back(f.filename().string() + "\n" + text.str());
  }
  return run;
}

std::vector<float> values(int64_t count, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(count));
  uint32_t x = seed;
  for (float& e : v) {
    x = x * 1664525u + 1013904223u;
    e = static_cast<float>(static_cast<int32_t>(x >> 8) - (1 << 23)) / float(1 << 21);
  }
  return v;
}

}  // namespace

TEST_CASE("the same seed generates the same cases; another seed generates others") {
  const std::vector<Case> a = sample(42, 30), b = sample(42, 30), c = sample(43, 30);
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("verify gives the same verdicts and JSON for the same seed, across runs and --threads") {
  const Run first = verify("fused", 1, "fused-t1");
  CHECK(first.report["summary"]["passed"].get<int>() > 0);
  for (const auto& [threads, tag] : {std::pair{1, "fused-t1-again"}, {2, "fused-t2"}, {0, "fused-t0"}}) {
    INFO("--threads " << threads);
    const Run again = verify("fused", threads, tag);
    CHECK(again.report == first.report);
  }
}

TEST_CASE("a failing implementation gives the same shrunk counterexamples and case files every time") {
  const Run first = verify("mutant:column_softmax", 1, "mutant-t1");
  REQUIRE(first.report["summary"]["failed"].get<int>() > 0);
  REQUIRE_FALSE(first.case_files.empty());
  const Run again = verify("mutant:column_softmax", 2, "mutant-t2");
  CHECK(again.report == first.report);
  CHECK(again.case_files == first.case_files);
}

TEST_CASE("the fused path is bitwise identical across thread counts and repeated calls") {
  std::vector<Problem> problems;
  Problem p;
  p.shape = {2, 3, 130, 131, 64, 40};  // spans several 64-key panels and query blocks
  problems.push_back(p);
  p.causal = Causal::bottom_right;
  p.shape = {3, 2, 65, 200, 17, 33};
  p.key_lengths = {200, 64, 1};
  p.temperature = 0.7;
  problems.push_back(p);
  p = Problem{};
  p.shape = {2, 2, 63, 63, 8, 8};
  p.causal = Causal::top_left;
  p.empty_rows = EmptyRowPolicy::zero;
  p.key_lengths = {0, 40};
  ExplicitMask m;
  m.batch = 1;
  m.heads = 2;
  for (int64_t i = 0; i < 2 * 63 * 63; ++i) m.allowed.push_back(static_cast<uint8_t>((i * 7) % 5 != 0));
  p.mask = m;
  problems.push_back(p);

  for (const Problem& problem : problems) {
    INFO(canonical_name(problem));
    const Shape& s = problem.shape;
    const auto q = values(s.q_size(), 1), k = values(s.k_size(), 2), v = values(s.v_size(), 3);
    std::vector<float> first(static_cast<size_t>(s.out_size())), first_lse(static_cast<size_t>(s.batch * s.heads * s.n_q));
    attention(problem, q.data(), k.data(), v.data(), first.data(), {1, first_lse.data()});
    bool nonzero = false;
    for (float x : first) nonzero |= x != 0.0f;
    REQUIRE(nonzero);
    for (int threads : {1, 2, 3, 4, 7, 0}) {
      for (int repeat = 0; repeat < 3; ++repeat) {
        INFO("threads " << threads << ", repeat " << repeat);
        std::vector<float> out(first.size(), -1.0f), lse(first_lse.size(), -1.0f);
        attention(problem, q.data(), k.data(), v.data(), out.data(), {threads, lse.data()});
        CHECK(std::memcmp(out.data(), first.data(), out.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(lse.data(), first_lse.data(), lse.size() * sizeof(float)) == 0);
      }
    }
  }
}
