#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "attncheck/case.h"

using namespace attncheck;
using Catch::Matchers::Contains;

TEST_CASE("a case written to JSON reads back identical, including awkward floats") {
  Case c;
  c.problem.shape = {1, 2, 2, 3, 2, 1};
  c.problem.scale = 0.3;
  c.problem.temperature = 1e-3;
  c.problem.causal = Causal::bottom_right;
  c.problem.key_lengths = {2};
  c.problem.mask = ExplicitMask{1, 2, std::vector<uint8_t>(12, 1)};
  c.problem.mask->allowed[3] = 0;
  c.problem.empty_rows = EmptyRowPolicy::zero;
  c.q = {1.0f / 3.0f, -0.0f, 1e-40f, 3.4e38f, 0.1f, -7.25f, 1, 2};
  c.k = std::vector<float>(12, 0.7f);
  c.v = std::vector<float>(6, -1.5f);
  c.v[2] = std::nanf("");
  c.labels["property"] = "row_sum";
  const Case back = parse_case(case_to_json(c));
  CHECK(back.problem == c.problem);
  CHECK(back.q == c.q);
  CHECK(std::signbit(back.q[1]));
  CHECK(back.k == c.k);
  CHECK(std::isnan(back.v[2]));
  CHECK(back.labels == c.labels);
}

TEST_CASE("nested arrays are flattened row-major and d_v defaults to d_k") {
  const Case c = parse_case(R"({"shape":{"n_q":3,"n_k":3,"d_k":1,"d_v":2},
      "causal":"top_left",
      "q":[[1],[2],[1]], "k":[[0],[1.0986122886681098],[0.6931471805599453]],
      "v":[[2,0],[0,4],[6,2]]})");
  CHECK(c.problem.shape == Shape{1, 1, 3, 3, 1, 2});
  CHECK(c.problem.causal == Causal::top_left);
  CHECK(c.v == std::vector<float>{2, 0, 0, 4, 6, 2});
  const Case d = parse_case(R"({"shape":{"n_q":1,"n_k":1,"d_k":2},"q":[1,2],"k":[3,4],"v":[5,6]})");
  CHECK(d.problem.shape.d_v == 2);
}

TEST_CASE("malformed case files get an error naming the file and the field") {
  CHECK_THROWS_WITH(parse_case("{\"shape\":", "x.json"), Contains("x.json: malformed JSON"));
  CHECK_THROWS_WITH(parse_case("[1,2]", "x.json"), Contains("must be a JSON object"));
  CHECK_THROWS_WITH(parse_case(R"({"q":[1]})", "x.json"), Contains("missing object 'shape'"));
  CHECK_THROWS_WITH(parse_case(R"({"shape":{"n_q":1,"n_k":1}})", "x.json"),
                    Contains("missing field 'd_k'"));
  CHECK_THROWS_WITH(parse_case(R"({"shape":{"n_q":1,"n_k":1,"d_k":"2"}})", "x.json"),
                    Contains("field 'd_k' must be an integer"));
  CHECK_THROWS_WITH(
      parse_case(R"({"shape":{"n_q":1,"n_k":2,"d_k":1},"q":[1],"k":[1],"v":[1,2]})", "x.json"),
      Contains("x.json: tensor k has 1 values; the shape asks for 2"));
  CHECK_THROWS_WITH(
      parse_case(R"({"shape":{"n_q":1,"n_k":1,"d_k":1},"q":["one"],"k":[1],"v":[1]})", "x.json"),
      Contains("tensor q[0]"));
  CHECK_THROWS_WITH(
      parse_case(R"({"shape":{"n_q":1,"n_k":1,"d_k":1},"causal":"up","q":[1],"k":[1],"v":[1]})",
                 "x.json"),
      Contains("'up' is not one of"));
  CHECK_THROWS_WITH(
      parse_case(R"({"shape":{"n_q":1,"n_k":1,"d_k":1},"temperature":"hot","q":[1],"k":[1],"v":[1]})",
                 "x.json"),
      Contains("'temperature' must be a number"));
  CHECK_THROWS_WITH(parse_case(R"({"shape":{"n_q":0,"n_k":1,"d_k":1},"q":[],"k":[1],"v":[1]})",
                               "x.json"),
                    Contains("n_q is 0"));
  CHECK_THROWS_WITH(read_case_file("/nonexistent/case.json"), Contains("cannot be opened"));
}

TEST_CASE("a case file is written whole and read back") {
  Case c;
  c.problem.shape = {1, 1, 1, 2, 1, 1};
  c.q = {1};
  c.k = {2, 3};
  c.v = {4, 5};
  const std::string path = "case_test_roundtrip.json";
  write_case_file(c, path);
  CHECK(read_case_file(path) == c);
  std::remove(path.c_str());
  CHECK_THROWS(write_case_file(c, "/nonexistent-dir/x.json"));
}
