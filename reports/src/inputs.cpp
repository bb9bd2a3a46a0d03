// Reading and validating the input files. Every error names the file and the
// field, and is raised before the report writes anything.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "attncheck/problem.h"
#include "model.h"

namespace attncheck::report_detail {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& file, const std::string& message) {
  throw InvalidInput(fmt::format("{}: {}", file, message));
}

json read_json_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, fmt::format("cannot read the file ({})", std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::parse_error& e) {
    fail(file, fmt::format("malformed JSON: {}", e.what()));
  }
}

/// A context or name field as text, without surrounding blanks (CMake flag
/// strings often start with a space).
std::string string_or(const json& object, const char* key, const std::string& fallback = "") {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  std::string text = it->is_string() ? it->get<std::string>() : it->dump();
  const size_t first = text.find_first_not_of(" \t\n");
  if (first == std::string::npos) return fallback;
  return text.substr(first, text.find_last_not_of(" \t\n") - first + 1);
}

std::optional<double> number_or_string(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (it->is_number()) return it->get<double>();
  if (it->is_string()) {
    // AddCustomContext writes strings; accept a number written as one.
    try {
      size_t used = 0;
      const double value = std::stod(it->get<std::string>(), &used);
      if (used > 0) return value;
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

double seconds_per_unit(const std::string& file, const std::string& name, const std::string& unit) {
  if (unit == "ns") return 1e-9;
  if (unit == "us") return 1e-6;
  if (unit == "ms") return 1e-3;
  if (unit == "s") return 1.0;
  fail(file, fmt::format("benchmark '{}': field time_unit: unknown unit '{}'", name, unit));
}

/// The key:value fields of a benchmark name such as fused/n:64/d:64/mask:none/threads:1.
struct NameFields {
  std::string implementation;
  std::map<std::string, std::string> fields;
};

/// The implementation is everything before the first problem field, so a
/// name such as plugin:/opt/lib/attn.so/n:64/... keeps its path.
NameFields split_name(const std::string& name) {
  static const std::set<std::string> problem_keys = {"n", "n_q", "n_k", "d", "mask", "threads", "batch", "heads"};
  NameFields out;
  std::stringstream in(name);
  std::string part;
  bool in_implementation = true;
  while (std::getline(in, part, '/')) {
    const auto colon = part.find(':');
    const std::string key = colon == std::string::npos ? "" : part.substr(0, colon);
    if (in_implementation && !problem_keys.count(key)) {
      out.implementation += (out.implementation.empty() ? "" : "/") + part;
      continue;
    }
    in_implementation = false;
    if (colon != std::string::npos) out.fields[key] = part.substr(colon + 1);
  }
  return out;
}

std::optional<int64_t> integer_field(const NameFields& f, const std::string& key) {
  const auto it = f.fields.find(key);
  if (it == f.fields.end()) return std::nullopt;
  try {
    size_t used = 0;
    const long long value = std::stoll(it->second, &used);
    if (used == it->second.size()) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

const json& require(const std::string& file, const json& object, const char* key,
                    json::value_t type, const char* type_name, const std::string& where = "") {
  const auto it = object.find(key);
  const std::string prefix = where.empty() ? "" : where + ": ";
  if (it == object.end()) fail(file, fmt::format("{}missing field '{}'", prefix, key));
  const bool ok = type == json::value_t::number_float ? it->is_number() : it->type() == type;
  if (!ok) fail(file, fmt::format("{}field '{}' must be {}", prefix, key, type_name));
  return *it;
}

void load_bench_file(const std::string& file, Model& model) {
  const json doc = read_json_file(file);
  const std::string not_gbench = " (not a Google Benchmark JSON file: write it with `attncheck bench --json`)";
  if (!doc.is_object()) fail(file, "top level must be an object" + not_gbench);
  if (!doc.contains("context") || !doc["context"].is_object())
    fail(file, "missing object field 'context'" + not_gbench);
  if (!doc.contains("benchmarks") || !doc["benchmarks"].is_array())
    fail(file, "missing array field 'benchmarks'" + not_gbench);

  BenchRun run;
  run.file = file;
  run.context = doc["context"];
  const json& c = run.context;
  run.cpu_model = string_or(c, "cpu_model", "unknown CPU");
  run.compiler = string_or(c, "compiler", "unknown compiler");
  run.cxx_flags = string_or(c, "cxx_flags", "");
  run.simd_target = string_or(c, "simd_target", "unknown");
  run.date = string_or(c, "date", "");
  run.host_name = string_or(c, "host_name", "");
  run.library_build_type = string_or(c, "library_build_type", "");
  if (c.contains("load_avg") && c["load_avg"].is_array() && !c["load_avg"].empty() && c["load_avg"][0].is_number())
    run.load_average = c["load_avg"][0].get<double>();
  run.num_cpus = static_cast<int>(number_or_string(c, "num_cpus").value_or(0));
  run.peak_gflops = number_or_string(c, "peak_fma_gflops");
  run.peak_all = number_or_string(c, "peak_fma_gflops_all_threads");
  run.peak_threads = static_cast<int>(number_or_string(c, "peak_fma_threads").value_or(0));
  run.bandwidth_1 = number_or_string(c, "read_bandwidth_gbps_1_thread");
  run.bandwidth_all = number_or_string(c, "read_bandwidth_gbps_all_threads");
  run.bandwidth_threads = static_cast<int>(number_or_string(c, "read_bandwidth_threads").value_or(0));
  run.tensor_offset_bytes = number_or_string(c, "tensor_offset_bytes");
  run.one_thread_cpu = number_or_string(c, "one_thread_cpu");
  const size_t run_index = model.runs.size();

  // Collect per run name: the iteration rows and the median aggregate.
  struct Rows {
    std::vector<const json*> iterations;
    const json* median = nullptr;
  };
  std::map<std::string, Rows> by_run;
  std::vector<std::string> order;
  std::map<int, GBenchComplexity> complexity;  // by family_index
  const json& benchmarks = doc["benchmarks"];
  for (size_t i = 0; i < benchmarks.size(); ++i) {
    const json& b = benchmarks[i];
    const std::string where = fmt::format("benchmarks[{}]", i);
    if (!b.is_object()) fail(file, where + " must be an object");
    const std::string name = require(file, b, "name", json::value_t::string, "a string", where).get<std::string>();
    const std::string run_type = require(file, b, "run_type", json::value_t::string, "a string", where).get<std::string>();
    const std::string run_name = string_or(b, "run_name", name);
    const int family = static_cast<int>(number_or_string(b, "family_index").value_or(-1));
    if (run_type == "aggregate") {
      const std::string aggregate = string_or(b, "aggregate_name");
      if (aggregate == "BigO") {
        GBenchComplexity& g = complexity[family];
        g.big_o = string_or(b, "big_o");
        g.real_coefficient = number_or_string(b, "real_coefficient").value_or(0);
        g.cpu_coefficient = number_or_string(b, "cpu_coefficient").value_or(0);
        g.time_unit = string_or(b, "time_unit", "ns");
      } else if (aggregate == "RMS") {
        complexity[family].rms = number_or_string(b, "rms");
      } else if (aggregate == "median") {
        if (!by_run.count(run_name)) order.push_back(run_name);
        by_run[run_name].median = &b;
      }
      continue;
    }
    if (run_type != "iteration") fail(file, fmt::format("{}: field 'run_type': unknown value '{}'", where, run_type));
    // A benchmark that failed (SkipWithError) has no time; the report lists it instead.
    if (b.contains("error_occurred") && b["error_occurred"].is_boolean() && b["error_occurred"].get<bool>()) {
      // Google Benchmark writes one such row per repetition; list each benchmark once.
      const bool listed = std::any_of(model.failed_benchmarks.begin(), model.failed_benchmarks.end(),
                                      [&](const Model::FailedBenchmark& f) { return f.name == run_name && f.file == file; });
      if (!listed) model.failed_benchmarks.push_back({run_name, string_or(b, "error_message"), file});
      continue;
    }
    if (!by_run.count(run_name)) order.push_back(run_name);
    by_run[run_name].iterations.push_back(&b);
  }

  auto measure = [&](const json& b, const std::string& where) {
    const std::string name = string_or(b, "name");
    const double real = require(file, b, "real_time", json::value_t::number_float, "a number", where).get<double>();
    const std::string unit = require(file, b, "time_unit", json::value_t::string, "a string", where).get<std::string>();
    return real * seconds_per_unit(file, name, unit);
  };

  for (const std::string& run_name : order) {
    const Rows& rows = by_run[run_name];
    const NameFields fields = split_name(run_name);
    const auto n = integer_field(fields, "n");
    // A cross shape (decode, n_q != n_k) names n_q and n_k instead of n.
    const auto n_q = integer_field(fields, "n_q"), n_k = integer_field(fields, "n_k");
    const bool cross = !n && n_q && n_k;
    if (!n && !cross) {
      model.ignored_benchmarks.push_back(run_name);
      continue;
    }
    if (n && *n <= 0) fail(file, fmt::format("benchmark '{}': n must be positive", run_name));
    if (cross && (*n_q <= 0 || *n_k <= 0))
      fail(file, fmt::format("benchmark '{}': n_q and n_k must be positive", run_name));
    Measurement m;
    m.implementation = fields.implementation;
    m.n = n.value_or(0);
    m.n_q = n_q.value_or(m.n);
    m.n_k = n_k.value_or(m.n);
    m.d = integer_field(fields, "d").value_or(0);
    m.mask = fields.fields.count("mask") ? fields.fields.at("mask") : "none";
    m.benchmark = run_name;
    m.run = run_index;
    const json* source = nullptr;
    if (rows.median != nullptr) {
      source = rows.median;
      m.statistic = "median";
      m.repetitions = static_cast<int>(number_or_string(*source, "repetitions").value_or(1));
      m.time_s = measure(*source, "benchmark '" + run_name + "_median'");
    } else if (!rows.iterations.empty()) {
      // Without a median row (repetitions == 1) there is one run; if a file
      // holds several repetitions without aggregates, take their median here.
      std::vector<std::pair<double, const json*>> times;
      for (const json* b : rows.iterations) times.emplace_back(measure(*b, "benchmark '" + run_name + "'"), b);
      std::sort(times.begin(), times.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      const auto& mid = times[(times.size() - 1) / 2];
      source = mid.second;
      m.time_s = mid.first;
      m.repetitions = static_cast<int>(times.size());
      m.statistic = times.size() > 1 ? "median" : "single";
    } else {
      continue;
    }
    if (!(m.time_s > 0)) fail(file, fmt::format("benchmark '{}': field 'real_time' must be positive", run_name));
    if (rows.iterations.size() >= 2) {
      for (size_t i = 0; i < rows.iterations.size(); ++i) {
        const double t = measure(*rows.iterations[i], "benchmark '" + run_name + "'");
        if (!(t > 0))
          fail(file, fmt::format("benchmark '{}', repetition {}: field 'real_time' must be positive", run_name, i + 1));
        m.time_min_s = std::min(m.time_min_s.value_or(t), t);
        m.time_max_s = std::max(m.time_max_s.value_or(t), t);
      }
    }
    m.threads = static_cast<int>(integer_field(fields, "threads").value_or(
        static_cast<int64_t>(number_or_string(*source, "threads").value_or(1))));
    m.family_index = static_cast<int>(number_or_string(*source, "family_index").value_or(-1));
    if (const auto flops = number_or_string(*source, "flops")) m.gflops = *flops / 1e9;
    else if (const auto gflops = number_or_string(*source, "gflops")) m.gflops = *gflops;
    m.peak_fraction = number_or_string(*source, "peak_fraction");
    if (const auto bytes = number_or_string(*source, "bytes")) m.gbytes_per_s = *bytes / 1e9;
    m.compute_s = number_or_string(*source, "compute_seconds");
    // The floors timed call by call beside it (bench --paired-floors): all five or none.
    const std::pair<const char*, std::optional<double>*> paired[] = {
        {"read_floor_seconds", &m.paired_read_floor_s}, {"fma_floor_seconds", &m.paired_fma_floor_s},
        {"over_read_floor", &m.paired_over_read},       {"over_fma_floor", &m.paired_over_fma},
        {"over_roofline", &m.paired_over_roofline}};
    size_t paired_found = 0;
    for (const auto& [key, field] : paired) {
      if (!source->contains(key)) continue;
      *field = number_or_string(*source, key);
      if (!*field || !std::isfinite(**field) || !(**field > 0))
        fail(file, fmt::format("benchmark '{}': counter '{}' must be a positive number", run_name, key));
      ++paired_found;
    }
    if (paired_found != 0 && paired_found != std::size(paired))
      fail(file, fmt::format("benchmark '{}': the paired-floor counters come together (read_floor_seconds, "
                             "fma_floor_seconds, over_read_floor, over_fma_floor, over_roofline); {} of 5 found",
                             run_name, paired_found));
    if (const auto peak = peak_for(run, m.threads); !m.peak_fraction && m.gflops && peak && *peak > 0)
      m.peak_fraction = *m.gflops / *peak;
    run.repetitions = std::max(run.repetitions, m.repetitions);

    if (cross) {
      for (const Measurement& other : model.cross)
        if (other.implementation == m.implementation && other.n_q == m.n_q && other.n_k == m.n_k &&
            other.d == m.d && other.mask == m.mask && other.threads == m.threads)
          fail(file, fmt::format("benchmark '{}' duplicates '{}' from {} (same implementation and problem)",
                                 run_name, other.benchmark, model.runs.size() > other.run ? model.runs[other.run].file : file));
      model.cross.push_back(m);
      continue;
    }
    // Attach to the series of this implementation and configuration.
    const Config config{m.d, m.mask, m.threads};
    auto it = std::find_if(model.series.begin(), model.series.end(), [&](const Series& s) {
      return s.implementation == m.implementation && s.config == config;
    });
    if (it == model.series.end()) {
      Series s;
      s.implementation = m.implementation;
      s.config = config;
      s.run = run_index;
      model.series.push_back(s);
      it = model.series.end() - 1;
    }
    for (const Measurement& other : it->points)
      if (other.n == m.n)
        fail(file, fmt::format("benchmark '{}' duplicates '{}' from {} (same implementation and problem)",
                               run_name, other.benchmark, model.runs.size() > other.run ? model.runs[other.run].file : file));
    if (complexity.count(m.family_index)) it->gbench = complexity.at(m.family_index);
    it->points.push_back(m);
  }
  run.statistic = run.repetitions > 1
                      ? fmt::format("median of {} repetitions", run.repetitions)
                      : "single run (1 repetition)";
  model.runs.push_back(run);
}

const std::set<std::string> property_statuses = {"PASSED", "FAILED", "SKIPPED", "CRASHED", "TIMED_OUT"};
// Version 2 added INCONCLUSIVE.
const std::set<std::string> property_statuses_v2 = {"PASSED", "FAILED", "SKIPPED", "CRASHED", "TIMED_OUT", "INCONCLUSIVE"};

void load_verify_file(const std::string& file, Model& model) {
  const json doc = read_json_file(file);
  if (!doc.is_object()) fail(file, "top level must be an object (not a verify JSON file)");
  const auto version = doc.find("json_schema_version");
  if (version == doc.end() && doc.contains("power_json_version"))
    fail(file, "a power JSON file (field 'power_json_version', from `attncheck verify --power`) given as verify "
               "JSON: pass it with --power");
  if (version == doc.end())
    fail(file, "missing field 'json_schema_version' (not a verify JSON file: write it with `attncheck verify --json FILE`)");
  if (!version->is_number_integer())
    fail(file, "field 'json_schema_version' must be an integer");
  const int64_t schema = version->get<int64_t>();
  if (schema < oldest_verify_json_schema_version || schema > verify_json_schema_version)
    fail(file, fmt::format("field 'json_schema_version' is {}; this attncheck reads versions {} to {}", schema,
                           oldest_verify_json_schema_version, verify_json_schema_version));
  const json& impl = require(file, doc, "implementation", json::value_t::object, "an object");
  VerifyRun run;
  run.file = file;
  run.implementation = require(file, impl, "name", json::value_t::string, "a string", "implementation").get<std::string>();
  run.precision = string_or(impl, "precision");
  run.declared_name = string_or(impl, "declared_name");
  run.schema_version = static_cast<int>(schema);
  const json& properties = require(file, doc, "properties", json::value_t::array, "an array");
  for (size_t i = 0; i < properties.size(); ++i) {
    const std::string where = fmt::format("properties[{}]", i);
    const json& p = properties[i];
    if (!p.is_object()) fail(file, where + " must be an object");
    require(file, p, "name", json::value_t::string, "a string", where);
    const std::string status = require(file, p, "status", json::value_t::string, "a string", where).get<std::string>();
    if (!(schema >= 2 ? property_statuses_v2 : property_statuses).count(status))
      fail(file, fmt::format("{}: field 'status': unknown value '{}'", where, status));
    for (const char* count : {"inconclusive", "unsupported"})
      if (p.contains(count)) require(file, p, count, json::value_t::number_float, "a number", where);
    if (p.contains("notes")) {
      const json& notes = require(file, p, "notes", json::value_t::array, "an array", where);
      for (const json& n : notes)
        if (!n.is_string()) fail(file, fmt::format("{}: field 'notes' must hold strings", where));
    }
  }
  if (doc.contains("mutants")) {
    const json& mutants = require(file, doc, "mutants", json::value_t::array, "an array");
    for (size_t i = 0; i < mutants.size(); ++i) {
      const std::string where = fmt::format("mutants[{}]", i);
      if (!mutants[i].is_object()) fail(file, where + " must be an object");
      require(file, mutants[i], "name", json::value_t::string, "a string", where);
      if (mutants[i].contains("matrix")) {
        const json& matrix = require(file, mutants[i], "matrix", json::value_t::array, "an array", where);
        for (const json& cell : matrix)
          if (!cell.is_object() || !cell.contains("property") || !cell["property"].is_string())
            fail(file, fmt::format("{}: field 'matrix' must hold objects with a string 'property'", where));
      }
    }
  }
  if (doc.contains("error_vs_n")) {
    const json& rows = require(file, doc, "error_vs_n", json::value_t::array, "an array");
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string where = fmt::format("error_vs_n[{}]", i);
      if (!rows[i].is_object()) fail(file, where + " must be an object");
      require(file, rows[i], "n", json::value_t::number_float, "a number", where);
    }
  }
  run.doc = doc;
  model.verifies.push_back(std::move(run));
}

// ---- Merging the shards of one verify run (`attncheck verify --shard I/N`, docs/ci.md).

struct ShardInfo {
  int index = 1, count = 1, case_chunks = 1;
  std::vector<std::string> properties;
};

ShardInfo shard_info(const VerifyRun& run) {
  ShardInfo info;
  const auto it = run.doc.find("shard");
  if (it == run.doc.end() || it->is_null()) return info;
  if (!it->is_object()) fail(run.file, "field 'shard' must be an object");
  auto integer = [&](const char* key) {
    const auto f = it->find(key);
    if (f == it->end() || !f->is_number_integer())
      fail(run.file, fmt::format("shard: field '{}' must be an integer", key));
    return f->get<int>();
  };
  info.index = integer("index");
  info.count = integer("count");
  info.case_chunks = integer("case_chunks");
  if (info.count < 1 || info.index < 1 || info.index > info.count || info.case_chunks < 1)
    fail(run.file, fmt::format("shard: index {} of count {} with {} case chunks is not a shard (1 <= index <= count, "
                               "case_chunks >= 1)", info.index, info.count, info.case_chunks));
  const auto props = it->find("properties");
  if (props == it->end() || !props->is_array()) fail(run.file, "shard: field 'properties' must be an array");
  for (const json& p : *props) {
    if (!p.is_string()) fail(run.file, "shard: field 'properties' must hold strings");
    info.properties.push_back(p.get<std::string>());
  }
  return info;
}

// The chunks of each property shard `index` of `count` runs: units (property,
// chunk) in property order then chunk order, unit u to shard u mod count + 1.
std::map<std::string, std::vector<int>> shard_units(const ShardInfo& info, int index) {
  std::map<std::string, std::vector<int>> units;
  int unit = 0;
  for (const std::string& p : info.properties)
    for (int chunk = 0; chunk < info.case_chunks; ++chunk, ++unit)
      if (unit % info.count + 1 == index) units[p].push_back(chunk);
  return units;
}

bool is_failure_status(const std::string& s) { return s == "FAILED" || s == "CRASHED" || s == "TIMED_OUT"; }

// One property from its units in chunk order, by the rule of attncheck's
// merge_chunks (properties/src/verify.cpp): counts add up, the first failing
// unit gives the verdict, else the first INCONCLUSIVE, PASSED, SKIPPED one.
json merge_units(const std::vector<const json*>& units) {
  const json* verdict = nullptr;
  for (const char* want : {"FAIL", "INCONCLUSIVE", "PASSED", "SKIPPED"})
    for (const json* u : units) {
      const std::string status = u->value("status", std::string());
      if (!verdict && (std::string(want) == "FAIL" ? is_failure_status(status) : status == want)) verdict = u;
    }
  if (!verdict) verdict = units.front();
  json e = *verdict;
  auto sum = [&](const char* key) {
    double total = 0;
    bool integral = true;
    for (const json* u : units)
      if (u->contains(key) && (*u)[key].is_number()) {
        total += (*u)[key].get<double>();
        integral = integral && (*u)[key].is_number_integer();
      }
    if (units.front()->contains(key)) e[key] = integral ? json(static_cast<int64_t>(total)) : json(total);
  };
  for (const char* key : {"cases", "discarded", "inconclusive", "unsupported", "timed_out_calls", "seconds"}) sum(key);
  auto first_text = [&](const char* key) {
    for (const json* u : units)
      if (u->contains(key) && (*u)[key].is_string() && !(*u)[key].get<std::string>().empty()) return (*u)[key];
    return json(nullptr);
  };
  const int64_t cases = e.value("cases", int64_t{0}), inconclusive = e.value("inconclusive", int64_t{0});
  if (e.contains("inconclusive_reason")) e["inconclusive_reason"] = inconclusive > 0 ? first_text("inconclusive_reason") : json(nullptr);
  if (e.contains("unsupported_reason"))
    e["unsupported_reason"] = e.value("unsupported", int64_t{0}) > 0 ? first_text("unsupported_reason") : json(nullptr);
  if (e.contains("cut_short")) e["cut_short"] = first_text("cut_short");
  if (e.contains("inconclusive_flagged"))
    e["inconclusive_flagged"] = inconclusive > 0 && static_cast<double>(inconclusive) > 0.2 * static_cast<double>(cases + inconclusive);
  // Notes: distinct, in order, at most 20 (then a count of the others).
  json notes = json::array();
  int dropped = 0;
  for (const json* u : units)
    if (u->contains("notes") && (*u)["notes"].is_array())
      for (const json& n : (*u)["notes"]) {
        if (std::find(notes.begin(), notes.end(), n) != notes.end()) continue;
        if (notes.size() < 20) notes.push_back(n);
        else ++dropped;
      }
  if (dropped > 0) notes.push_back(fmt::format("({} further distinct notes not kept)", dropped));
  if (e.contains("notes")) e["notes"] = notes;
  std::set<std::string> oracles;
  for (const json* u : units) {
    if (u->contains("oracles") && (*u)["oracles"].is_array())
      for (const json& o : (*u)["oracles"])
        if (o.is_string()) oracles.insert(o.get<std::string>());
    if (u->contains("oracle") && (*u)["oracle"].is_string()) oracles.insert((*u)["oracle"].get<std::string>());
  }
  e.erase("oracles");
  if (e.contains("oracle")) e["oracle"] = oracles.empty() ? json(nullptr) : json(*oracles.rbegin());
  if (oracles.size() > 1) e["oracles"] = std::vector<std::string>(oracles.begin(), oracles.end());
  if (!is_failure_status(e.value("status", std::string())) && e.contains("worst_error_over_bound")) {
    json worst = nullptr;
    for (const json* u : units)
      if (u->contains("worst_error_over_bound") && (*u)["worst_error_over_bound"].is_number() &&
          (worst.is_null() || (*u)["worst_error_over_bound"].get<double>() > worst.get<double>()))
        worst = (*u)["worst_error_over_bound"];
    e["worst_error_over_bound"] = worst;
  }
  json chunks = json::array();
  for (const json* u : units)
    if (u->contains("chunks") && (*u)["chunks"].is_array())
      for (const json& c : (*u)["chunks"]) chunks.push_back(c);
  e["chunks"] = chunks;
  return e;
}

std::string shard_name(const VerifyRun& run, const ShardInfo& info) {
  return fmt::format("shard {}/{} ({})", info.index, info.count, run.file);
}

// Checks that the shards of one implementation fit together and merges them
// into one run, as the unsharded run would have written it.
VerifyRun merge_shards(std::vector<std::pair<VerifyRun, ShardInfo>> shards) {
  std::sort(shards.begin(), shards.end(), [](const auto& a, const auto& b) { return a.second.index < b.second.index; });
  const auto& [first, first_info] = shards.front();
  const std::string impl = first.implementation;
  // Every setting that decides which cases run must agree.
  auto same = [&](const VerifyRun& run, const ShardInfo& info, const std::string& what, const json& mine, const json& theirs) {
    if (mine != theirs)
      fail(run.file, fmt::format("shard {}/{} of {} has {} {}, but {} has {}: shards of one run must agree (run every "
                                 "shard with the same options)",
                                 info.index, info.count, impl, what, mine.dump(), shard_name(first, first_info), theirs.dump()));
  };
  for (const auto& [run, info] : shards) {
    same(run, info, "json_schema_version", run.doc["json_schema_version"], first.doc["json_schema_version"]);
    same(run, info, "seed", run.doc.value("seed", json()), first.doc.value("seed", json()));
    same(run, info, "cases_per_property", run.doc.value("cases_per_property", json()), first.doc.value("cases_per_property", json()));
    same(run, info, "max_n", run.doc.value("max_n", json()), first.doc.value("max_n", json()));
    same(run, info, "precision", json(run.precision), json(first.precision));
    same(run, info, "shard count", json(info.count), json(first_info.count));
    same(run, info, "case_chunks", json(info.case_chunks), json(first_info.case_chunks));
    same(run, info, "properties", json(info.properties), json(first_info.properties));
  }
  for (size_t i = 1; i < shards.size(); ++i)
    if (shards[i].second.index == shards[i - 1].second.index)
      fail(shards[i].first.file, fmt::format("is shard {}/{} of {}, like {}: overlapping shards (give each shard once)",
                                             shards[i].second.index, shards[i].second.count, impl,
                                             shards[i - 1].first.file));
  std::vector<std::string> have, missing;
  for (const auto& [run, info] : shards) have.push_back(fmt::format("{}/{} ({})", info.index, info.count, run.file));
  for (int i = 1; i <= first_info.count; ++i)
    if (std::none_of(shards.begin(), shards.end(), [&](const auto& s) { return s.second.index == i; }))
      missing.push_back(fmt::format("{}/{}", i, first_info.count));
  if (!missing.empty())
    throw InvalidInput(fmt::format("report: the verify shards of {} are incomplete: given {}; missing {} (pass every "
                                   "shard's JSON with --verify)",
                                   impl, fmt::join(have, ", "), fmt::join(missing, ", ")));
  // Each shard must hold exactly its units.
  std::map<std::string, std::vector<std::pair<int, const json*>>> by_property;
  for (const auto& [run, info] : shards) {
    const auto expected = shard_units(info, info.index);
    std::map<std::string, std::vector<int>> got;
    const json& props = run.doc["properties"];
    for (size_t i = 0; i < props.size(); ++i) {
      const json& p = props[i];
      const std::string name = p["name"].get<std::string>();
      if (!p.contains("chunks") || !p["chunks"].is_array() || p["chunks"].size() != 1 || !p["chunks"][0].is_number_integer())
        fail(run.file, fmt::format("properties[{}] ({}): field 'chunks' must hold the one case chunk of this unit", i, name));
      const int chunk = p["chunks"][0].get<int>();
      got[name].push_back(chunk);
      by_property[name].push_back({chunk, &p});
    }
    if (got != expected) {
      std::vector<std::string> want;
      for (const auto& [name, chunks] : expected) want.push_back(fmt::format("{} {}", name, fmt::join(chunks, ",")));
      fail(run.file, fmt::format("shard {}/{} does not hold the units (property chunk) this shard runs: expected {}",
                                 info.index, info.count, fmt::join(want, "; ")));
    }
  }
  VerifyRun merged = first;
  std::vector<std::string> files;
  json from = json::array();
  for (const auto& [run, info] : shards) {
    files.push_back(run.file);
    from.push_back({{"file", run.file}, {"index", info.index}});
  }
  merged.file = fmt::format("{}", fmt::join(files, " + "));
  json props = json::array();
  std::map<std::string, int> summary = {{"PASSED", 0}, {"FAILED", 0}, {"SKIPPED", 0}, {"CRASHED", 0},
                                        {"TIMED_OUT", 0}, {"INCONCLUSIVE", 0}};
  int cut_short = 0;
  for (const std::string& name : first_info.properties) {
    auto& units = by_property[name];
    if (units.empty()) continue;
    std::sort(units.begin(), units.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<const json*> ordered;
    for (const auto& u : units) ordered.push_back(u.second);
    json e = merge_units(ordered);
    ++summary[e["status"].get<std::string>()];
    cut_short += e.contains("cut_short") && e["cut_short"].is_string();
    props.push_back(std::move(e));
  }
  merged.doc["properties"] = props;
  merged.doc["shard"] = {{"index", 1}, {"count", 1}, {"case_chunks", first_info.case_chunks},
                         {"properties", first_info.properties}, {"merged_from", from}};
  merged.doc["summary"] = {{"passed", summary["PASSED"]}, {"failed", summary["FAILED"]}, {"skipped", summary["SKIPPED"]},
                           {"crashed", summary["CRASHED"]}, {"timed_out", summary["TIMED_OUT"]},
                           {"inconclusive", summary["INCONCLUSIVE"]}};
  merged.doc["cut_short"] = cut_short;
  return merged;
}

// Replaces the shards of each implementation by their merged run.
void merge_verify_shards(Model& model) {
  std::vector<VerifyRun> kept;
  std::map<std::string, std::vector<std::pair<VerifyRun, ShardInfo>>> shards;  // by implementation
  std::vector<std::string> order;
  for (VerifyRun& run : model.verifies) {
    const ShardInfo info = shard_info(run);
    if (info.count == 1) {
      kept.push_back(std::move(run));
      continue;
    }
    if (run.doc.contains("mutants")) fail(run.file, "a shard holds mutants; --mutants runs are not sharded");
    if (!shards.count(run.implementation)) order.push_back(run.implementation);
    shards[run.implementation].push_back({std::move(run), info});
  }
  for (const std::string& impl : order) {
    try {
      kept.push_back(merge_shards(shards[impl]));
    } catch (const InvalidInput& e) {
      // Shards of another implementation may be the ones meant.
      std::vector<std::string> others;
      for (const auto& [name, list] : shards)
        if (name != impl)
          for (const auto& [run, info] : list)
            others.push_back(fmt::format("{} is shard {}/{} of {}", run.file, info.index, info.count, name));
      if (others.empty()) throw;
      throw InvalidInput(fmt::format("{} (other shards given, of different implementations: {})", e.what(),
                                     fmt::join(others, "; ")));
    }
  }
  model.verifies = std::move(kept);
}

/// A number, null, or the string "inf" (power JSON writes an infinite ratio so).
std::optional<double> ratio_field(const std::string& file, const json& object, const char* key,
                                  const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (it->is_number()) return it->get<double>();
  if (it->is_string() && it->get<std::string>() == "inf") return std::numeric_limits<double>::infinity();
  fail(file, fmt::format("{}: field '{}' must be a number, null or \"inf\"", where, key));
}

const std::set<std::string> tightness_verdicts = {"PASSED", "FAILED", "INCONCLUSIVE", "DECLINED"};

PowerRun load_power_file(const std::string& file) {
  const json doc = read_json_file(file);
  if (!doc.is_object()) fail(file, "top level must be an object (not a power JSON file)");
  const auto version = doc.find("power_json_version");
  if (version == doc.end() && doc.contains("json_schema_version"))
    fail(file, "a verify JSON file (field 'json_schema_version') given as power JSON: pass it with --verify");
  if (version == doc.end())
    fail(file, "missing field 'power_json_version' (not a power JSON file: write it with "
               "`attncheck verify --power --json FILE`)");
  if (!version->is_number_integer()) fail(file, "field 'power_json_version' must be an integer");
  const int64_t v = version->get<int64_t>();
  if (v < oldest_power_json_version || v > power_json_version)
    fail(file, fmt::format("field 'power_json_version' is {}; this attncheck reads version{} {}", v,
                           oldest_power_json_version == power_json_version ? "" : "s",
                           oldest_power_json_version == power_json_version
                               ? std::to_string(power_json_version)
                               : fmt::format("{} to {}", oldest_power_json_version, power_json_version)));
  PowerRun run;
  run.file = file;
  run.version = static_cast<int>(v);
  if (doc.contains("settings") && doc["settings"].is_object()) {
    const json& settings = doc["settings"];
    if (settings.contains("implementations") && settings["implementations"].is_array())
      for (const json& name : settings["implementations"])
        if (name.is_string()) run.implementations.push_back(name.get<std::string>());
    if (settings.contains("epsilon_range") && settings["epsilon_range"].is_array() &&
        settings["epsilon_range"].size() == 2 && settings["epsilon_range"][0].is_number() &&
        settings["epsilon_range"][1].is_number()) {
      run.epsilon_lo = settings["epsilon_range"][0].get<double>();
      run.epsilon_hi = settings["epsilon_range"][1].get<double>();
    }
  }
  const json& rows = require(file, doc, "rows", json::value_t::array, "an array");
  if (rows.empty()) fail(file, "field 'rows' is empty (nothing to report)");
  std::set<std::tuple<int64_t, std::string, std::string>> seen;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string where = fmt::format("rows[{}]", i);
    const json& r = rows[i];
    if (!r.is_object()) fail(file, where + " must be an object");
    PowerPoint p;
    const double n = require(file, r, "n", json::value_t::number_float, "a number", where).get<double>();
    if (!(n >= 1) || n != std::floor(n)) fail(file, fmt::format("{}: field 'n' must be a positive integer", where));
    p.n = static_cast<int64_t>(n);
    p.input = require(file, r, "input", json::value_t::string, "a string", where).get<std::string>();
    p.mask = require(file, r, "mask", json::value_t::string, "a string", where).get<std::string>();
    p.n_q = static_cast<int64_t>(number_or_string(r, "n_q").value_or(n));
    p.n_k = static_cast<int64_t>(number_or_string(r, "n_k").value_or(n));
    p.d = static_cast<int64_t>(number_or_string(r, "d").value_or(0));
    p.oracle = string_or(r, "oracle", "—");
    p.seconds = number_or_string(r, "seconds").value_or(0);
    if (!seen.insert({p.n, p.input, p.mask}).second)
      fail(file, fmt::format("{}: n={} input={} mask={} appears twice", where, p.n, p.input, p.mask));
    const json& tightness = require(file, r, "tightness", json::value_t::object, "an object", where);
    std::vector<std::string> order = run.implementations;
    for (const auto& [name, t] : tightness.items())
      if (std::find(order.begin(), order.end(), name) == order.end()) {
        order.push_back(name);
        run.implementations.push_back(name);
      }
    for (const std::string& name : order) {
      if (!tightness.contains(name)) continue;
      const json& t = tightness[name];
      const std::string at = fmt::format("{}: tightness.{}", where, name);
      if (!t.is_object()) fail(file, at + " must be an object");
      PowerPoint::Tightness out;
      out.implementation = name;
      out.error_over_bound = ratio_field(file, t, "error_over_bound", at);
      out.max_abs_error = number_or_string(t, "max_abs_error");
      out.verdict = require(file, t, "verdict", json::value_t::string, "a string", at).get<std::string>();
      if (!tightness_verdicts.count(out.verdict))
        fail(file, fmt::format("{}: field 'verdict': unknown value '{}'", at, out.verdict));
      out.message = string_or(t, "message");
      p.tightness.push_back(out);
    }
    if (r.contains("power")) {
      const json& power = require(file, r, "power", json::value_t::object, "an object", where);
      const std::string at = where + ": power";
      p.perturbed = string_or(power, "perturbed");
      p.smallest_caught = ratio_field(file, power, "smallest_epsilon_caught", at);
      p.largest_missed = ratio_field(file, power, "largest_epsilon_missed", at);
      p.caught_at_lowest = power.value("caught_at_lowest", false);
      p.caught_at_highest = power.value("caught_at_highest", p.smallest_caught.has_value());
    }
    run.points.push_back(std::move(p));
  }
  // By n; within an n, in the file's order (attncheck writes uniform before normal, none before causal).
  std::stable_sort(run.points.begin(), run.points.end(),
                   [](const PowerPoint& a, const PowerPoint& b) { return a.n < b.n; });
  run.doc = doc;
  return run;
}

}  // namespace

const PowerPoint::Tightness* PowerPoint::find(const std::string& implementation) const {
  for (const Tightness& t : tightness)
    if (t.implementation == implementation) return &t;
  return nullptr;
}

bool PowerRun::has(const std::string& implementation) const {
  return std::any_of(points.begin(), points.end(), [&](const PowerPoint& p) { return p.find(implementation); });
}

bool Config::operator<(const Config& other) const {
  return std::make_tuple(d, mask != "none", mask, threads) <
         std::make_tuple(other.d, other.mask != "none", other.mask, other.threads);
}

std::string Config::label() const {
  return fmt::format("d={}, mask={}, threads={}", d == 0 ? std::string("?") : std::to_string(d), mask, threads);
}

Model load_inputs(const ReportInputs& inputs) {
  if (inputs.bench_files.empty() && inputs.verify_files.empty() && inputs.power_file.empty())
    throw InvalidInput("report: no input files (give --bench FILE, --verify FILE and/or --power FILE)");
  Model model;
  for (const std::string& file : inputs.bench_files) {
    const size_t before = model.series.size(), cross_before = model.cross.size();
    size_t points_before = 0;
    for (const Series& s : model.series) points_before += s.points.size();
    load_bench_file(file, model);
    size_t points_after = 0;
    for (const Series& s : model.series) points_after += s.points.size();
    if (points_after == points_before && model.series.size() == before && model.cross.size() == cross_before &&
        std::none_of(model.failed_benchmarks.begin(), model.failed_benchmarks.end(),
                     [&](const Model::FailedBenchmark& f) { return f.file == file; }))
      fail(file, "field 'benchmarks': no benchmark named <implementation>/n:<n>/... or <implementation>/n_q:<n_q>/n_k:<n_k>/... (nothing to report)");
  }
  for (const std::string& file : inputs.verify_files) load_verify_file(file, model);
  merge_verify_shards(model);
  if (!inputs.power_file.empty()) model.power = load_power_file(inputs.power_file);
  for (Series& s : model.series)
    std::sort(s.points.begin(), s.points.end(),
              [](const Measurement& a, const Measurement& b) { return a.n < b.n; });
  std::sort(model.series.begin(), model.series.end(), [](const Series& a, const Series& b) {
    return std::tie(a.config, a.implementation) < std::tie(b.config, b.implementation);
  });
  return model;
}

}  // namespace attncheck::report_detail
