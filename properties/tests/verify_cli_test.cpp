// attncheck verify as a command: bad options exit 2 naming the option and
// write nothing; a passing run writes JSON and JUnit and exits 0; --replay
// re-runs a recorded failure; a failing run exits 1.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

struct Result {
  int code;
  std::string output;
};

// Each test case owns a directory: ctest runs the cases of this file at once.
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Result run(const std::string& args, const fs::path& dir) {
  const fs::path log = dir / "verify.log";
  const std::string command = std::string(ATTNCHECK_CLI) + " verify " + args + " > " + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str()};
}

}  // namespace

TEST_CASE("verify rejects bad options naming them, and writes nothing", "[cli]") {
  const fs::path dir = fresh_dir("attncheck-verify-cli");
  const std::string json = (dir / "v.json").string();
  const std::pair<std::string, std::string> bad[] = {
      {"--cases 0", "--cases"},
      {"--max-n 0", "--max-n"},
      {"--threads -1", "--threads"},
      {"--impl no-such-impl", "--impl"},
      {"--property no_such_property", "--property"},
      {"--replay " + (dir / "missing.json").string(), "missing.json"},
  };
  for (const auto& [args, named] : bad) {
    const Result r = run(args + " --json " + json, dir);
    INFO(args << "\n" << r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find(named) != std::string::npos);
    CHECK_FALSE(fs::exists(json));
  }
  fs::remove_all(dir);
}

TEST_CASE("verify writes JSON and JUnit, and a failure replays", "[cli]") {
  const fs::path dir = fresh_dir("attncheck-verify-cli2");
  const std::string json = (dir / "v.json").string(), junit = (dir / "v.xml").string();
  const std::string failures = (dir / "failures").string();
  Result ok = run("--impl naive-fp32 --seed 3 --cases 5 --property row_sum --property shape --json " + json +
                  " --junit " + junit + " --failures-dir " + failures, dir);
  INFO(ok.output);
  CHECK(ok.code == 0);
  CHECK(ok.output.find("2 passed, 0 failed") != std::string::npos);
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  CHECK(j["properties"].size() == 2);
  CHECK(fs::exists(junit));

  Result bad = run("--impl mutant:v_rows_misaligned --seed 3 --property differential_reference --failures-dir " +
                   failures, dir);
  INFO(bad.output);
  CHECK(bad.code == 1);
  CHECK(bad.output.find("0 passed, 1 failed") != std::string::npos);
  REQUIRE(fs::exists(failures));
  std::string file;  // the case file (its case page, .html, lies beside it)
  for (const auto& e : fs::directory_iterator(failures))
    if (e.path().extension() == ".json") file = e.path().string();
  Result replay = run("--impl mutant:v_rows_misaligned --replay " + file, dir);
  INFO(replay.output);
  CHECK(replay.code == 1);
  CHECK(replay.output.find("differential_reference") != std::string::npos);
  CHECK(replay.output.find("FAILED") != std::string::npos);
  CHECK(run("--impl fused --replay " + file, dir).code == 0);
  fs::remove_all(dir);
}

TEST_CASE("verify --mutants prints the kill matrix and exits 1 when a mutant escapes", "[cli]") {
  const fs::path dir = fresh_dir("attncheck-verify-cli3");
  const std::string json = (dir / "m.json").string();
  // shape alone kills no_max_subtraction (it names shape) and cannot kill, say, missing_scale.
  Result r = run("--mutants --property shape --seed 1 --cases 10 --matrix-cases 5 --failures-dir " +
                 (dir / "failures").string() + " --json " + json, dir);
  INFO(r.output);
  CHECK(r.code == 1);
  // The matrix row of a mutant: its name, then the cells and the verdict.
  auto row = [&](const std::string& mutant) {
    const size_t at = r.output.find("\n" + mutant + " ");
    return at == std::string::npos ? std::string() : r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
  };
  INFO(row("mutant:no_max_subtraction"));
  CHECK_THAT(row("mutant:no_max_subtraction"), Catch::Matches("mutant:no_max_subtraction +\\[K\\]  KILLED_AS_EXPECTED"));
  CHECK_THAT(row("mutant:missing_scale"), Catch::Matches("mutant:missing_scale +\\. +ESCAPED"));
  CHECK(r.output.find("columns: 1 shape") != std::string::npos);
  CHECK(r.output.find("mutant:missing_scale: ESCAPED: no property failed with a counterexample") != std::string::npos);
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  CHECK(j["json_schema_version"] == 2);
  bool escaped = false;
  for (const auto& m : j["mutants"]) escaped = escaped || m["verdict"] == "ESCAPED";
  CHECK(escaped);
  CHECK(run("--mutants --matrix-cases 0", dir).code == 2);
  fs::remove_all(dir);
}
