// verify JSON (docs/verify-json.md) and JUnit XML.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <thread>

#include "attncheck/attention.h"
#include "attncheck/verify.h"

namespace attncheck {
namespace {

using nlohmann::json;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json capabilities_json(const Capabilities& c) {
  return {{"cross", c.cross},
          {"dv_ne_dk", c.dv_ne_dk},
          {"batch_heads", c.batch_heads},
          {"scale", c.scale},
          {"temperature", c.temperature},
          {"causal_top_left", c.causal_top_left},
          {"causal_bottom_right", c.causal_bottom_right},
          {"key_padding", c.key_padding},
          {"explicit_mask", c.explicit_mask},
          {"empty_row_reject", c.empty_row_reject},
          {"empty_row_zero", c.empty_row_zero},
          {"weights", c.weights},
          {"threads", c.threads}};
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') out += ' ';
        else out += ch;
    }
  }
  return out;
}

int count(const VerifyReport& r, Status s) {
  int n = 0;
  for (const auto& p : r.properties) n += p.status == s;
  return n;
}

int cut_short_count(const VerifyReport& r) {
  int n = 0;
  for (const auto& p : r.properties) n += !p.cut_short.empty();
  return n;
}

}  // namespace

json run_context(int threads) {
  std::string simd;
  try {
    simd = active_target();
  } catch (const std::exception&) {
    simd = "unknown";
  }
#ifdef NDEBUG
  const char* flags = "-O3 -DNDEBUG (Release)";
#else
  const char* flags = "debug build";
#endif
  const int logical = static_cast<int>(std::thread::hardware_concurrency());
  json load = json::array();
  double avg[3];
  if (getloadavg(avg, 3) == 3) load = {avg[0], avg[1], avg[2]};
  return {{"cpu_model", cpu_model()},
          {"cores_used", threads > 0 ? threads : logical},
          {"logical_cpus", logical},
          {"load_avg", load},
          {"compiler", fmt::format("g++ {}", __VERSION__)},
          {"flags", flags},
          {"simd_target", simd},
          {"date", utc_now()}};
}

std::string verify_json(const VerifyReport& report) {
  json j;
  j["json_schema_version"] = kVerifyJsonSchemaVersion;
  j["tool"] = "attncheck verify";
  j["implementation"] = {{"name", report.implementation},
                         {"declared_name", report.declared_name.empty() ? json(nullptr) : json(report.declared_name)},
                         {"precision", to_string(report.precision)},
                         {"capabilities", capabilities_json(report.capabilities)}};
  j["seed"] = report.options.seed;
  j["cases_per_property"] = report.options.cases;
  j["max_n"] = report.options.max_n;
  {
    // Which work units this file holds (docs/ci.md): `attncheck report` merges
    // the shards of one run and checks that they fit together.
    const VerifyOptions& o = report.options;
    json selected = json::array();
    for (const Property& p : all_properties())
      if (o.properties.empty() || std::find(o.properties.begin(), o.properties.end(), p.name) != o.properties.end())
        selected.push_back(p.name);
    j["shard"] = {{"index", o.shard_index}, {"count", o.shard_count}, {"case_chunks", o.case_chunks},
                  {"properties", selected}};
  }
  j["time_budget_seconds"] = report.options.time_budget > 0 ? json(report.options.time_budget) : json(nullptr);
  j["property_time_budget_seconds"] =
      report.options.property_time_budget > 0 ? json(report.options.property_time_budget) : json(nullptr);
  j["context"] = run_context(report.options.threads);
  json props = json::array();
  // A shard writes one entry per work unit, so that merging the shards is
  // merging the units of each property in chunk order, as one run does.
  for (const PropertyResult& p : report.options.shard_count > 1 ? report.units : report.properties) {
    json e;
    e["name"] = p.name;
    e["status"] = to_string(p.status);
    e["cases"] = p.cases;
    e["discarded"] = p.discarded;
    e["inconclusive"] = p.inconclusive;
    e["inconclusive_flagged"] = inconclusive_flagged(p);
    e["inconclusive_reason"] = p.inconclusive > 0 ? json(p.inconclusive_reason) : json(nullptr);
    e["unsupported"] = p.unsupported;
    e["unsupported_reason"] = p.unsupported > 0 ? json(p.unsupported_reason) : json(nullptr);
    e["notes"] = p.notes;
    e["seconds"] = p.seconds;
    e["worst_error_over_bound"] =
        p.worst_ratio ? (std::isfinite(*p.worst_ratio) ? json(*p.worst_ratio) : json(1e308)) : json(nullptr);
    e["oracle"] = p.oracles.empty() ? json(nullptr) : json(p.oracles.back());
    if (p.oracles.size() > 1) e["oracles"] = p.oracles;
    if (p.status == Status::skipped) e["skipped_reason"] = p.skipped_reason;
    e["not_exercised"] = p.not_exercised;
    e["timed_out_calls"] = p.timed_out;
    e["cut_short"] = p.cut_short.empty() ? json(nullptr) : json(p.cut_short);
    e["chunks"] = p.chunks.empty() ? json::array({0}) : json(p.chunks);
    if (!p.message.empty() && (p.status == Status::passed || p.status == Status::inconclusive)) e["message"] = p.message;
    if (p.status == Status::failed || p.status == Status::crashed || p.status == Status::timed_out) {
      json ce;
      ce["message"] = p.message;
      ce["seed"] = report.options.seed;
      ce["case_file"] = p.case_file.empty() ? json(nullptr) : json(p.case_file);
      ce["case"] = p.counterexample ? json::parse(case_to_json(*p.counterexample)) : json(nullptr);
      if (p.counterexample && p.counterexample->labels.count("sent")) ce["sent"] = p.counterexample->labels.at("sent");
      ce["tables"] = p.tables.is_null() ? json(nullptr) : p.tables;
      e["counterexample"] = ce;
    }
    props.push_back(e);
  }
  j["properties"] = props;
  j["error_vs_n"] = report.error_vs_n;
  if (!report.mutants.empty()) {
    json m = json::array();
    for (const MutantResult& r : report.mutants) {
      json matrix = json::array();
      for (const KillCell& c : r.matrix)
        matrix.push_back({{"property", c.property}, {"status", to_string(c.status)}, {"kill", c.kill}, {"expected", c.expected}});
      m.push_back({{"name", r.name},
                   {"killed", r.killed},
                   {"killed_by", r.killed ? json(r.killed_by) : json(nullptr)},
                   {"case_name", r.killed ? json(r.case_name) : json(nullptr)},
                   {"message", r.killed ? json(r.message) : json(nullptr)},
                   {"case_file", r.case_file.empty() ? json(nullptr) : json(r.case_file)},
                   {"expected_killers", r.expected_killers},
                   {"verdict", to_string(r.verdict)},
                   {"matrix", matrix}});
    }
    j["mutants"] = m;
  }
  j["summary"] = {{"passed", count(report, Status::passed)},
                  {"failed", count(report, Status::failed)},
                  {"skipped", count(report, Status::skipped)},
                  {"crashed", count(report, Status::crashed)},
                  {"timed_out", count(report, Status::timed_out)},
                  {"inconclusive", count(report, Status::inconclusive)}};
  j["cut_short"] = cut_short_count(report);  // properties a time budget cut short: not a full pass
  return j.dump(2) + "\n";
}

std::string verify_junit(const VerifyReport& report) {
  double total = 0;
  for (const auto& p : report.properties) total += p.seconds;
  // A testcase is reported skipped when the property was skipped, is
  // INCONCLUSIVE, or passed with inconclusive cases (they are never a pass).
  auto junit_skipped = [](const PropertyResult& p) {
    return p.status == Status::skipped || p.status == Status::inconclusive ||
           (p.status == Status::passed && (p.inconclusive > 0 || !p.cut_short.empty()));
  };
  int skipped = 0;
  for (const auto& p : report.properties) skipped += junit_skipped(p);
  const int failures = count(report, Status::failed);
  const int errors = count(report, Status::crashed) + count(report, Status::timed_out);
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                   report.properties.size(), failures, errors, skipped, total);
  x += fmt::format(
      "  <testsuite name=\"attncheck verify {}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" "
      "time=\"{:.3f}\">\n",
      xml_escape(report.implementation), report.properties.size(), failures, errors, skipped, total);
  x += fmt::format("    <properties><property name=\"seed\" value=\"{}\"/><property name=\"cases\" value=\"{}\"/></properties>\n",
                   report.options.seed, report.options.cases);
  for (const PropertyResult& p : report.properties) {
    x += fmt::format("    <testcase classname=\"attncheck.verify.{}\" name=\"{}\" time=\"{:.3f}\"",
                     xml_escape(report.implementation), xml_escape(p.name), p.seconds);
    const std::string detail = fmt::format(
        "seed {}{}", report.options.seed,
        p.case_file.empty() ? ""
                            : "; case file " + p.case_file + "; replay with " +
                                  shell_command({"attncheck", "verify", "--impl", report.implementation, "--replay",
                                                 p.case_file}));
    std::string body;
    switch (p.status) {
      case Status::passed:
        if (!p.cut_short.empty())
          body = fmt::format("      <skipped message=\"{}\"/>\n", xml_escape("cut short, not a full pass: " + p.message));
        else if (p.inconclusive > 0)
          body = fmt::format("      <skipped message=\"{}\"/>\n",
                             xml_escape(fmt::format("passed {} cases; {}", p.cases, inconclusive_text(p))));
        break;
      case Status::skipped:
        body = fmt::format("      <skipped message=\"{}\"/>\n", xml_escape(p.skipped_reason));
        break;
      case Status::inconclusive:
        body = fmt::format("      <skipped message=\"{}\"/>\n", xml_escape("INCONCLUSIVE: " + p.message));
        break;
      case Status::failed:
        body = fmt::format("      <failure message=\"{}\" type=\"FAILED\">{}</failure>\n", xml_escape(p.message),
                           xml_escape(detail));
        break;
      case Status::crashed:
      case Status::timed_out:
        body = fmt::format("      <error message=\"{}\" type=\"{}\">{}</error>\n", xml_escape(p.message),
                           to_string(p.status), xml_escape(detail));
        break;
    }
    // Inconclusive and declined cases and the notes, as the test's output.
    std::vector<std::string> out;
    if (p.inconclusive > 0) out.push_back("inconclusive: " + inconclusive_text(p));
    if (p.unsupported > 0)
      out.push_back(fmt::format("declined as out of range (accepted): {} cases: {}", p.unsupported, p.unsupported_reason));
    for (const std::string& n : p.notes) out.push_back("note: " + n);
    if (!out.empty()) body += fmt::format("      <system-out>{}</system-out>\n", xml_escape(fmt::format("{}", fmt::join(out, "\n"))));
    x += body.empty() ? "/>\n" : ">\n" + body + "    </testcase>\n";
  }
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

std::string summary_line(const VerifyReport& report) {
  const int passed = count(report, Status::passed), skipped = count(report, Status::skipped);
  const int inconclusive = count(report, Status::inconclusive);
  const int failed = static_cast<int>(report.properties.size()) - passed - skipped - inconclusive;
  std::string line = fmt::format("{} passed, {} failed", passed, failed);
  if (inconclusive) line += fmt::format(", {} inconclusive", inconclusive);
  if (skipped) line += fmt::format(", {} skipped", skipped);
  int flagged = 0;
  for (const auto& p : report.properties) flagged += p.status == Status::passed && inconclusive_flagged(p);
  if (flagged)
    line += fmt::format(" ({} passed with more than {:.0f} % of cases inconclusive)", flagged, 100 * kInconclusiveFlagFraction);
  if (passed == 0 && failed == 0 && inconclusive == 0 && report.mutants.empty())
    line += "; nothing was checked, which is not a pass";
  if (const int cut = cut_short_count(report))
    line += fmt::format("; {} propert{} cut short by the time budget, so this is not a full pass", cut,
                        cut == 1 ? "y was" : "ies were");
  return line;
}

bool all_passed(const VerifyReport& report) {
  // A run in which no property passed (all skipped, or none selected) checked nothing.
  if (report.mutants.empty() && count(report, Status::passed) == 0) return false;
  // A property a time budget cut short did not run every case it should have.
  if (cut_short_count(report) > 0) return false;
  for (const auto& p : report.properties)
    if (p.status != Status::passed && p.status != Status::skipped) return false;
  // INCONCLUSIVE is not a pass (the loop above), nor an escaped mutant or one
  // killed only by properties not expected to kill it.
  for (const auto& m : report.mutants)
    if (m.verdict != MutantVerdict::killed_as_expected) return false;
  return true;
}

}  // namespace attncheck
