// The attncheck command against hostile input: unknown options and
// subcommands, missing files, malformed or truncated case files, and sizes
// whose buffers would exceed memory. Each exits 2 with a message naming the
// option, file or size, and writes nothing.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include "attncheck/case.h"

namespace fs = std::filesystem;

namespace {

struct Result {
  int code;
  std::string output;
};

const fs::path& scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("attncheck-hostile-cli-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

Result run(const std::string& args) {
  const fs::path log = scratch() / "log.txt";
  const std::string command = std::string(ATTNCHECK_CLI) + " " + args + " > " + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str()};
}

std::string write(const std::string& name, const std::string& text) {
  const fs::path path = scratch() / name;
  std::ofstream(path) << text;
  return path.string();
}

// A valid case whose every tensor is small but whose n_q·n_k score tables are
// 10^10 elements: the file is about 1 MB, the tables would be terabytes.
std::string huge_case_file() {
  attncheck::Case c;
  c.problem.shape = {1, 1, 100000, 100000, 1, 1};
  c.q.assign(100000, 0.5f);
  c.k.assign(100000, 0.25f);
  c.v.assign(100000, 1.0f);
  const std::string path = (scratch() / "huge.json").string();
  if (!fs::exists(path)) attncheck::write_case_file(c, path);
  return path;
}

const std::string kCase = R"({"shape":{"n_q":2,"n_k":2,"d_k":1},"q":[1,2],"k":[3,4],"v":[5,6]})";

}  // namespace

TEST_CASE("unknown options and subcommands exit 2 naming them") {
  const std::pair<std::string, std::string> cases[] = {{"verify --bogus", "--bogus"},
                                                      {"explain --case seed-2 --nope 3", "--nope"},
                                                      {"bench --frob", "--frob"},
                                                      {"report --no-such-option", "--no-such-option"},
                                                      {"frobnicate", "subcommand"}};
  for (const auto& [args, named] : cases) {
    INFO(args);
    const Result r = run(args);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains(named));
  }
  CHECK(run("--help").code == 0);
}

TEST_CASE("a missing case file exits 2 naming it, for explain and for verify --replay") {
  for (const std::string cmd : {"explain --input", "verify --replay"}) {
    const Result r = run(cmd + " /nonexistent/dir/case.json");
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains("/nonexistent/dir/case.json"));
  }
}

TEST_CASE("malformed and truncated case files exit 2 naming the file, for explain and verify --replay") {
  REQUIRE(run("explain --input " + write("good.json", kCase)).code == 0);
  const std::pair<std::string, std::string> bad[] = {
      {"truncated.json", kCase.substr(0, kCase.size() / 2)},
      {"empty.json", ""},
      {"binary.json", std::string("\x00\xff\xfe garbage", 11)},
      {"array.json", "[1,2,3]"},
      {"wrong_count.json", R"({"shape":{"n_q":2,"n_k":2,"d_k":1},"q":[1],"k":[3,4],"v":[5,6]})"},
      {"nan_string.json", R"({"shape":{"n_q":2,"n_k":2,"d_k":1},"q":["x",2],"k":[3,4],"v":[5,6]})"},
      {"huge_number.json", R"({"shape":{"n_q":2,"n_k":2,"d_k":1},"q":[1e999,2],"k":[3,4],"v":[5,6]})"},
  };
  for (const auto& [name, text] : bad) {
    const std::string path = write(name, text);
    for (const std::string cmd : {"explain --input ", "verify --replay "}) {
      INFO(cmd << name);
      const Result r = run(cmd + path);
      CHECK(r.code == 2);
      CHECK_THAT(r.output, Catch::Contains(name));
    }
  }
}

TEST_CASE("sizes whose buffers would exceed the memory budget are refused up front, writing nothing") {
  const std::string huge = huge_case_file();
  const std::string json = (scratch() / "out.json").string();
  const Result e = run("explain --input " + huge);
  CHECK(e.code == 2);
  CHECK_THAT(e.output, Catch::Contains("--max-bytes") && Catch::Contains("n_q 100000"));
  const Result r = run("verify --replay " + huge + " --json " + json);
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("--max-bytes") && Catch::Contains("n_k 100000"));
  CHECK_FALSE(fs::exists(json));
  const Result b = run("bench --n 64,3000000 --json " + json);
  CHECK(b.code == 2);
  CHECK_THAT(b.output, Catch::Contains("--max-bytes") && Catch::Contains("bench --n 3000000"));
  CHECK_FALSE(fs::exists(json));
  const Result v = run("verify --max-n 1000000 --json " + json);
  CHECK(v.code == 2);
  CHECK_THAT(v.output, Catch::Contains("--max-bytes") && Catch::Contains("verify --max-n"));
  CHECK_FALSE(fs::exists(json));
}

TEST_CASE("the budget is an option: a smaller one refuses a small case, a bad one is named") {
  const std::string good = write("good.json", kCase);
  CHECK(run("explain --input " + good + " --max-bytes 1G").code == 0);
  const Result small = run("explain --input " + good + " --max-bytes 100");
  CHECK(small.code == 2);
  CHECK_THAT(small.output, Catch::Contains("--max-bytes 100"));
  for (const std::string bad : {"0", "-5", "12Q", "1.5G", "", "99999999999T"}) {
    INFO(bad);
    const Result r = run("verify --max-bytes '" + bad + "' --cases 1");
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains("--max-bytes"));
  }
}
