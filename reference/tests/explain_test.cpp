// The nine tables as printed by explain.
#include <catch2/catch.hpp>
#include <limits>

#include "attncheck/explain.h"
#include "attncheck/golden.h"

using namespace attncheck;
using Catch::Contains;

TEST_CASE("numbers print with the asked digits, -inf as -inf and -0 as 0") {
  CHECK(format_number(0.1, 6) == "0.1");
  CHECK(format_number(-std::numeric_limits<double>::infinity(), 6) == "-inf");
  CHECK(format_number(-0.0, 6) == "0");
  CHECK(format_number(mp50(7) / 3, 6) == "2.33333");
  CHECK(format_number(mp100(7) / 3, 30) == "2.33333333333333333333333333333");
  CHECK(format_number(-std::numeric_limits<mp50>::infinity(), 6) == "-inf");
  CHECK(format_number(2.0L / 3, 4) == "0.6667");
}

TEST_CASE("digits choose double, long double, mp50 or mp100") {
  CHECK(precision_for_digits(6) == "double");
  CHECK(precision_for_digits(12) == "double");
  CHECK(precision_for_digits(13) == "long double");
  CHECK(precision_for_digits(17) == "mp50");
  CHECK(precision_for_digits(45) == "mp50");
  CHECK(precision_for_digits(46) == "mp100");
  CHECK_THROWS_WITH(precision_for_digits(0), Contains("--digits"));
  CHECK_THROWS_WITH(precision_for_digits(96), Contains("--digits"));
}

TEST_CASE("a table has its label, shape, aligned columns and row sums") {
  RefMatrix<double> m(2, 2);
  m(0, 0) = 0.25;
  m(0, 1) = 0.75;
  m(1, 0) = 1;
  m(1, 1) = -std::numeric_limits<double>::infinity();
  CHECK(format_table("A", m, 6, true) ==
        "A  [2x2]   (| row sum)\n"
        "  0.25  0.75  | 1\n"
        "     1  -inf  | -inf\n");
}

TEST_CASE("explain of worked example 2 prints the nine tables with the exact weights") {
  const std::string text = explain(builtin_case("seed-2"), {});
  for (const char* label : {"Q  [3x1]", "K  [3x1]", "V  [3x2]", "R = QKᵀ  [3x3]",
                            "S = QKᵀ/√d_k (d_k = 1)  [3x3]", "M (0 = may read, -inf = masked)",
                            "L = (S + M)/τ (τ = 1)", "A = softmax(L), row-wise  [3x3]",
                            "O = AV  [3x2]", "reference in double"})
    CHECK_THAT(text, Contains(label));
  CHECK_THAT(text, Contains("  0.1  0.9         0  | 1"));
  CHECK_THAT(text, Contains("0.166667  0.5  0.333333  | 1"));
  CHECK_THAT(text, Contains("2.33333  2.66667"));
  CHECK_THAT(text, Contains("-inf"));
}

TEST_CASE("explain at 40 digits uses mp50 and prints 40 digits") {
  ExplainOptions o;
  o.digits = 40;
  const std::string text = explain(builtin_case("exercise-2"), o);
  CHECK_THAT(text, Contains("reference in mp50"));
  CHECK_THAT(text, Contains("0.3333333333333333333333333333333333333333"));
}

TEST_CASE("explain rejects a slice out of range and a bad case") {
  ExplainOptions o;
  o.batch = 1;
  CHECK_THROWS_WITH(explain(builtin_case("seed-1"), o), Contains("batch index 1"));
  Case c = builtin_case("seed-1");
  c.problem.temperature = -1;
  CHECK_THROWS_WITH(explain(c, {}), Contains("temperature"));
}
