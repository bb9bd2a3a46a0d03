// Reading inputs: bad ones give a clear error naming the file and the field and
// write nothing; awkward good ones (plugin names with slashes) are read right.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "attncheck/problem.h"
#include "attncheck/report.h"
#include "test_support.h"

using namespace attncheck;
using namespace attncheck::report_test;
using Catch::Matchers::Contains;

namespace {

/// Runs write_report and returns the error message; fails the test if it succeeded.
std::string error_of(const ReportInputs& inputs, const std::string& out_dir) {
  try {
    write_report(inputs, out_dir);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  FAIL("write_report accepted bad input");
  return "";
}

ReportInputs good_inputs() {
  ReportInputs inputs;
  inputs.bench_files = {fixture("bench_single.json")};
  inputs.verify_files = {fixture("verify_fused.json")};
  return inputs;
}

}  // namespace

TEST_CASE("bad report inputs give a clear error naming file and field, and write nothing") {
  ScratchDir dir;
  const std::string out = dir.sub("report");
  ReportInputs inputs = good_inputs();
  std::string expected_file, expected_text;

  SECTION("a missing bench file") {
    inputs.bench_files.push_back(dir.sub("no-such-bench.json"));
    expected_file = "no-such-bench.json";
    expected_text = "cannot read the file (No such file or directory)";
  }
  SECTION("malformed verify JSON") {
    inputs.verify_files.push_back(fixture("verify_malformed.json"));
    expected_file = "verify_malformed.json";
    expected_text = "malformed JSON";
  }
  SECTION("an unsupported json_schema_version") {
    inputs.verify_files.push_back(fixture("verify_version_3.json"));
    expected_file = "verify_version_3.json";
    expected_text = "field 'json_schema_version' is 3; this attncheck reads versions 1 to 2";
  }
  SECTION("a verify file without json_schema_version") {
    inputs.verify_files.push_back(fixture("verify_no_version.json"));
    expected_file = "verify_no_version.json";
    expected_text = "missing field 'json_schema_version'";
  }
  SECTION("a verify file given as a bench file") {
    inputs.bench_files.push_back(fixture("verify_fused.json"));
    expected_file = "verify_fused.json";
    expected_text = "missing array field 'benchmarks' (not a Google Benchmark JSON file";
  }
  SECTION("a bench file given as a verify file") {
    inputs.verify_files.push_back(fixture("bench_single.json"));
    expected_file = "bench_single.json";
    expected_text = "missing field 'json_schema_version'";
  }
  SECTION("a missing gnuplot") {
    inputs.gnuplot = dir.sub("no-such-gnuplot");
    expected_file = "no-such-gnuplot";
    expected_text = "install the Debian package gnuplot-nox";
  }
  const std::string message = error_of(inputs, out);
  CHECK_THAT(message, Contains(expected_file));
  CHECK_THAT(message, Contains(expected_text));
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("a bad input leaves an existing report untouched") {
  ScratchDir dir;
  const std::string out = dir.sub("report");
  const ReportResult first = write_report(good_inputs(), out);
  const std::string before = read_text(first.html_path);
  ReportInputs bad = good_inputs();
  bad.verify_files.push_back(fixture("verify_version_3.json"));
  CHECK_THAT(error_of(bad, out), Contains("json_schema_version"));
  CHECK(read_text(first.html_path) == before);
  CHECK(read_text(first.markdown_path).find("naive-eigen") != std::string::npos);
}

TEST_CASE("a bench entry with a wrong field type is named") {
  ScratchDir dir;
  const std::string bad_bench = dir.sub("bad-bench.json");
  {
    std::ofstream out(bad_bench);
    out << R"({"context": {}, "benchmarks": [{"name": "fused/n:64/d:64/mask:none/threads:1", "run_type": "iteration",
             "real_time": "fast", "time_unit": "ns"}]})";
  }
  ReportInputs inputs;
  inputs.bench_files = {bad_bench};
  const std::string message = error_of(inputs, dir.sub("report"));
  CHECK_THAT(message, Contains("bad-bench.json"));
  CHECK_THAT(message, Contains("field 'real_time' must be a number"));
}

TEST_CASE("a repetition with a time that is not positive is named, though the median is fine") {
  ScratchDir dir;
  auto doc = nlohmann::json::parse(read_text(fixture("bench_repetitions.json")));
  int seen = 0;
  for (auto& b : doc["benchmarks"])  // the second repetition of n = 512
    if (b["run_type"] == "iteration" && b["name"] == "fused/n:512/d:128/mask:none/threads:2" && ++seen == 2)
      b["real_time"] = -0.5;
  REQUIRE(seen == 3);
  {
    std::ofstream out(dir.sub("negative.json"));
    out << doc.dump(2);
  }
  ReportInputs inputs;
  inputs.bench_files = {dir.sub("negative.json")};
  const std::string message = error_of(inputs, dir.sub("report"));
  CHECK_THAT(message, Contains("negative.json"));
  CHECK_THAT(message, Contains("benchmark 'fused/n:512/d:128/mask:none/threads:2', repetition 2: field 'real_time' "
                               "must be positive"));
  CHECK_FALSE(std::filesystem::exists(dir.sub("report")));
}

TEST_CASE("no input files at all is an error") {
  ScratchDir dir;
  CHECK_THAT(error_of(ReportInputs{}, dir.sub("report")), Contains("no input files"));
  CHECK_FALSE(std::filesystem::exists(dir.sub("report")));
}

TEST_CASE("the same implementation and problem in two bench files is an error naming both") {
  ScratchDir dir;
  ReportInputs inputs;
  inputs.bench_files = {fixture("bench_single.json"), fixture("bench_single.json")};
  const std::string message = error_of(inputs, dir.sub("report"));
  CHECK_THAT(message, Contains("benchmark 'fused/n:64/d:64/mask:none/threads:1' duplicates"));
  CHECK_THAT(message, Contains("bench_single.json"));
  CHECK_FALSE(std::filesystem::exists(dir.sub("report")));
}

TEST_CASE("an implementation name holding slashes (a plugin path) is kept whole") {
  ScratchDir dir;
  auto doc = nlohmann::json::parse(read_text(fixture("bench_repetitions.json")));
  for (auto& b : doc["benchmarks"]) {
    for (const char* key : {"name", "run_name"}) {
      std::string text = b[key].get<std::string>();
      b[key] = "plugin:/opt/attn/lib.so" + text.substr(text.find('/'));
    }
  }
  {
    std::ofstream out(dir.sub("plugin.json"));
    out << doc.dump(2);
  }
  ReportInputs inputs;
  inputs.bench_files = {dir.sub("plugin.json")};
  const ReportResult result = write_report(inputs, dir.sub("out"));
  REQUIRE(result.headline.size() == 1);
  CHECK(result.headline[0].implementation == "plugin:/opt/attn/lib.so");
  CHECK(result.headline[0].configuration == "d=128, mask=none, threads=2");
  CHECK(result.headline[0].largest_n == 512);
}

TEST_CASE("verify JSON version 1 and 2 are both read; each version's statuses and fields are checked") {
  ScratchDir dir;
  ReportInputs inputs;
  inputs.verify_files = {fixture("verify_fused.json"), fixture("verify_v2_inconclusive.json"), fixture("verify_v2_mutants.json")};
  const ReportResult result = write_report(inputs, dir.sub("out"));
  const auto report = nlohmann::json::parse(read_text(result.json_path));
  REQUIRE(report["verification"].size() == 3);
  CHECK(report["verification"][0]["verify_json_schema_version"] == 1);
  CHECK(report["verification"][1]["verify_json_schema_version"] == 2);

  auto write = [&](const std::string& name, const nlohmann::json& doc) {
    std::ofstream(dir.sub(name)) << doc.dump(2);
    ReportInputs bad;
    bad.verify_files = {dir.sub(name)};
    return error_of(bad, dir.sub("bad-out"));
  };
  // INCONCLUSIVE came with version 2: a version 1 file holding it is malformed.
  auto v1 = nlohmann::json::parse(read_text(fixture("verify_fused.json")));
  v1["properties"][0]["status"] = "INCONCLUSIVE";
  CHECK_THAT(write("v1-inconclusive.json", v1), Contains("properties[0]: field 'status': unknown value 'INCONCLUSIVE'"));
  auto v2 = nlohmann::json::parse(read_text(fixture("verify_v2_inconclusive.json")));
  v2["properties"][1]["inconclusive"] = "thirty";
  CHECK_THAT(write("v2-count.json", v2), Contains("properties[1]: field 'inconclusive' must be a number"));
  v2 = nlohmann::json::parse(read_text(fixture("verify_v2_inconclusive.json")));
  v2["properties"][0]["notes"] = {1, 2};
  CHECK_THAT(write("v2-notes.json", v2), Contains("properties[0]: field 'notes' must hold strings"));
  auto mutants = nlohmann::json::parse(read_text(fixture("verify_v2_mutants.json")));
  mutants["mutants"][1]["matrix"] = {42};
  CHECK_THAT(write("v2-matrix.json", mutants), Contains("mutants[1]: field 'matrix' must hold objects"));
  CHECK_FALSE(std::filesystem::exists(dir.sub("bad-out")));
}

TEST_CASE("power JSON is read from --power only; its version and fields are checked") {
  ScratchDir dir;
  auto as_verify = good_inputs();
  as_verify.verify_files = {fixture("power_small.json")};
  CHECK_THAT(error_of(as_verify, dir.sub("out")), Contains("power_small.json: a power JSON file"));
  CHECK_THAT(error_of(as_verify, dir.sub("out")), Contains("pass it with --power"));
  ReportInputs as_power;
  as_power.power_file = fixture("verify_fused.json");
  CHECK_THAT(error_of(as_power, dir.sub("out")), Contains("verify_fused.json: a verify JSON file"));
  auto write = [&](const std::string& name, const nlohmann::json& doc) {
    std::ofstream(dir.sub(name)) << doc.dump(2);
    ReportInputs bad = good_inputs();
    bad.power_file = dir.sub(name);
    return error_of(bad, dir.sub("out"));
  };
  const auto good = nlohmann::json::parse(read_text(fixture("power_small.json")));
  auto doc = good;
  doc["power_json_version"] = 2;
  CHECK_THAT(write("v2.json", doc), Contains("v2.json: field 'power_json_version' is 2; this attncheck reads version 1"));
  doc = good;
  doc.erase("power_json_version");
  CHECK_THAT(write("none.json", doc), Contains("missing field 'power_json_version' (not a power JSON file"));
  doc = good;
  doc.erase("rows");
  CHECK_THAT(write("rows.json", doc), Contains("missing field 'rows'"));
  doc = good;
  doc["rows"][2]["tightness"]["fused"]["verdict"] = "OK";
  CHECK_THAT(write("verdict.json", doc), Contains("rows[2]: tightness.fused: field 'verdict': unknown value 'OK'"));
  doc = good;
  doc["rows"][3]["tightness"]["naive-fp32"]["error_over_bound"] = "small";
  CHECK_THAT(write("ratio.json", doc),
             Contains("rows[3]: tightness.naive-fp32: field 'error_over_bound' must be a number, null or \"inf\""));
  doc = good;
  doc["rows"][1] = doc["rows"][0];
  CHECK_THAT(write("twice.json", doc), Contains("rows[1]: n=16 input=uniform mask=none appears twice"));
  doc = good;
  doc["rows"][0].erase("mask");
  CHECK_THAT(write("mask.json", doc), Contains("rows[0]: missing field 'mask'"));
  CHECK_FALSE(std::filesystem::exists(dir.sub("out")));
}
