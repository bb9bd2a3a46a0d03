// The chapter's worked examples and exercises as data, each with its exact
// answer evaluated from the closed form in mp100, and the check of the
// reference against them (used by the tests and by `attncheck run`).
#pragma once

#include <string>
#include <vector>

#include "attncheck/case.h"
#include "attncheck/reference.h"

namespace attncheck {

/// One golden case: the chapter's inputs and the exact A and O of slice (0, 0).
struct GoldenCase {
  std::string name;     ///< seed-1, seed-2, exercise-1 ... exercise-4
  std::string title;    ///< where it comes from in the chapter
  std::string checked;  ///< what the check compares, in one line
  Case input;
  /// Exact A and O from the closed form on the float-converted inputs. Empty when
  /// the chapter fixes only shapes (exercise 1): then the mp100 reference stands in.
  RefMatrix<mp100> A, O;
  /// The chapter's printed values (rationals such as 1/10) where the float inputs
  /// (ln 3 as a float) move the exact answer slightly; checked within 1e-6.
  RefMatrix<mp100> chapter_A, chapter_O;
};

/// Names accepted by builtin_case(), in the chapter's order.
std::vector<std::string> builtin_case_names();
/// The input of a golden case by name; throws InvalidInput listing the names.
Case builtin_case(const std::string& name);
/// Every golden case with its expected answers.
const std::vector<GoldenCase>& golden_cases();

/// The outcome of checking one golden case.
struct GoldenResult {
  std::string name, title, checked;
  /// Worst error of A and O at each precision: |got - exact| / max(1, |exact|)
  /// per element, plus |row sum of A - 1| and any shape mismatch (as infinity).
  double error_mp50 = 0, error_double = 0;
  double tolerance_mp50 = 1e-40, tolerance_double = 1e-14;
  /// Worst distance of the closed form from the chapter's printed values.
  double chapter_error = 0;
  double chapter_tolerance = 1e-6;
  bool pass = false;
};

/// Runs the reference at mp50 and in double on every golden case.
std::vector<GoldenResult> check_golden_cases();
GoldenResult check_golden_case(const GoldenCase& g);

}  // namespace attncheck
