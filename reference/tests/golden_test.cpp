// The chapter's worked examples and exercises against their exact answers.
#include <catch2/catch.hpp>

#include "attncheck/golden.h"

using namespace attncheck;

TEST_CASE("every golden case matches its exact answer: mp50 within 1e-40, double within 1e-14") {
  const std::vector<GoldenResult> results = check_golden_cases();
  REQUIRE(results.size() == 6);
  for (const GoldenResult& r : results) {
    INFO(r.name << ": " << r.checked << "\n  mp50 error " << r.error_mp50 << ", double error "
                << r.error_double << ", closed form vs chapter " << r.chapter_error);
    CHECK(r.error_mp50 <= 1e-40);
    CHECK(r.error_double <= 1e-14);
    CHECK(r.chapter_error <= 1e-6);
    CHECK(r.pass);
  }
}

TEST_CASE("the golden cases are the chapter's, in its order") {
  CHECK(builtin_case_names() == std::vector<std::string>{"seed-1", "seed-2", "exercise-1",
                                                         "exercise-2", "exercise-3",
                                                         "exercise-4"});
  CHECK_THROWS_AS(builtin_case("seed-3"), InvalidInput);
  CHECK_THROWS_WITH(builtin_case("seed-3"), Catch::Contains("seed-1, seed-2"));
}

TEST_CASE("worked example 2 in double prints the chapter's rationals") {
  const Case c = builtin_case("seed-2");
  const auto t = reference_tables<double>(c.problem, c.q, c.k, c.v, 0, 0);
  CHECK(t.A(0, 0) == 1.0);
  CHECK(t.A(0, 1) == 0.0);  // masked weights are exactly zero
  CHECK(t.A(1, 2) == 0.0);
  CHECK(t.A(1, 0) == Approx(0.1).epsilon(1e-6));
  CHECK(t.A(1, 1) == Approx(0.9).epsilon(1e-6));
  CHECK(t.A(2, 0) == Approx(1.0 / 6).epsilon(1e-6));
  CHECK(t.A(2, 1) == Approx(0.5).epsilon(1e-6));
  CHECK(t.A(2, 2) == Approx(1.0 / 3).epsilon(1e-6));
  CHECK(t.O(0, 0) == 2.0);
  CHECK(t.O(2, 0) == Approx(7.0 / 3).epsilon(1e-6));
  CHECK(t.O(2, 1) == Approx(8.0 / 3).epsilon(1e-6));
}

TEST_CASE("exercise 4: two different weight vectors give the same output") {
  const Case c = builtin_case("exercise-4");
  const auto t = reference_tables<mp50>(c.problem, c.q, c.k, c.v, 0, 0);
  // Compared as doubles so that Catch does not print multiprecision numbers.
  CHECK(static_cast<double>(abs(t.A(0, 0) - t.A(1, 0))) > 0.9);
  CHECK(static_cast<double>(abs(t.O(0, 0) - t.O(1, 0))) < 1e-45);
  CHECK(static_cast<double>(abs(t.O(0, 1) - t.O(1, 1))) < 1e-45);
}

TEST_CASE("exercise 1: cross-attention shapes 4x8, 6x8, 6x3 give A 4x6 and O 4x3") {
  const Case c = builtin_case("exercise-1");
  const auto t = reference_tables<double>(c.problem, c.q, c.k, c.v, 0, 0);
  for (const auto* m : {&t.R, &t.S, &t.M, &t.L, &t.A}) {
    CHECK(m->rows() == 4);
    CHECK(m->cols() == 6);
  }
  CHECK(t.O.rows() == 4);
  CHECK(t.O.cols() == 3);
}
