// A whole option value as one number (std::from_chars: no sign other than '-',
// no spaces, nothing after it), for options CLI11 reads as text so that the
// error names the option in the project's words.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <string>

#include "attncheck/problem.h"

namespace attncheck::cli {

/// Throws InvalidInput naming `option` unless all of `text` is one number of type T.
template <class T>
T parse_number(const std::string& text, const char* option) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end)
    throw InvalidInput(fmt::format("option {}: '{}' is not a number", option, text));
  return value;
}

}  // namespace attncheck::cli
