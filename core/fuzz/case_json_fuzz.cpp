// libFuzzer target: any bytes given to the case-file parser and then to
// validate() either give a case or throw InvalidInput; nothing else escapes,
// nothing crashes, and a parsed case survives a round trip through its JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "attncheck/case.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  attncheck::Case c;
  try {
    c = attncheck::parse_case(text, "fuzz");
  } catch (const attncheck::InvalidInput&) {
    return 0;  // a clear error is the expected answer to bad bytes
  }
  // Labels may hold text that is not UTF-8 after a round trip only if parsing
  // accepted it, which nlohmann-json does not; so writing must succeed.
  const attncheck::Case again = attncheck::parse_case(attncheck::case_to_json(c), "round trip");
  if (!(again.problem == c.problem) || again.labels != c.labels) std::abort();
  try {
    attncheck::validate(c.problem, c.q, c.k, c.v);
  } catch (const attncheck::InvalidInput&) {
  }
  return 0;
}
