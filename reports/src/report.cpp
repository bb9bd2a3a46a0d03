// write_report: read, fit, draw, then write — in that order, so that any
// error leaves the output directory untouched.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "attncheck/problem.h"
#include "model.h"

namespace attncheck {
namespace {

namespace fs = std::filesystem;
using namespace report_detail;

/// Writes through a temporary file in the same directory and renames it, so a
/// reader never sees half a report.
void write_file(const fs::path& path, const std::string& text) {
  std::string name = ".";
  name += path.filename().string();
  name += ".tmp";
  const fs::path temporary = path.parent_path() / name;
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", temporary.string()));
  }
  fs::rename(temporary, path);
}

std::string file_stem(const std::string& name) {
  std::string out;
  for (const char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '-';
  return out;
}

/// Characters on screen, counting each UTF-8 sequence once.
size_t display_width(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

}  // namespace

ReportResult write_report(const ReportInputs& inputs, const std::string& out_dir) {
  const fs::path dir = out_dir;
  if (out_dir.empty()) throw InvalidInput("report: option -o/--output: empty directory name");
  if (fs::exists(dir) && !fs::is_directory(dir))
    throw InvalidInput(fmt::format("report: option -o/--output: {} exists and is not a directory", out_dir));

  Model model = load_inputs(inputs);
  analyse(model);
  const std::vector<Chart> charts = draw_charts(model, inputs.gnuplot);
  const std::string json_text = render_json(model);
  const std::string markdown = render_markdown(model);
  const std::string html = render_html(model, charts, out_dir);

  ReportResult result;
  result.headline = model.headline;
  const fs::path chart_dir = dir / "charts";
  fs::create_directories(chart_dir);
  std::set<std::string> written;
  for (const Chart& chart : charts) {
    const fs::path path = chart_dir / (file_stem(chart.name) + ".svg");
    write_file(path, chart.svg);
    written.insert(path.filename().string());
    result.chart_paths.push_back(path.string());
  }
  // Charts of an earlier report in the same directory would be stale.
  for (const auto& entry : fs::directory_iterator(chart_dir))
    if (entry.path().extension() == ".svg" && !written.count(entry.path().filename().string()))
      fs::remove(entry.path());
  write_file(dir / "report.json", json_text);
  write_file(dir / "report.md", markdown);
  write_file(dir / "report.html", html);
  result.json_path = (dir / "report.json").string();
  result.markdown_path = (dir / "report.md").string();
  result.html_path = (dir / "report.html").string();
  return result;
}

std::string format_headline(const std::vector<HeadlineRow>& rows) {
  std::vector<std::vector<std::string>> table = {
      {"implementation", "configuration", "largest n", "GFLOP/s", "% peak", "exponent", "speed-up", "verdict"}};
  for (const HeadlineRow& row : rows) {
    std::vector<std::string> speedups;
    for (const Speedup& s : row.speedups) speedups.push_back("vs " + s.peer + " " + format_speedup(s, row.largest_n));
    table.push_back({row.implementation, row.configuration.empty() ? "—" : row.configuration,
                     row.largest_n ? std::to_string(row.largest_n) : "—",
                     row.gflops ? format_number(*row.gflops) : "—",
                     row.peak_percent ? format_number(*row.peak_percent, 2) : "—",
                     row.fit ? fmt::format("{:.2f}{}", row.fit->exponent, row.fit->all_points ? " (all n)" : "")
                             : "—",
                     speedups.empty() ? "—" : fmt::format("{}", fmt::join(speedups, ", ")), row.verdict});
  }
  std::vector<size_t> widths(table.front().size(), 0);
  for (const auto& r : table)
    for (size_t c = 0; c < r.size(); ++c) widths[c] = std::max(widths[c], display_width(r[c]));
  std::string out;
  for (const auto& r : table) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line += std::string(widths[c] - display_width(r[c]) + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace attncheck
