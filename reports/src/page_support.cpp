#include "page_support.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "attncheck/pages.h"

namespace attncheck {
namespace pages {

std::string embed_json(const nlohmann::json& data) {
  const std::string text = data.dump();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') {
      out += "<\\/";
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string page_head(const std::string& title, const std::string& lang) {
  return "<!DOCTYPE html>\n<html lang=\"" + lang +
         "\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, "
         "initial-scale=1\">\n<title>" +
         html_escape(title) + "</title>\n<style>\n" + kPageCss + "</style>\n</head>\n";
}

}  // namespace pages

void write_page(const std::string& html, const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  if (path.empty()) throw InvalidInput(fmt::format("option {}: empty file name", what));
  if (fs::is_directory(path)) throw InvalidInput(fmt::format("option {}: {} is a directory", what, path));
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary);
    if (!out)
      throw InvalidInput(fmt::format("option {}: cannot write {}: {}", what, path, std::strerror(errno)));
    out << html;
    out.close();
    if (!out) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      throw InvalidInput(fmt::format("option {}: writing {} failed", what, path));
    }
  }
  std::error_code ec;
  fs::rename(temporary, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw InvalidInput(fmt::format("option {}: cannot write {}: {}", what, path, ec.message()));
  }
}

std::string case_page_path(const std::string& case_file) {
  return std::filesystem::path(case_file).replace_extension(".html").string();
}

}  // namespace attncheck
