// Hostile case files: each bad input is an InvalidInput naming the file and
// the field, never another exception or a crash. Inputs the case-JSON fuzzer
// (core/fuzz/) found are kept here as regression tests.
#include <catch2/catch.hpp>

#include <string>

#include "attncheck/case.h"

using namespace attncheck;

namespace {

const std::string kGood =
    R"({"shape":{"n_q":1,"n_k":2,"d_k":1},"q":[1],"k":[2,3],"v":[4,5]})";

}  // namespace

TEST_CASE("a number out of double range is InvalidInput, not nlohmann's out_of_range (fuzzer find)") {
  CHECK_THROWS_AS(parse_case(R"({"shape":{"n_q":1,"n_k":2,"d_k":1},"q":[1],"k":[2,3],"v":[1e310,0]})", "f.json"),
                  InvalidInput);
  CHECK_THROWS_WITH(parse_case(R"({"shape":{"n_q":1,"n_k":2,"d_k":1},"q":[1],"k":[2,3],"v":[1e310,0]})", "f.json"),
                    Catch::Contains("f.json") && Catch::Contains("malformed JSON"));
}

TEST_CASE("a key length that is not an integer is InvalidInput, not an undefined conversion (fuzzer find)") {
  const auto with = [](const std::string& lengths) {
    return R"({"shape":{"n_q":1,"n_k":2,"d_k":1},"q":[1],"k":[2,3],"v":[4,5],"key_lengths":)" + lengths + "}";
  };
  CHECK_THROWS_WITH(parse_case(with("[7.77778e+127]"), "f.json"),
                    Catch::Contains("f.json") && Catch::Contains("key_lengths") && Catch::Contains("not an integer"));
  CHECK_THROWS_WITH(parse_case(with("[1.5]")), Catch::Contains("not an integer"));
  CHECK_THROWS_WITH(parse_case(with("2")), Catch::Contains("must be an array"));
  CHECK(parse_case(with("[1]")).problem.key_lengths == std::vector<int64_t>{1});
}

TEST_CASE("every truncation of a valid case file is InvalidInput naming the file") {
  REQUIRE_NOTHROW(parse_case(kGood, "good.json"));
  for (size_t n = 0; n < kGood.size(); ++n) {
    INFO("first " << n << " bytes");
    CHECK_THROWS_WITH(parse_case(kGood.substr(0, n), "cut.json"), Catch::Contains("cut.json"));
  }
}

TEST_CASE("fields of the wrong type are InvalidInput naming the field") {
  const auto with = [](const std::string& extra) {
    return R"({"shape":{"n_q":1,"n_k":2,"d_k":1},"q":[1],"k":[2,3],"v":[4,5],)" + extra + "}";
  };
  CHECK_THROWS_WITH(parse_case(with(R"("causal":5)")), Catch::Contains("wrong type"));
  CHECK_THROWS_WITH(parse_case(with(R"("causal":"sideways")")), Catch::Contains("causal"));
  CHECK_THROWS_WITH(parse_case(with(R"("key_lengths":"all")")), Catch::Contains("key_lengths"));
  CHECK_THROWS_WITH(parse_case(with(R"("key_lengths":[3])")), Catch::Contains("key"));
  CHECK_THROWS_WITH(parse_case(with(R"("temperature":"hot")")), Catch::Contains("temperature"));
  CHECK_THROWS_WITH(parse_case(with(R"("mask":{"allowed":[1,"x"]})")), Catch::Contains("mask"));
  CHECK_THROWS_WITH(parse_case(R"({"shape":{"n_q":1.5,"n_k":2,"d_k":1},"q":[1],"k":[2,3],"v":[4,5]})"),
                    Catch::Contains("n_q"));
  CHECK_THROWS_WITH(parse_case(R"({"shape":{"n_q":1,"n_k":2,"d_k":1},"q":[1],"k":[2,"three"],"v":[4,5]})"),
                    Catch::Contains("tensor k[1]"));
}

TEST_CASE("sizes whose product overflows are refused before any tensor is read") {
  CHECK_THROWS_AS(parse_case(R"({"shape":{"batch":4611686018427387904,"heads":4,"n_q":1,"n_k":1,"d_k":1},"q":[],"k":[],"v":[]})"),
                  InvalidInput);
  CHECK_THROWS_AS(parse_case(R"({"shape":{"n_q":-1,"n_k":1,"d_k":1},"q":[],"k":[],"v":[]})"), InvalidInput);
}

TEST_CASE("a missing or unreadable case file is InvalidInput naming it") {
  CHECK_THROWS_WITH(read_case_file("/nonexistent/case.json"), Catch::Contains("/nonexistent/case.json"));
  CHECK_THROWS_AS(read_case_file("/"), InvalidInput);
}
