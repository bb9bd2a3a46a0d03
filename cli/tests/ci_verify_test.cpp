// attncheck in CI: verify --shard and report's merging of shards, time
// budgets, a child that hangs on one shape, shell-quoted replay lines, and
// the report's verdict on a run that checked nothing.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Result {
  int code;
  std::string output;
  double seconds;
};

// Runs a /bin/sh command line in `dir`, capturing stdout and stderr.
Result shell(const std::string& line, const fs::path& dir) {
  const fs::path log = dir / "command.log";
  const std::string command = "cd '" + dir.string() + "' && ( " + line + " ) > '" + log.string() + "' 2>&1";
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(command.c_str());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str(), seconds};
}

Result attncheck(const std::string& args, const fs::path& dir) {
  return shell(std::string("'") + ATTNCHECK_CLI + "' " + args, dir);
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A fast failing run: a mutant that two properties kill, 6 cases in 2 chunks.
const std::string kRun = "verify --impl mutant:missing_scale --seed 7 --cases 6 --case-chunks 2";

// The properties of report.json's only verification, without their times.
json merged_properties(const fs::path& report_json) {
  json props = read_json(report_json)["verification"][0]["properties"];
  for (json& p : props) p.erase("seconds");
  return props;
}

const std::string kHangChild = std::string("exec:/usr/bin/python3 ") + ATTNCHECK_SOURCE_DIR + "/cli/tests/hang_dv3_child.py";

}  // namespace

TEST_CASE("verify --shard rejects bad shard specs naming --shard, and writes nothing", "[ci]") {
  const fs::path dir = fresh_dir("attncheck-ci-bad-shard");
  for (const std::string spec : {"0/3", "4/3", "1/0", "junk", "1/", "/3", "2/3x", "-1/3"}) {
    const Result r = attncheck("verify --impl fused --cases 2 --shard '" + spec + "' --json v.json", dir);
    INFO(spec << "\n" << r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find("--shard") != std::string::npos);
    CHECK(r.output.find("'" + spec + "'") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "v.json"));
  }
  const Result chunks = attncheck("verify --impl fused --cases 2 --case-chunks 3 --json v.json", dir);
  CHECK(chunks.code == 2);
  CHECK(chunks.output.find("--case-chunks") != std::string::npos);
  const Result mutants = attncheck("verify --mutants --shard 1/2 --json v.json", dir);
  CHECK(mutants.code == 2);
  CHECK(mutants.output.find("--shard") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "v.json"));
  fs::remove_all(dir);
}

TEST_CASE("the shards 1/3, 2/3 and 3/3 merged by report equal the unsharded run", "[ci]") {
  const fs::path dir = fresh_dir("attncheck-ci-shards");
  const Result whole = attncheck(kRun + " --json whole.json", dir);
  REQUIRE(whole.code == 1);  // the mutant is killed
  std::vector<json> units;
  for (int i = 1; i <= 3; ++i) {
    const Result r = attncheck(kRun + " --shard " + std::to_string(i) + "/3 --json s" + std::to_string(i) + ".json", dir);
    INFO(r.output);
    REQUIRE((r.code == 0 || r.code == 1));
    const json shard = read_json(dir / ("s" + std::to_string(i) + ".json"));
    CHECK(shard["shard"]["index"] == i);
    CHECK(shard["shard"]["count"] == 3);
    for (const json& p : shard["properties"]) units.push_back({p["name"], p["chunks"]});
  }
  // Every unit (property, chunk) of the run, each in exactly one shard.
  const json full = read_json(dir / "whole.json");
  CHECK(units.size() == 2 * full["properties"].size());
  std::sort(units.begin(), units.end());
  CHECK(std::adjacent_find(units.begin(), units.end()) == units.end());

  REQUIRE(attncheck("report --verify whole.json -o whole", dir).code == 0);
  const Result merged = attncheck("report --verify s1.json --verify s2.json --verify s3.json -o merged", dir);
  INFO(merged.output);
  REQUIRE(merged.code == 0);
  const json a = merged_properties(dir / "whole/report.json"), b = merged_properties(dir / "merged/report.json");
  REQUIRE(a.size() == b.size());
  int failed = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i]["name"]);
    CHECK(a[i] == b[i]);  // same cases, same verdicts, same counterexamples
    failed += a[i]["status"] == "FAILED";
  }
  CHECK(failed >= 1);
  CHECK(read_json(dir / "whole/report.json")["verification"][0]["verdict"] ==
        read_json(dir / "merged/report.json")["verification"][0]["verdict"]);
  fs::remove_all(dir);
}

TEST_CASE("report rejects shards that do not fit together, naming the file", "[ci]") {
  const fs::path dir = fresh_dir("attncheck-ci-bad-merge");
  for (int i = 1; i <= 3; ++i)
    attncheck(kRun + " --shard " + std::to_string(i) + "/3 --json s" + std::to_string(i) + ".json", dir);
  attncheck("verify --impl mutant:missing_scale --seed 8 --cases 6 --case-chunks 2 --shard 2/3 --json seed8.json", dir);
  attncheck("verify --impl naive-fp32 --seed 7 --cases 6 --case-chunks 2 --shard 2/3 --json naive.json", dir);
  attncheck(kRun + " --property shape --property row_sum --shard 2/3 --json fewer.json", dir);
  {
    json v1 = read_json(dir / "s3.json");
    v1["json_schema_version"] = 1;
    std::ofstream(dir / "v1.json") << v1.dump();
  }
  const std::pair<std::string, std::vector<std::string>> bad[] = {
      {"s1.json s2.json seed8.json", {"seed8.json", "seed 8"}},
      {"s1.json s2.json s2.json s3.json", {"s2.json", "overlapping"}},
      {"s1.json s3.json", {"s1.json", "s3.json", "missing 2/3"}},
      {"s1.json naive.json s3.json", {"missing 2/3", "naive.json is shard 2/3 of naive-fp32"}},
      {"s1.json s2.json v1.json", {"v1.json", "json_schema_version"}},
      {"s1.json fewer.json s3.json", {"fewer.json", "properties"}},
  };
  for (const auto& [files, named] : bad) {
    std::string args;
    std::istringstream words(files);
    for (std::string f; words >> f;) args += " --verify " + f;
    const Result r = attncheck("report" + args + " -o out", dir);
    INFO(files << "\n" << r.output);
    CHECK(r.code == 2);
    for (const std::string& n : named) CHECK(r.output.find(n) != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "out"));
  }
  fs::remove_all(dir);
}

TEST_CASE("report says NOT VERIFIED when every property was skipped, as verify does", "[ci]") {
  const fs::path dir = fresh_dir("attncheck-ci-skipped");
  const Result v = attncheck("verify --impl mutant:missing_scale --property thread_determinism --json v.json", dir);
  INFO(v.output);
  CHECK(v.code == 1);
  CHECK(v.output.find("nothing was checked") != std::string::npos);
  const Result r = attncheck("report --verify v.json -o out", dir);
  INFO(r.output);
  REQUIRE(r.code == 0);
  const std::string verdict = read_json(dir / "out/report.json")["verification"][0]["verdict"];
  CHECK(verdict.rfind("NOT VERIFIED", 0) == 0);
  CHECK(r.output.find("PASS") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a time budget cuts the run short, names the properties and is not a pass", "[ci]") {
  const fs::path dir = fresh_dir("attncheck-ci-budget");
  const Result r = attncheck("verify --impl naive-fp32 --seed 3 --cases 100000 --time-budget 1 --json v.json", dir);
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK(r.seconds < 30);
  CHECK(r.output.find("CUT SHORT") != std::string::npos);
  CHECK(r.output.find("not a full pass") != std::string::npos);
  const json v = read_json(dir / "v.json");
  CHECK(v["time_budget_seconds"] == 1.0);
  CHECK(v["cut_short"].get<int>() >= 1);
  int cut = 0;
  for (const json& p : v["properties"]) cut += p["cut_short"].is_string();
  CHECK(cut == v["cut_short"].get<int>());
  const Result report = attncheck("report --verify v.json -o out", dir);
  const std::string verdict = read_json(dir / "out/report.json")["verification"][0]["verdict"];
  CHECK(verdict.find("cut short") != std::string::npos);
  CHECK(verdict.rfind("NOT VERIFIED", 0) == 0);

  const Result p = attncheck("verify --impl naive-fp32 --seed 3 --cases 100000 --property shape "
                             "--property-time-budget 0.5 --json p.json", dir);
  INFO(p.output);
  CHECK(p.code == 1);
  CHECK(p.output.find("per-property time budget") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a child that hangs when d_v = 3 costs seconds, shrinks to d_v = 3, and replays from the printed line",
          "[ci][hang]") {
  const fs::path dir = fresh_dir("attncheck-ci-hang");
  // 1 s: a correct call of a restarted child gets at least 200 ms (call_timeout_ms). With 250 ms it got 51,
  // and in a sanitized CI run beside another test a restarted Python child once took longer on a d_v = 33 case.
  const Result r = attncheck("verify --impl '" + kHangChild + "' --seed 1 --cases 40 --timeout-ms 1000 "
                             "--property shape --property row_sum --property convex_hull --json v.json",
                             dir);
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK(r.seconds < 40);
  const json v = read_json(dir / "v.json");
  CHECK(v["implementation"]["declared_name"] == "hangs-on-dv3");
  CHECK(r.output.find("\"hangs-on-dv3\"") != std::string::npos);
  int shrunk = 0;
  for (const json& p : v["properties"]) {
    INFO(p.dump());
    REQUIRE(p["status"] == "TIMED_OUT");
    const json& shape = p["counterexample"]["case"]["shape"];
    CHECK(shape["d_v"] == 3);
    const int timeouts = p["timed_out_calls"];
    CHECK(timeouts >= 1);
    // Shrinking spends at most 8 timeouts; once one property shrank, the others do not.
    CHECK(timeouts <= 9);
    if (timeouts > 1) {
      ++shrunk;
      for (const char* dim : {"batch", "heads", "n_q", "n_k", "d_k"}) CHECK(shape[dim].get<int>() <= 2);
    }
  }
  CHECK(shrunk == 1);

  // The printed replay line works as it is through /bin/sh.
  const auto at = r.output.find("replay: ");
  REQUIRE(at != std::string::npos);
  const std::string line = r.output.substr(at + 8, r.output.find('\n', at) - at - 8);
  const std::string bin = fs::path(ATTNCHECK_CLI).parent_path().string();
  const Result replay = shell("PATH='" + bin + "':\"$PATH\" " + line + " --timeout-ms 250", dir);
  INFO(line << "\n" << replay.output);
  CHECK(replay.code == 1);
  CHECK(replay.output.find("replaying") != std::string::npos);
  CHECK(replay.output.find("TIMED_OUT") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("input_validation's minimal case names the bad input that was sent", "[ci]") {
  const fs::path dir = fresh_dir("attncheck-ci-sent");
  const std::string child = std::string("exec:/usr/bin/python3 ") + ATTNCHECK_SOURCE_DIR + "/cli/tests/accepting_child.py";
  const Result r = attncheck("verify --impl '" + child + "' --seed 2 --cases 30 --property input_validation --json v.json", dir);
  INFO(r.output);
  CHECK(r.code == 1);
  const json v = read_json(dir / "v.json");
  const json& p = v["properties"][0];
  REQUIRE(p["status"] == "FAILED");
  const std::string sent = p["counterexample"]["sent"];
  // e.g. "K[0] = nan on b1h1q1k1d1": the bad input and the shape it was sent with,
  // which the failure message names too.
  INFO(sent);
  const auto on = sent.find(" on b");
  REQUIRE(on != std::string::npos);
  CHECK(on > 0);
  CHECK(p["counterexample"]["message"].get<std::string>().find(sent.substr(0, on)) != std::string::npos);
  CHECK(r.output.find("minimal case: " + sent) != std::string::npos);
  CHECK(p["counterexample"]["case"]["labels"]["sent"] == sent);  // the case file says it too
  fs::remove_all(dir);
}
