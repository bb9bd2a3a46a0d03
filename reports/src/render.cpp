// report.json, report.md and report.html from the model. Markdown and HTML
// share the same tables (rows of cells) so they say the same thing.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "model.h"

namespace attncheck::report_detail {

std::string html_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

using nlohmann::json;
using Table = std::vector<std::vector<std::string>>;  // first row is the header

json optional_number(const std::optional<double>& value) {
  if (!value || !std::isfinite(*value)) return nullptr;
  return *value;
}

/// The fields a record of report.json shares whatever the shape: who, which
/// benchmark, and its wall time with the statistic and the repetitions' range.
json measurement_json(const Measurement& m, json problem) {
  return {{"implementation", m.implementation},
          {"problem", std::move(problem)},
          {"benchmark", m.benchmark},
          {"bench_run", m.run},
          {"time_seconds", m.time_s},
          {"time_statistic", m.statistic},
          {"repetitions", m.repetitions},
          {"time_min_seconds", optional_number(m.time_min_s)},
          {"time_max_seconds", optional_number(m.time_max_s)},
          {"gflops", optional_number(m.gflops)}};
}

json fit_json(const std::optional<PowerFit>& fit) {
  if (!fit) return nullptr;
  return {{"exponent", fit->exponent},
          {"coefficient_seconds", fit->coefficient},
          {"n_min", fit->n_min},
          {"n_max", fit->n_max},
          {"points", fit->points},
          {"all_points", fit->all_points},
          {"range", fit->all_points ? "all n (fewer than 2 points with n >= 256)" : "n >= 256"}};
}

std::string text_of(const json& j, const char* key, const std::string& fallback = "") {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

std::string number_of(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return "—";
  return format_number(j[key].get<double>());
}

/// The conditions of every bench file that measured this configuration, and
/// the widest spread of any measurement's repetitions: the noise floor of the
/// speed-ups the headline gives.
std::string config_conditions(const Model& model, const Config& config) {
  std::set<size_t> runs;
  double widest = 0;
  std::string where;
  for (const Series& s : model.series) {
    if (s.config != config) continue;
    runs.insert(s.run);
    for (const Measurement& m : s.points) {
      const auto spread = m.spread();
      if (spread && *spread > widest) {
        widest = *spread;
        where = fmt::format("{}, n = {}", m.implementation, m.n);
      }
    }
  }
  std::vector<std::string> lines;
  for (size_t run : runs) lines.push_back(bench_conditions(model.runs[run], config.threads));
  std::string text = fmt::format("{}", fmt::join(lines, "; "));
  if (!where.empty())
    text += fmt::format("; repetitions spread by up to {} % ({}): smaller differences are noise",
                        format_number(widest * 100, 2), where);
  return text;
}

/// The headline tables, one per configuration (plus one for implementations
/// that were only verified).
struct HeadlineGroup {
  std::string configuration;
  bool benchmarked = true;
  std::string conditions;
  Table table;
};

std::vector<HeadlineGroup> headline_groups(const Model& model) {
  std::vector<HeadlineGroup> groups;
  std::map<std::string, size_t> index;
  for (const HeadlineRow& row : model.headline) {
    const std::string key = row.configuration.empty() ? "verified only (not benchmarked)" : row.configuration;
    if (!index.count(key)) {
      index[key] = groups.size();
      HeadlineGroup g;
      g.configuration = key;
      g.benchmarked = !row.configuration.empty();
      std::vector<std::string> header = {"implementation"};
      if (!row.configuration.empty()) {
        header.insert(header.end(), {"largest n", "GFLOP/s", "% of peak", "fitted exponent",
                                     "Google Benchmark fit (RMS)"});
        // One column per implementation of this configuration (a row's own column shows "—"),
        // none when the implementation has no peer.
        if (!row.speedups.empty())
          for (const Series& s : model.series)
            if (s.config.label() == row.configuration) header.push_back("speed-up vs " + s.implementation);
        for (const Series& s : model.series)
          if (s.config.label() == row.configuration) {
            g.conditions = config_conditions(model, s.config);
            break;
          }
      }
      header.push_back("verdict");
      g.table.push_back(header);
      groups.push_back(g);
    }
    HeadlineGroup& g = groups[index[key]];
    std::vector<std::string> cells = {row.implementation};
    if (!row.configuration.empty()) {
      cells.push_back(std::to_string(row.largest_n));
      cells.push_back(row.gflops ? format_number(*row.gflops) : "—");
      cells.push_back(row.peak_percent ? format_number(*row.peak_percent, 2) + " %" : "—");
      cells.push_back(format_fit(row.fit));
      std::string gb = "—";
      for (const Series& s : model.series)
        if (s.config.label() == row.configuration && s.implementation == row.implementation && s.gbench) {
          gb = fmt::format("{} · {} {}", s.gbench->big_o, format_number(s.gbench->real_coefficient),
                           s.gbench->time_unit);
          if (s.gbench->rms) gb += fmt::format(" (RMS {} %)", format_number(*s.gbench->rms * 100, 2));
        }
      cells.push_back(gb);
      const auto& header = g.table.front();
      for (size_t c = 6; c + 1 < header.size(); ++c) {
        const std::string peer = header[c].substr(std::string("speed-up vs ").size());
        std::string cell = "—";
        for (const Speedup& s : row.speedups)
          if (s.peer == peer) cell = format_speedup(s, row.largest_n);
        cells.push_back(cell);
      }
    }
    cells.push_back(row.verdict);
    g.table.push_back(cells);
    if (row.configuration.empty())
      for (const VerifyRun& v : model.verifies)
        if (v.implementation == row.implementation)
          g.conditions += (g.conditions.empty() ? "" : "; ") + v.implementation + ": " + verify_conditions(v);
  }
  return groups;
}

Table measurements_table(const Model& model, const Config& config) {
  Table t = {{"implementation", "n", "time per call", "GFLOP/s", "% of peak", "× FMA floor", "statistic"}};
  for (const Series& s : model.series) {
    if (s.config != config) continue;
    for (const Measurement& m : s.points) {
      const std::optional<double> over_fma = over_floor(model, m, kFmaFloor);
      t.push_back({s.implementation, std::to_string(m.n), format_number(m.time_s * 1e3) + " ms",
                   m.gflops ? format_number(*m.gflops) : "—",
                   m.peak_fraction ? format_number(*m.peak_fraction * 100, 2) + " %" : "—",
                   floor_ratio_cell(over_fma, m), format_statistic(m)});
    }
  }
  return t;
}

/// A count field of a property as text: "—" where the file does not have it (version 1).
std::string count_of(const json& p, const char* key) {
  return p.contains(key) && p[key].is_number() ? p[key].dump() : "—";
}

Table property_table(const VerifyRun& run) {
  Table t = {{"property", "status", "cases", "inconclusive", "declined (out of range)", "seconds",
              "worst error / bound", "oracle", "notes"}};
  for (const json& p : run.doc["properties"]) {
    std::vector<std::string> notes;
    if (p.contains("skipped_reason") && p["skipped_reason"].is_string()) notes.push_back(p["skipped_reason"].get<std::string>());
    if (p.contains("message") && p["message"].is_string()) notes.push_back(p["message"].get<std::string>());
    const double inconclusive = p.contains("inconclusive") && p["inconclusive"].is_number() ? p["inconclusive"].get<double>() : 0;
    if (inconclusive > 0) {
      const double cases = p.contains("cases") && p["cases"].is_number() ? p["cases"].get<double>() : 0;
      const bool flagged = p.value("inconclusive_flagged", false);
      notes.push_back(fmt::format("{}{:g} of {:g} checked cases ({:.0f} %) inconclusive: {}", flagged ? "FLAG: " : "",
                                  inconclusive, cases + inconclusive, 100 * inconclusive / (cases + inconclusive),
                                  text_of(p, "inconclusive_reason")));
    }
    if (p.contains("unsupported") && p["unsupported"].is_number() && p["unsupported"].get<double>() > 0 &&
        text_of(p, "status") != "SKIPPED")
      notes.push_back("declined as out of range (accepted): " + text_of(p, "unsupported_reason"));
    if (p.contains("notes") && p["notes"].is_array())
      for (const json& n : p["notes"]) notes.push_back("note: " + (n.is_string() ? n.get<std::string>() : n.dump()));
    if (p.contains("not_exercised") && p["not_exercised"].is_array() && !p["not_exercised"].empty()) {
      std::vector<std::string> names;
      for (const json& n : p["not_exercised"]) names.push_back(n.is_string() ? n.get<std::string>() : n.dump());
      notes.push_back(fmt::format("not exercised: {}", fmt::join(names, ", ")));
    }
    if (p.contains("counterexample") && p["counterexample"].is_object()) notes.push_back(text_of(p["counterexample"], "message"));
    std::string cases = text_of(p, "cases", "—");
    if (p.contains("discarded") && p["discarded"].is_number() && p["discarded"].get<double>() > 0)
      cases += fmt::format(" ({} discarded)", p["discarded"].dump());
    t.push_back({text_of(p, "name"), text_of(p, "status"), cases, count_of(p, "inconclusive"), count_of(p, "unsupported"),
                 number_of(p, "seconds"), number_of(p, "worst_error_over_bound"), text_of(p, "oracle", "—"),
                 fmt::format("{}", fmt::join(notes, "; "))});
  }
  return t;
}

Table error_table(const VerifyRun& run) {
  Table t = {{"n", "d", "mask", "max abs error", "error / bound", "oracle"}};
  for (const json& r : run.doc["error_vs_n"])
    t.push_back({text_of(r, "n"), text_of(r, "d", "—"), text_of(r, "mask", "—"), number_of(r, "max_abs_error"),
                 number_of(r, "error_over_bound"), text_of(r, "oracle", "—")});
  return t;
}

std::string ratio_cell(const PowerPoint::Tightness& t) {
  std::string cell = !t.error_over_bound ? "—" : format_number(*t.error_over_bound);
  return t.verdict == "PASSED" ? cell : fmt::format("{} {}", cell, t.verdict);
}

std::string epsilon_cell(const PowerPoint& p) {
  if (p.perturbed.empty()) return "—";
  if (!p.caught_at_highest) return p.largest_missed ? "> " + format_number(*p.largest_missed) : "not caught";
  if (p.caught_at_lowest) return p.smallest_caught ? "≤ " + format_number(*p.smallest_caught) : "—";
  return p.smallest_caught ? format_number(*p.smallest_caught) : "—";
}

/// The power file as a table: a row per n × input × mask.
Table power_table(const PowerRun& run) {
  std::string perturbed;
  for (const PowerPoint& p : run.points)
    if (!p.perturbed.empty()) perturbed = p.perturbed;
  std::vector<std::string> header = {"n", "n_q × n_k", "input", "mask"};
  for (const std::string& impl : run.implementations) header.push_back(impl + " error / bound");
  if (!perturbed.empty())
    header.insert(header.end(), {"bound ÷ worst error (" + perturbed + ")", "smallest ε caught (" + perturbed + ")"});
  header.push_back("oracle");
  Table t = {header};
  for (const PowerPoint& p : run.points) {
    std::vector<std::string> row = {std::to_string(p.n), fmt::format("{}×{}", p.n_q, p.n_k), p.input, p.mask};
    for (const std::string& impl : run.implementations) {
      const auto* tight = p.find(impl);
      row.push_back(tight ? ratio_cell(*tight) : "—");
    }
    if (!perturbed.empty()) {
      const auto* tight = p.find(perturbed);
      row.push_back(tight && tight->error_over_bound && *tight->error_over_bound > 0
                        ? format_number(1 / *tight->error_over_bound) + "×"
                        : "—");
      row.push_back(epsilon_cell(p));
    }
    row.push_back(p.oracle);
    t.push_back(row);
  }
  return t;
}

/// One implementation's rows of the power file, as verify's error vs n table with the input and n_q × n_k.
Table power_error_table(const PowerRun& run, const std::string& implementation) {
  Table t = {{"n", "n_q × n_k", "input", "mask", "max abs error", "error / bound", "verdict", "oracle"}};
  for (const PowerPoint& p : run.points)
    if (const auto* tight = p.find(implementation))
      t.push_back({std::to_string(p.n), fmt::format("{}×{}", p.n_q, p.n_k), p.input, p.mask,
                   tight->max_abs_error ? format_number(*tight->max_abs_error) : "—",
                   tight->error_over_bound ? format_number(*tight->error_over_bound) : "—", tight->verdict, p.oracle});
  return t;
}

/// The rows whose implementation did not pass, as lines of text.
std::vector<std::string> power_failures(const PowerRun& run) {
  std::vector<std::string> out;
  for (const PowerPoint& p : run.points)
    for (const auto& t : p.tightness)
      if (t.verdict != "PASSED")
        out.push_back(fmt::format("n={} {} {}: {} {}{}", p.n, p.input, p.mask, t.implementation, t.verdict,
                                  t.message.empty() ? "" : ": " + t.message));
  return out;
}

std::string power_note(const PowerRun& run, const VerifyRun& v) {
  std::string sizes;
  if (v.doc.contains("error_vs_n") && v.doc["error_vs_n"].is_array()) {
    std::set<std::string> ns;
    std::vector<std::string> ordered;
    for (const json& r : v.doc["error_vs_n"])
      if (ns.insert(text_of(r, "n")).second) ordered.push_back(text_of(r, "n"));
    if (!ordered.empty()) sizes = fmt::format(" (n = {})", fmt::join(ordered, ", "));
  }
  return fmt::format("From {} (attncheck verify --power), the data of \"Tightness and power of the tolerance "
                     "model\" below; the verify file's own error_vs_n{} is in report.json. Conditions: {}.",
                     run.file, sizes, power_conditions(run));
}

const char* power_legend =
    "error / bound: worst |O − reference| over the problem ÷ its forward error bound (differential_reference; "
    "1 = at the bound), with the verdict when not PASSED. bound ÷ worst error: how many times the worst error "
    "fits under the bound. smallest ε caught: the least ε for which O·(1 + ε) (every element moved by the same "
    "relative ε) fails differential_reference, by bisection on log ε (≤: caught at the lowest ε tried; >: never "
    "caught).";

std::string strings_of(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_array() || j[key].empty()) return "—";
  std::vector<std::string> items;
  for (const json& x : j[key]) items.push_back(x.is_string() ? x.get<std::string>() : x.dump());
  return fmt::format("{}", fmt::join(items, ", "));
}

Table mutants_table(const VerifyRun& run) {
  Table t = {{"mutant", "killed", "killed by", "expected killers", "verdict", "case"}};
  for (const json& m : run.doc["mutants"])
    t.push_back({text_of(m, "name"), text_of(m, "killed"), text_of(m, "killed_by", "—"), strings_of(m, "expected_killers"),
                 text_of(m, "verdict", "—"), text_of(m, "case_name", "—")});
  return t;
}

/// The kill matrix (version 2): a row per mutant, a column per property; K a
/// kill, . passed, s skipped, i inconclusive, C crashed, T timed out, G another
/// FAILED; an expected killer's cell in brackets. Empty for version 1 files.
Table kill_matrix_table(const VerifyRun& run) {
  std::vector<std::string> columns;
  for (const json& m : run.doc["mutants"])
    if (m.contains("matrix") && m["matrix"].is_array())
      for (const json& c : m["matrix"]) {
        const std::string property = text_of(c, "property");
        if (std::find(columns.begin(), columns.end(), property) == columns.end()) columns.push_back(property);
      }
  if (columns.empty()) return {};
  Table t = {{"mutant"}};
  t[0].insert(t[0].end(), columns.begin(), columns.end());
  for (const json& m : run.doc["mutants"]) {
    std::vector<std::string> row = {text_of(m, "name")};
    for (const std::string& property : columns) {
      std::string cell = "—";
      if (m.contains("matrix") && m["matrix"].is_array())
        for (const json& c : m["matrix"]) {
          if (text_of(c, "property") != property) continue;
          const std::string status = text_of(c, "status");
          std::string code = c.value("kill", false) ? "K"
                             : status == "PASSED"       ? "."
                             : status == "SKIPPED"      ? "s"
                             : status == "INCONCLUSIVE" ? "i"
                             : status == "CRASHED"      ? "C"
                             : status == "TIMED_OUT"    ? "T"
                                                        : "G";
          cell = c.value("expected", false) ? "[" + code + "]" : code;
        }
      row.push_back(cell);
    }
    t.push_back(row);
  }
  return t;
}

const char* kill_matrix_legend =
    "K killed (FAILED with a counterexample), . passed, s skipped, i inconclusive, C crashed, T timed out, "
    "G gave up or FAILED without a counterexample; [ ] a property expected to kill that mutant.";

/// A counterexample table (reference or implementation A or O) as cells, at
/// most `limit` rows and columns.
Table matrix_table(const json& matrix, size_t limit) {
  Table t;
  if (!matrix.is_array() || matrix.empty()) return t;
  const size_t rows = matrix.size();
  const size_t cols = matrix[0].is_array() ? matrix[0].size() : 1;
  std::vector<std::string> header = {"row"};
  for (size_t j = 0; j < std::min(cols, limit); ++j) header.push_back(std::to_string(j));
  if (cols > limit) header.push_back("…");
  t.push_back(header);
  for (size_t i = 0; i < std::min(rows, limit); ++i) {
    std::vector<std::string> cells = {std::to_string(i)};
    const json& row = matrix[i];
    for (size_t j = 0; j < std::min(cols, limit); ++j) {
      const json& v = row.is_array() ? (j < row.size() ? row[j] : json()) : row;
      cells.push_back(v.is_number() ? format_number(v.get<double>(), 4) : (v.is_string() ? v.get<std::string>() : "—"));
    }
    if (cols > limit) cells.push_back("…");
    t.push_back(cells);
  }
  if (rows > limit) t.push_back(std::vector<std::string>(t.front().size(), "…"));
  return t;
}

struct Counterexample {
  std::string property, status, message, seed, case_file, slice;
  std::vector<std::pair<std::string, Table>> tables;  // title, cells
  std::string case_json;
};

std::vector<Counterexample> counterexamples(const VerifyRun& run) {
  std::vector<Counterexample> out;
  for (const json& p : run.doc["properties"]) {
    if (!p.contains("counterexample") || !p["counterexample"].is_object()) continue;
    const json& ce = p["counterexample"];
    Counterexample c;
    c.property = text_of(p, "name");
    c.status = text_of(p, "status");
    c.message = text_of(ce, "message");
    c.seed = text_of(ce, "seed", text_of(run.doc, "seed", "?"));
    c.case_file = text_of(ce, "case_file");
    if (ce.contains("case")) {
      c.case_json = ce["case"].dump();
      if (c.case_json.size() > 4000) c.case_json = c.case_json.substr(0, 4000) + " …";
    }
    if (ce.contains("tables") && ce["tables"].is_object()) {
      const json& tables = ce["tables"];
      c.slice = tables.contains("slice") ? tables["slice"].dump() : "";
      for (const char* side : {"reference", "implementation"})
        if (tables.contains(side) && tables[side].is_object())
          for (const char* name : {"A", "O"})
            if (tables[side].contains(name))
              c.tables.emplace_back(fmt::format("{} {}", side, name), matrix_table(tables[side][name], 8));
    }
    out.push_back(std::move(c));
  }
  return out;
}

/// What the decode table's columns mean.
constexpr const char* decode_legend =
    "Wall time per call (median over repetitions; the statistic gives the fastest and slowest repetition and "
    "their spread, so that differences smaller than it read as noise); GB/s counts K and V once up to the last "
    "readable key, Q and O once; flop/byte is useful flops per byte moved. The binding roof is the lower of "
    "the FMA peak and read bandwidth × flop/byte, both measured in the same run for the same thread count "
    "(the FMA peak of several threads by a probe running them together; in files without it, one core's "
    "times the threads); % of binding roof is GB/s over bandwidth where memory binds, GFLOP/s over peak "
    "where the FMA peak binds. × read floor is the time over the read-floor row of the same shape and threads "
    "from the same run (the bytes moved, read once with those threads): how far from memory, measured side by "
    "side rather than against the probe; × FMA floor the same over the fma-floor row (the useful flops as "
    "register-only FMAs on those threads); × slower floor over the slower of the two, the shape's roofline "
    "timed beside it; a peer's own compute time when it reported one. A ratio marked (paired) comes from a run "
    "with --paired-floors: both floors timed call by call beside the implementation, on its threads and CPU, "
    "the median over repetitions of each repetition's ratio, so that load changing between repetitions "
    "weighs on both sides alike. Own compute time is "
    "what a plugin or exec child reported (compute_seconds); charts and rates use the wall time.";

constexpr const char* scaling_legend =
    "Speed-up is the time on 1 thread over the time on the row's threads, for the same shape in the same bench "
    "run (a peer's own compute time when it reported one). A floor's speed-up is the same ratio of its own "
    "times (read-floor: the bytes moved, read with those threads; fma-floor: the useful flops as register-only "
    "FMAs): what the machine's cores give together on that shape, measured beside it rather than assumed to be "
    "the thread count. The roofline's is the slower floor's time on 1 thread over the slower floor's on the "
    "row's threads (floors timed at both counts). Speed-up over the roofline's near 1 means the implementation "
    "scales as far as the machine does; above 1, further (its 1-thread time was further from its floor).";

constexpr const char* floor_legend =
    "× FMA floor is the time over the fma-floor row of the same n and threads from the same run (the useful "
    "flops as register-only FMAs on those threads): how far from the FMA peak, measured side by side rather "
    "than against the probe; marked (paired), from a run with --paired-floors: the fma-floor timed call by "
    "call beside the implementation, the median over repetitions of each repetition's ratio.";

std::set<Config> configs(const Model& model) {
  std::set<Config> out;
  for (const Series& s : model.series) out.insert(s.config);
  return out;
}

// ---------------------------------------------------------------- Markdown

std::string md_cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += " ";
    else out += c;
  }
  return out;
}

std::string md_table(const Table& t) {
  if (t.empty()) return "";
  std::string out;
  for (size_t r = 0; r < t.size(); ++r) {
    out += "|";
    for (const auto& cell : t[r]) {
      out += ' ';
      out += md_cell(cell);
      out += " |";
    }
    out += "\n";
    if (r == 0) {
      out += "|";
      for (size_t c = 0; c < t[r].size(); ++c) out += "---|";
      out += "\n";
    }
  }
  return out;
}

// -------------------------------------------------------------------- HTML

std::string html_table(const Table& t, const std::string& css_class = "") {
  if (t.empty()) return "";
  std::string out = css_class.empty() ? "<table>\n" : "<table class=\"" + css_class + "\">\n";
  for (size_t r = 0; r < t.size(); ++r) {
    out += "<tr>";
    for (const auto& cell : t[r]) {
      std::string attrs;
      if (r > 0 && (cell.rfind("FAIL", 0) == 0 || cell == "FAILED" || cell == "CRASHED" || cell == "TIMED_OUT" ||
                    cell == "ESCAPED" || cell == "KILLED_UNEXPECTEDLY"))
        attrs = " class=\"fail\"";
      else if (r > 0 && (cell.rfind("INCONCLUSIVE", 0) == 0 || cell.rfind("FLAG: ", 0) == 0 ||
                         cell.rfind("NOT VERIFIED", 0) == 0))
        attrs = " class=\"warn\"";
      else if (r > 0 && (cell.rfind("PASS", 0) == 0 || cell == "PASSED"))
        attrs = " class=\"pass\"";
      out += (r == 0 ? "<th>" : "<td" + attrs + ">") + html_escape(cell) + (r == 0 ? "</th>" : "</td>");
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

/// Makes gnuplot's SVG fit inside an HTML page: drops the XML prolog and
/// DOCTYPE and the namespace declarations (HTML gives inline <svg> its
/// namespace), and prefixes every id so several charts do not clash.
std::string inline_svg(const std::string& svg, const std::string& prefix) {
  std::string out = svg.substr(svg.find("<svg"));
  for (const char* attribute : {" xmlns=\"http://www.w3.org/2000/svg\"", " xmlns:xlink=\"http://www.w3.org/1999/xlink\"",
                                "\n xmlns=\"http://www.w3.org/2000/svg\"", "\n xmlns:xlink=\"http://www.w3.org/1999/xlink\""}) {
    const std::string a = attribute;
    for (size_t at = out.find(a); at != std::string::npos; at = out.find(a)) out.erase(at, a.size());
  }
  // Collect ids, then rewrite each id and every reference to it.
  std::set<std::string> ids;
  for (const std::string opener : {"id='", "id=\""}) {
    for (size_t at = out.find(opener); at != std::string::npos; at = out.find(opener, at + 1)) {
      const size_t start = at + opener.size();
      const size_t end = out.find(opener.back(), start);
      if (end != std::string::npos) ids.insert(out.substr(start, end - start));
    }
  }
  std::string rewritten;
  rewritten.reserve(out.size() + out.size() / 8);
  for (size_t i = 0; i < out.size();) {
    bool replaced = false;
    for (const std::string opener : {"id='", "id=\"", "#"}) {
      if (out.compare(i, opener.size(), opener) != 0) continue;
      const size_t start = i + opener.size();
      size_t end = start;
      while (end < out.size() && (std::isalnum(static_cast<unsigned char>(out[end])) || out[end] == '_' ||
                                  out[end] == '-'))
        ++end;
      const std::string id = out.substr(start, end - start);
      // A '#' counts as a reference only inside an attribute value or url(...).
      const bool reference = opener == "#";
      const bool in_attribute = i > 0 && (out[i - 1] == '\'' || out[i - 1] == '"' || out[i - 1] == '(');
      if (!id.empty() && ids.count(id) && (!reference || in_attribute)) {
        rewritten += opener + prefix + id;
        i = end;
        replaced = true;
      }
      break;
    }
    if (!replaced) rewritten += out[i++];
  }
  // Let the chart shrink with the page.
  const size_t tag_end = rewritten.find('>');
  rewritten.insert(tag_end, " class=\"chart\" role=\"img\"");
  return rewritten;
}

const char* css = R"(body { font-family: sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.4; }
h1, h2, h3 { font-weight: 600; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.fail, li.fail { background: #fde2e2; font-weight: 600; }
td.pass { background: #e3f4e3; }
td.warn { background: #fff3cd; }
table.matrix td { font-family: monospace; text-align: right; }
.conditions { color: #555; font-size: 0.9em; }
figure { margin: 1em 0 2em; }
figcaption { color: #444; font-size: 0.9em; max-width: 960px; }
svg.chart { max-width: 100%; height: auto; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
)";

}  // namespace

std::string render_json(const Model& model) {
  json out;
  out["json_schema_version"] = report_json_schema_version;
  out["tool"] = "attncheck report";
  json bench_files = json::array(), verify_files = json::array();
  for (const BenchRun& r : model.runs) bench_files.push_back(r.file);
  for (const VerifyRun& v : model.verifies) verify_files.push_back(v.file);
  out["inputs"] = {{"bench", bench_files},
                   {"verify", verify_files},
                   {"power", model.power ? json(model.power->file) : json()}};
  json runs = json::array();
  for (const BenchRun& r : model.runs)
    runs.push_back({{"file", r.file},
                    {"cpu_model", r.cpu_model},
                    {"num_cpus", r.num_cpus},
                    {"compiler", r.compiler},
                    {"cxx_flags", r.cxx_flags},
                    {"simd_target", r.simd_target},
                    {"peak_fma_gflops", optional_number(r.peak_gflops)},
                    {"peak_fma_gflops_all_threads", optional_number(r.peak_all)},
                    {"peak_fma_threads", r.peak_threads > 0 ? json(r.peak_threads) : json()},
                    {"date", r.date},
                    {"host_name", r.host_name},
                    {"library_build_type", r.library_build_type},
                    {"repetitions", r.repetitions},
                    {"statistic", r.statistic},
                    {"context", r.context}});
  out["bench_runs"] = runs;
  json records = json::array(), series = json::array();
  for (const Series& s : model.series) {
    const std::string verdict = verdict_for(model, s.implementation);
    json ns = json::array();
    for (const Measurement& m : s.points) {
      ns.push_back(m.n);
      json record = measurement_json(m, {{"n", m.n}, {"d", m.d}, {"mask", m.mask}, {"threads", m.threads}});
      record["peak_fraction"] = optional_number(m.peak_fraction);
      record["over_fma_floor"] = optional_number(over_floor(model, m, kFmaFloor));
      record["floors_paired"] = m.paired_over_roofline.has_value();
      record["verdict"] = verdict;
      records.push_back(record);
    }
    json gb = nullptr;
    if (s.gbench)
      gb = {{"big_o", s.gbench->big_o},
            {"real_coefficient", s.gbench->real_coefficient},
            {"cpu_coefficient", s.gbench->cpu_coefficient},
            {"time_unit", s.gbench->time_unit},
            {"rms", optional_number(s.gbench->rms)}};
    series.push_back({{"implementation", s.implementation},
                      {"configuration", {{"d", s.config.d}, {"mask", s.config.mask}, {"threads", s.config.threads}}},
                      {"bench_run", s.run},
                      {"n", ns},
                      {"fit", fit_json(s.fit)},
                      {"google_benchmark", gb}});
  }
  out["records"] = records;
  out["series"] = series;
  json cross = json::array();
  for (const Measurement& m : model.cross) {
    const Roofline r = roofline(model, m);
    json record = measurement_json(
        m, {{"n_q", m.n_q}, {"n_k", m.n_k}, {"d", m.d}, {"mask", m.mask}, {"threads", m.threads}});
    record["compute_seconds"] = optional_number(m.compute_s);
    record["gbytes_per_s"] = optional_number(m.gbytes_per_s);
    record["over_read_floor"] = optional_number(over_floor(model, m, kReadFloor));
    record["over_fma_floor"] = optional_number(over_floor(model, m, kFmaFloor));
    record["over_slower_floor"] = optional_number(over_slower_floor(model, m));
    record["floors_paired"] = m.paired_over_roofline.has_value();
    record["roofline"] = {{"flop_per_byte", optional_number(r.intensity)},
                          {"peak_gflops", optional_number(r.peak_gflops)},
                          {"bandwidth_gbps", optional_number(r.bandwidth_gbps)},
                          {"binds", r.binds.empty() ? json() : json(r.binds)},
                          {"fraction", optional_number(r.fraction)}};
    cross.push_back(record);
  }
  out["cross_records"] = cross;
  json scaling = json::array();
  for (const ThreadScaling& t : thread_scaling(model)) {
    const Measurement& m = *t.many;
    json problem = m.n > 0 ? json{{"n", m.n}} : json{{"n_q", m.n_q}, {"n_k", m.n_k}};
    problem["d"] = m.d;
    problem["mask"] = m.mask;
    scaling.push_back({{"implementation", m.implementation},
                       {"problem", problem},
                       {"bench_run", m.run},
                       {"threads", m.threads},
                       {"seconds_1_thread", t.one->own_seconds()},
                       {"seconds", m.own_seconds()},
                       {"speedup", t.speedup},
                       {"read_floor_speedup", optional_number(t.read_floor)},
                       {"fma_floor_speedup", optional_number(t.fma_floor)},
                       {"roofline_speedup", optional_number(t.roofline)},
                       {"over_roofline_speedup", optional_number(t.over_roofline())}});
  }
  out["thread_scaling"] = scaling;
  json headline = json::array();
  for (const HeadlineRow& row : model.headline) {
    json speedups = json::array();
    for (const Speedup& s : row.speedups)
      speedups.push_back({{"peer", s.peer}, {"factor", optional_number(s.factor)}, {"n", s.factor ? json(s.n) : json()}});
    headline.push_back({{"implementation", row.implementation},
                        {"configuration", row.configuration.empty() ? json() : json(row.configuration)},
                        {"largest_n", row.largest_n == 0 ? json() : json(row.largest_n)},
                        {"gflops", optional_number(row.gflops)},
                        {"peak_percent", optional_number(row.peak_percent)},
                        {"fit", fit_json(row.fit)},
                        {"speedups", speedups},
                        {"verdict", row.verdict}});
  }
  out["headline"] = headline;
  json verification = json::array();
  for (const VerifyRun& v : model.verifies) {
    const json& d = v.doc;
    verification.push_back({{"file", v.file},
                            {"verify_json_schema_version", v.schema_version},
                            {"implementation", v.implementation},
                            {"declared_name", v.declared_name.empty() ? json(nullptr) : json(v.declared_name)},
                            {"precision", v.precision},
                            {"verdict", verdict_for(model, v.implementation)},
                            {"shard", d.value("shard", json())},
                            {"conditions", verify_conditions(v)},
                            {"seed", d.value("seed", json())},
                            {"cases_per_property", d.value("cases_per_property", json())},
                            {"max_n", d.value("max_n", json())},
                            {"context", d.value("context", json())},
                            {"summary", d.value("summary", json())},
                            {"properties", d["properties"]},
                            {"error_vs_n", d.value("error_vs_n", json::array())},
                            {"error_vs_n_shown_from",
                             model.power && model.power->has(v.implementation) ? "power" : "verify"},
                            {"mutants", d.value("mutants", json::array())}});
  }
  out["verification"] = verification;
  if (model.power) {
    const PowerRun& p = *model.power;
    out["power"] = {{"file", p.file},
                    {"power_json_version", p.version},
                    {"conditions", power_conditions(p)},
                    {"settings", p.doc.value("settings", json())},
                    {"context", p.doc.value("context", json())},
                    {"rows", p.doc["rows"]},
                    {"error_vs_n", p.doc.value("error_vs_n", json::array())}};
  } else {
    out["power"] = nullptr;
  }
  out["ignored_benchmarks"] = model.ignored_benchmarks;
  json failed = json::array();
  for (const auto& f : model.failed_benchmarks)
    failed.push_back({{"benchmark", f.name}, {"error_message", f.message}, {"file", f.file}});
  out["failed_benchmarks"] = failed;
  return out.dump(2) + "\n";
}

/// Which files the report was built from.
static std::string provenance(const Model& model) {
  std::vector<std::string> bench, verify;
  for (const BenchRun& r : model.runs) bench.push_back(r.file);
  for (const VerifyRun& v : model.verifies) verify.push_back(v.file);
  return fmt::format("Built from bench JSON: {}; verify JSON: {}; power JSON: {}.",
                     bench.empty() ? "none" : fmt::format("{}", fmt::join(bench, ", ")),
                     verify.empty() ? "none" : fmt::format("{}", fmt::join(verify, ", ")),
                     model.power ? model.power->file : "none");
}

std::string render_markdown(const Model& model) {
  std::string md = "# attncheck report\n\n" + provenance(model) + "\n\n";
  md += "## Headline\n\n";
  if (model.headline.empty()) md += "No implementations in the inputs.\n\n";
  for (const HeadlineGroup& g : headline_groups(model)) {
    md += fmt::format("**{}**\n\n", g.configuration);
    md += md_table(g.table);
    if (g.benchmarked)
      md += fmt::format("\n_Conditions: {}. GFLOP/s and % of peak at the largest n; speed-up = peer time / own "
                        "time at the largest common n; exponent = least-squares slope of log time on log n._\n",
                        g.conditions);
    else
      md += fmt::format("\n_Conditions: {}._\n", g.conditions);
    md += "\n";
  }
  if (!model.failed_benchmarks.empty()) {
    md += "**Benchmarks that reported an error (no time):**\n\n";
    for (const auto& f : model.failed_benchmarks) md += fmt::format("- `{}`: {}\n", f.name, f.message);
    md += "\n";
  }
  for (const Config& config : configs(model)) {
    md += fmt::format("<details><summary>All measurements, {}</summary>\n\n", config.label());
    md += md_table(measurements_table(model, config));
    md += fmt::format("\n_Conditions: {}. {}_\n\n</details>\n\n", config_conditions(model, config), floor_legend);
  }
  if (!model.cross.empty())
    md += "## Decode and cross shapes\n\n" + md_table(decode_table(model)) + "\n_" + decode_legend + "_\n\n";
  if (const auto scaling = thread_scaling_table(model); scaling.size() > 1)
    md += "## Thread scaling\n\n" + md_table(scaling) + "\n_" + scaling_legend + "_\n\n";
  for (const std::string& note : isolation_notes(model)) md += "- " + note + "\n";
  if (!isolation_notes(model).empty()) md += "\n";
  for (const VerifyRun& v : model.verifies) {
    md += fmt::format("## Verification: {}{}{}\n\n", v.implementation,
                      v.declared_name.empty() ? "" : " \"" + v.declared_name + "\"",
                      v.precision.empty() ? "" : " (" + v.precision + ")");
    md += fmt::format("**{}**\n\n", verdict_for(model, v.implementation));
    md += fmt::format("_Conditions: {}. From {}._\n\n", verify_conditions(v), v.file);
    md += md_table(property_table(v)) + "\n";
    for (const Counterexample& c : counterexamples(v)) {
      md += fmt::format("### Counterexample: {} ({})\n\n", c.property, c.status);
      md += fmt::format("{}\n\nSeed {}{}.\n\n", c.message, c.seed,
                        c.case_file.empty() ? "" : fmt::format(", case file `{}`", c.case_file));
      for (const auto& [title, table] : c.tables) {
        if (table.empty()) continue;
        md += fmt::format("{} (slice {}):\n\n{}\n", title, c.slice, md_table(table));
      }
    }
    if (model.power && model.power->has(v.implementation))
      md += "### Error vs n\n\n" + md_table(power_error_table(*model.power, v.implementation)) + "\n_" +
            power_note(*model.power, v) + "_\n\n";
    else if (v.doc.contains("error_vs_n") && !v.doc["error_vs_n"].empty())
      md += "### Error vs n\n\n" + md_table(error_table(v)) + "\n";
    if (v.doc.contains("mutants") && v.doc["mutants"].is_array() && !v.doc["mutants"].empty()) {
      md += "### Mutants\n\n" + md_table(mutants_table(v)) + "\n";
      const Table matrix = kill_matrix_table(v);
      if (!matrix.empty()) md += "**Kill matrix**\n\n" + md_table(matrix) + "\n_" + kill_matrix_legend + "_\n\n";
    }
  }
  if (model.power) {
    const PowerRun& p = *model.power;
    md += "## Tightness and power of the tolerance model\n\n";
    md += md_table(power_table(p)) + "\n_" + power_legend + "_\n\n";
    for (const std::string& line : power_failures(p)) md += "- " + line + "\n";
    if (!power_failures(p).empty()) md += "\n";
    md += fmt::format("_Conditions: {}. From {}._\n\n", power_conditions(p), p.file);
  }
  if (!model.ignored_benchmarks.empty())
    md += fmt::format("Benchmarks without an n: field, not reported: {}.\n\n", fmt::join(model.ignored_benchmarks, ", "));
  md += "Charts: see report.html beside this file.\n";
  return md;
}

// The case page verify writes beside a counterexample's case file (x.json →
// x.html), as a link relative to the report's directory; empty when there is none.
static std::string case_page_link(const std::string& case_file, const std::string& out_dir) {
  namespace fs = std::filesystem;
  if (case_file.empty()) return "";
  const fs::path page = fs::path(case_file).replace_extension(".html");
  std::error_code ec;
  if (!fs::exists(page, ec)) return "";
  const fs::path link = fs::relative(fs::absolute(page, ec), fs::absolute(out_dir, ec), ec);
  return ec ? "" : link.generic_string();
}

std::string render_html(const Model& model, const std::vector<Chart>& charts, const std::string& out_dir) {
  int chart_number = 0;
  auto figure = [&](const Chart& c) {
    ++chart_number;
    return fmt::format("<figure id=\"{}\">\n{}\n<figcaption>Figure {}. {}</figcaption>\n</figure>\n", html_escape(c.name),
                       inline_svg(c.svg, fmt::format("c{}-", chart_number)), chart_number, html_escape(c.caption));
  };
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<title>attncheck report</title>\n<style>\n" + std::string(css) + "</style>\n</head>\n<body>\n";
  h += "<h1>attncheck report</h1>\n<p class=\"conditions\">" + html_escape(provenance(model)) +
       "</p>\n<h2>Headline</h2>\n";
  for (const HeadlineGroup& g : headline_groups(model)) {
    h += fmt::format("<h3>{}</h3>\n", html_escape(g.configuration)) + html_table(g.table);
    if (g.benchmarked)
      h += fmt::format("<p class=\"conditions\">Conditions: {}. GFLOP/s and % of peak at the largest n; speed-up = "
                       "peer time / own time at the largest common n; exponent = least-squares slope of log time "
                       "on log n.</p>\n",
                       html_escape(g.conditions));
    else
      h += fmt::format("<p class=\"conditions\">Conditions: {}.</p>\n", html_escape(g.conditions));
  }
  if (!model.failed_benchmarks.empty()) {
    h += "<p><strong>Benchmarks that reported an error (no time):</strong></p>\n<ul>\n";
    for (const auto& f : model.failed_benchmarks)
      h += fmt::format("<li><code>{}</code>: {}</li>\n", html_escape(f.name), html_escape(f.message));
    h += "</ul>\n";
  }
  if (!model.series.empty()) h += "<h2>Performance</h2>\n";
  for (const Config& config : configs(model)) {
    h += fmt::format("<h3>{}</h3>\n", html_escape(config.label()));
    for (const Chart& c : charts)
      if (c.section == "performance:" + config.label()) h += figure(c);
    h += "<details><summary>All measurements</summary>\n" + html_table(measurements_table(model, config)) +
         "<p class=\"conditions\">Conditions: " + html_escape(config_conditions(model, config)) + ". " +
         html_escape(floor_legend) + "</p>\n</details>\n";
  }
  if (!model.cross.empty()) {
    h += "<h2>Decode and cross shapes</h2>\n";
    for (const Chart& c : charts)
      if (c.section == "decode") h += figure(c);
    h += html_table(decode_table(model)) + "<p class=\"conditions\">" + html_escape(decode_legend) + "</p>\n";
  }
  if (const auto scaling = thread_scaling_table(model); scaling.size() > 1)
    h += "<h2>Thread scaling</h2>\n" + html_table(scaling) + "<p class=\"conditions\">" +
         html_escape(scaling_legend) + "</p>\n";
  if (const auto notes = isolation_notes(model); !notes.empty()) {
    h += "<ul>\n";
    for (const std::string& note : notes) h += "<li>" + html_escape(note) + "</li>\n";
    h += "</ul>\n";
  }
  for (size_t i = 0; i < model.verifies.size(); ++i) {
    const VerifyRun& v = model.verifies[i];
    h += fmt::format("<h2>Verification: {}{}{}</h2>\n", html_escape(v.implementation),
                     v.declared_name.empty() ? "" : " &ldquo;" + html_escape(v.declared_name) + "&rdquo;",
                     v.precision.empty() ? "" : " (" + html_escape(v.precision) + ")");
    const std::string verdict = verdict_for(model, v.implementation);
    h += fmt::format("<p><strong class=\"{}\">{}</strong></p>\n",
                     verdict.rfind("FAIL", 0) == 0                                                    ? "fail"
                     : verdict.rfind("INCONCLUSIVE", 0) == 0 || verdict.rfind("NOT VERIFIED", 0) == 0 ? "warn"
                                                                                                  : "pass",
                     html_escape(verdict));
    h += fmt::format("<p class=\"conditions\">Conditions: {}. From {}.</p>\n", html_escape(verify_conditions(v)),
                     html_escape(v.file));
    h += html_table(property_table(v));
    for (const Counterexample& c : counterexamples(v)) {
      h += fmt::format("<h3>Counterexample: {} ({})</h3>\n<p>{}</p>\n<p>Seed {}{}.</p>\n", html_escape(c.property),
                       html_escape(c.status), html_escape(c.message), html_escape(c.seed),
                       c.case_file.empty() ? "" : ", case file <code>" + html_escape(c.case_file) + "</code>");
      if (const std::string page = case_page_link(c.case_file, out_dir); !page.empty())
        h += "<p><a class=\"case-page\" href=\"" + html_escape(page) +
             "\">Case page</a>: the nine tables, the reference beside the implementation, cells beyond their bound marked.</p>\n";
      for (const Chart& chart : charts)
        if (chart.section == fmt::format("property:{}:{}", i, c.property)) h += figure(chart);
      for (const auto& [title, table] : c.tables)
        if (!table.empty())
          h += fmt::format("<p>{} (slice {})</p>\n", html_escape(title), html_escape(c.slice)) +
               html_table(table, "matrix");
      if (!c.case_json.empty())
        h += "<details><summary>Case JSON</summary><pre>" + html_escape(c.case_json) + "</pre></details>\n";
    }
    const bool from_power = model.power && model.power->has(v.implementation);
    if (from_power || (v.doc.contains("error_vs_n") && !v.doc["error_vs_n"].empty())) {
      h += "<h3>Error vs n</h3>\n";
      for (const Chart& chart : charts)
        if (chart.section == fmt::format("error:{}", i)) h += figure(chart);
      if (from_power)
        h += html_table(power_error_table(*model.power, v.implementation)) + "<p class=\"conditions\">" +
             html_escape(power_note(*model.power, v)) + "</p>\n";
      else
        h += html_table(error_table(v));
    }
    if (v.doc.contains("mutants") && v.doc["mutants"].is_array() && !v.doc["mutants"].empty()) {
      h += "<h3>Mutants</h3>\n" + html_table(mutants_table(v));
      const Table matrix = kill_matrix_table(v);
      if (!matrix.empty())
        h += "<h4>Kill matrix</h4>\n" + html_table(matrix, "matrix") + "<p class=\"conditions\">" +
             html_escape(kill_matrix_legend) + "</p>\n";
    }
  }
  if (model.power) {
    const PowerRun& p = *model.power;
    h += "<h2>Tightness and power of the tolerance model</h2>\n";
    for (const Chart& chart : charts)
      if (chart.section == "power") h += figure(chart);
    h += html_table(power_table(p)) + "<p class=\"conditions\">" + html_escape(power_legend) + "</p>\n";
    const auto failures = power_failures(p);
    if (!failures.empty()) {
      h += "<ul>\n";
      for (const std::string& line : failures) h += "<li class=\"fail\">" + html_escape(line) + "</li>\n";
      h += "</ul>\n";
    }
    h += fmt::format("<p class=\"conditions\">Conditions: {}. From {}.</p>\n", html_escape(power_conditions(p)),
                     html_escape(p.file));
  }
  if (!model.ignored_benchmarks.empty())
    h += fmt::format("<p>Benchmarks without an n: field, not reported: {}.</p>\n",
                     html_escape(fmt::format("{}", fmt::join(model.ignored_benchmarks, ", "))));
  h += "</body>\n</html>\n";
  return h;
}

}  // namespace attncheck::report_detail
