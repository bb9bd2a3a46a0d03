// A case: a problem with its input tensors, and its JSON form (docs/case-format.md).
// The case file is how explain shows any input, how verify records a shrunk
// counterexample, and how --replay re-runs it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "attncheck/problem.h"

namespace attncheck {

/// A problem and its inputs, in the layout of problem.h ([batch][heads][rows][dim]).
struct Case {
  Problem problem;
  std::vector<float> q, k, v;
  /// Free-form provenance written with the case (property, seed, implementation...).
  std::map<std::string, std::string> labels;
  bool operator==(const Case&) const = default;
};

/// Parses a case from JSON text. `source` names the file in error messages.
/// Tensor values may be numbers or the strings "nan", "inf", "-inf" (so that a
/// hostile input can be written down); arrays may be flat or nested. Shape
/// errors and malformed JSON throw InvalidInput naming the field; the values
/// themselves are not validated here (call validate()).
Case parse_case(const std::string& json_text, const std::string& source = "case");

/// Reads and parses a case file; a missing or unreadable file throws InvalidInput.
Case read_case_file(const std::string& path);

/// The JSON form of a case. Floats are written so that they read back exactly.
std::string case_to_json(const Case& c);

/// Writes case_to_json to `path` (through a temporary file, so a failure leaves
/// nothing half-written). Throws std::runtime_error on I/O failure.
void write_case_file(const Case& c, const std::string& path);

}  // namespace attncheck
