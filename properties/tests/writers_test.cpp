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

/// A passed property with inconclusive cases, declined cases and notes, and an INCONCLUSIVE one.
void add_inconclusive(VerifyReport& r) {
  PropertyResult flagged;
  flagged.name = "differential_reference";
  flagged.cases = 10;
  flagged.inconclusive = 5;
  flagged.inconclusive_reason = "row [0][0][1]: logit error <not small>";
  flagged.unsupported = 2;
  flagged.unsupported_reason = "declined a case out of range for fp32";
  flagged.notes = {"flushes weights below 2^-120 to zero", "second note"};
  PropertyResult inconclusive;
  inconclusive.name = "temperature_zero_limit";
  inconclusive.status = Status::inconclusive;
  inconclusive.inconclusive = 11;
  inconclusive.inconclusive_reason = "beyond the model";
  inconclusive.message = "only 0 of 10 cases could be judged: 11 were inconclusive (beyond the model)";
  r.properties.push_back(flagged);
  r.properties.push_back(inconclusive);
}

}  // namespace

TEST_CASE("verify JSON follows schema version 2", "[writers]") {
  const auto j = nlohmann::json::parse(verify_json(sample_report()));
  CHECK(j["json_schema_version"] == 2);
  CHECK(j["tool"] == "attncheck verify");
  CHECK(j["implementation"]["name"] == "fused");
  CHECK(j["implementation"]["precision"] == "fp32");
  CHECK(j["implementation"]["capabilities"]["cross"] == true);
  CHECK(j["seed"] == 42);
  CHECK(j["cases_per_property"] == 10);
  for (const char* key : {"cpu_model", "cores_used", "logical_cpus", "load_avg", "compiler", "flags", "simd_target", "date"})
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
  CHECK(j["summary"] == nlohmann::json{{"passed", 1}, {"failed", 1}, {"skipped", 1}, {"crashed", 1}, {"timed_out", 0},
                                       {"inconclusive", 0}});
  CHECK(props[0]["inconclusive"] == 0);
  CHECK(props[0]["unsupported"] == 0);
  CHECK(props[0]["notes"] == nlohmann::json::array());
  CHECK_FALSE(j.contains("mutants"));
}

TEST_CASE("verify JSON carries inconclusive and declined counts, the flag, notes and the INCONCLUSIVE status", "[writers]") {
  VerifyReport r = sample_report();
  add_inconclusive(r);
  const auto j = nlohmann::json::parse(verify_json(r));
  const auto& flagged = j["properties"][4];
  CHECK(flagged["status"] == "PASSED");
  CHECK(flagged["inconclusive"] == 5);
  CHECK(flagged["inconclusive_flagged"] == true);
  CHECK(flagged["inconclusive_reason"] == "row [0][0][1]: logit error <not small>");
  CHECK(flagged["unsupported"] == 2);
  CHECK(flagged["unsupported_reason"] == "declined a case out of range for fp32");
  CHECK(flagged["notes"] == nlohmann::json{"flushes weights below 2^-120 to zero", "second note"});
  const auto& inconclusive = j["properties"][5];
  CHECK(inconclusive["status"] == "INCONCLUSIVE");
  CHECK(inconclusive["inconclusive"] == 11);
  CHECK_FALSE(inconclusive.contains("counterexample"));
  CHECK_THAT(inconclusive["message"].get<std::string>(), Catch::Contains("could be judged"));
  CHECK(j["summary"]["inconclusive"] == 1);
  CHECK(j["summary"]["passed"] == 2);
  // Under the 20 % line: no flag.
  r.properties[4].inconclusive = 2;
  CHECK(nlohmann::json::parse(verify_json(r))["properties"][4]["inconclusive_flagged"] == false);
}

TEST_CASE("verify JSON writes each mutant's kill matrix row, expected killers and verdict", "[writers]") {
  VerifyReport r;
  r.implementation = "mutants";
  MutantResult m;
  m.name = "mutant:x";
  m.killed = true;
  m.killed_by = "row_sum";
  m.case_name = "b1h1q1k2d1";
  m.expected_killers = {"shape"};
  m.matrix = {{"shape", Status::passed, false, true}, {"row_sum", Status::failed, true, false},
              {"mask_zero", Status::failed, false, false}};
  m.verdict = mutant_verdict(m.matrix);
  r.mutants = {m};
  const auto j = nlohmann::json::parse(verify_json(r));
  REQUIRE(j["mutants"].size() == 1);
  const auto& e = j["mutants"][0];
  CHECK(e["killed_by"] == "row_sum");
  CHECK(e["expected_killers"] == nlohmann::json{"shape"});
  CHECK(e["verdict"] == "KILLED_UNEXPECTEDLY");
  REQUIRE(e["matrix"].size() == 3);
  CHECK(e["matrix"][0] == nlohmann::json{{"property", "shape"}, {"status", "PASSED"}, {"kill", false}, {"expected", true}});
  CHECK(e["matrix"][1]["kill"] == true);
  CHECK(e["matrix"][2]["status"] == "FAILED");
  CHECK(e["matrix"][2]["kill"] == false);
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
  CHECK(count("<system-out>") == 0);
}

TEST_CASE("JUnit reports inconclusive cases and INCONCLUSIVE as skipped, notes as system-out", "[writers]") {
  VerifyReport r = sample_report();
  add_inconclusive(r);
  const std::string x = verify_junit(r);
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = x.find(what); at != std::string::npos; at = x.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count("<testcase ") == 6);
  CHECK(count("<skipped ") == 3);
  CHECK(x.find("tests=\"6\" failures=\"1\" errors=\"1\" skipped=\"3\"") != std::string::npos);
  CHECK(x.find("<skipped message=\"passed 10 cases; 5 of 15 checked cases (33 %) inconclusive, more than 20 %: row "
               "[0][0][1]: logit error &lt;not small&gt;\"/>") != std::string::npos);
  CHECK(x.find("<skipped message=\"INCONCLUSIVE: only 0 of 10 cases could be judged") != std::string::npos);
  CHECK(x.find("<system-out>inconclusive: 5 of 15 checked cases") != std::string::npos);
  CHECK(x.find("note: flushes weights below 2^-120 to zero\nnote: second note</system-out>") != std::string::npos);
  CHECK(x.find("declined as out of range (accepted): 2 cases: declined a case out of range for fp32") != std::string::npos);
}

TEST_CASE("the summary line and the exit verdict", "[writers]") {
  VerifyReport r = sample_report();
  CHECK(summary_line(r) == "1 passed, 2 failed, 1 skipped");
  CHECK_FALSE(all_passed(r));
  r.properties = {r.properties[0], r.properties[2]};
  CHECK(summary_line(r) == "1 passed, 0 failed, 1 skipped");
  CHECK(all_passed(r));
  r.mutants.push_back({"mutant:x", false, "", "", "", "", {}, {}});
  CHECK_FALSE(all_passed(r));
  // Only a mutant killed by an expected property counts.
  r.mutants.back().killed = true;
  r.mutants.back().verdict = MutantVerdict::killed_unexpectedly;
  CHECK_FALSE(all_passed(r));
  r.mutants.back().verdict = MutantVerdict::killed_as_expected;
  CHECK(all_passed(r));
  // An INCONCLUSIVE property is not a pass.
  PropertyResult inconclusive;
  inconclusive.status = Status::inconclusive;
  r.properties.push_back(inconclusive);
  CHECK_FALSE(all_passed(r));
  CHECK(summary_line(r) == "1 passed, 0 failed, 1 inconclusive, 1 skipped");
}
