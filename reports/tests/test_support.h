// Helpers shared by the report tests: fixture paths and scratch directories.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace attncheck::report_test {

inline std::string fixture(const std::string& name) {
  return std::string(ATTNCHECK_REPORT_FIXTURES) + "/" + name;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// A fresh empty directory, removed when the test ends.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "attncheck-report-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::string sub(const std::string& name) const { return (path / name).string(); }
};

}  // namespace attncheck::report_test
