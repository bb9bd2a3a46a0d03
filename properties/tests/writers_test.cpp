// verify JSON (the schema reports read) and JUnit XML.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "attncheck/verify.h"

using namespace attncheck;

namespace {

VerifyReport sample_report() {
  VerifyReport r;
  r.implementation = "fused";
  r.options.seed = 42;
  r.options.cases = 10;
  PropertyResult passed;
  passed.name = "row_sum";
  passed.cases = 10;
  passed.worst_ratio = 0.01;
  passed.oracles = {"mp50"};
  PropertyResult failed;
  failed.name = "differential_reference";
  failed.status = Status::failed;
  failed.cases = 3;
  failed.message = "O[0][0][0][0] <bad> & \"worse\"";
  failed.case_file = "attncheck-failures/x.json";
  Case c;
  c.q = c.k = c.v = {1.0f};
  failed.counterexample = c;
  failed.tables = {{"slice", {0, 0}}};
  PropertyResult skipped;
  skipped.name = "thread_determinism";
  skipped.status = Status::skipped;
  skipped.skipped_reason = "implementation does not use threads";
  PropertyResult crashed;
  crashed.name = "shape";
  crashed.status = Status::crashed;
  crashed.message = "the implementation crashed: signal 11";
  r.properties = {passed, failed, skipped, crashed};
  return r;
}

}  // namespace

TEST_CASE("verify JSON follows schema version 1", "[writers]") {
  const auto j = nlohmann::json::parse(verify_json(sample_report()));
  CHECK(j["json_schema_version"] == 1);
  CHECK(j["tool"] == "attncheck verify");
  CHECK(j["implementation"]["name"] == "fused");
  CHECK(j["implementation"]["precision"] == "fp32");
  CHECK(j["implementation"]["capabilities"]["cross"] == true);
  CHECK(j["seed"] == 42);
  CHECK(j["cases_per_property"] == 10);
  for (const char* key : {"cpu_model", "cores_used", "compiler", "flags", "simd_target", "date"})
    CHECK(j["context"].contains(key));
  const auto& props = j["properties"];
  REQUIRE(props.size() == 4);
  CHECK(props[0]["status"] == "PASSED");
  CHECK(props[0]["worst_error_over_bound"] == 0.01);
  CHECK(props[0]["oracle"] == "mp50");
  CHECK_FALSE(props[0].contains("counterexample"));
  CHECK(props[1]["status"] == "FAILED");
  CHECK(props[1]["worst_error_over_bound"].is_null());
  CHECK(props[1]["counterexample"]["seed"] == 42);
  CHECK(props[1]["counterexample"]["case_file"] == "attncheck-failures/x.json");
  CHECK(props[1]["counterexample"]["case"]["shape"]["n_q"] == 1);
  CHECK(props[1]["counterexample"]["tables"]["slice"][0] == 0);
  CHECK(props[2]["status"] == "SKIPPED");
  CHECK(props[2]["skipped_reason"] == "implementation does not use threads");
  CHECK(props[3]["status"] == "CRASHED");
  CHECK(j["summary"] == nlohmann::json{{"passed", 1}, {"failed", 1}, {"skipped", 1}, {"crashed", 1}, {"timed_out", 0}});
  CHECK_FALSE(j.contains("mutants"));
}

TEST_CASE("JUnit XML has one escaped testcase per property", "[writers]") {
  const std::string x = verify_junit(sample_report());
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = x.find(what); at != std::string::npos; at = x.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count("<testcase ") == 4);
  CHECK(count("<failure ") == 1);
  CHECK(count("<error ") == 1);
  CHECK(count("<skipped ") == 1);
  CHECK(x.find("&lt;bad&gt; &amp; &quot;worse&quot;") != std::string::npos);
  CHECK(x.find("<bad>") == std::string::npos);
  CHECK(x.find("tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\"") != std::string::npos);
}

TEST_CASE("the summary line and the exit verdict", "[writers]") {
  VerifyReport r = sample_report();
  CHECK(summary_line(r) == "1 passed, 2 failed, 1 skipped");
  CHECK_FALSE(all_passed(r));
  r.properties = {r.properties[0], r.properties[2]};
  CHECK(summary_line(r) == "1 passed, 0 failed, 1 skipped");
  CHECK(all_passed(r));
  r.mutants.push_back({"mutant:x", false, "", "", "", ""});
  CHECK_FALSE(all_passed(r));
}
