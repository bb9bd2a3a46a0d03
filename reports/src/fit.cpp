// The complexity fit, verdicts and the headline rows.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "model.h"

namespace attncheck {

std::optional<PowerFit> fit_power_law(const std::vector<std::pair<double, double>>& n_time,
                                      double min_n) {
  std::vector<std::pair<double, double>> usable;
  for (const auto& [n, t] : n_time)
    if (n > 0 && t > 0 && std::isfinite(n) && std::isfinite(t)) usable.emplace_back(n, t);
  auto distinct_n = [](const std::vector<std::pair<double, double>>& points) {
    std::set<double> ns;
    for (const auto& p : points) ns.insert(p.first);
    return ns.size();
  };
  std::vector<std::pair<double, double>> large;
  for (const auto& p : usable)
    if (p.first >= min_n) large.push_back(p);
  PowerFit fit;
  const std::vector<std::pair<double, double>>* points = &large;
  if (distinct_n(large) < 2) {
    points = &usable;
    fit.all_points = true;
  }
  if (distinct_n(*points) < 2) return std::nullopt;

  // Ordinary least squares of y = log t on x = log n.
  double sx = 0, sy = 0;
  for (const auto& [n, t] : *points) {
    sx += std::log(n);
    sy += std::log(t);
  }
  const double count = static_cast<double>(points->size());
  const double mx = sx / count, my = sy / count;
  double sxx = 0, sxy = 0;
  for (const auto& [n, t] : *points) {
    sxx += (std::log(n) - mx) * (std::log(n) - mx);
    sxy += (std::log(n) - mx) * (std::log(t) - my);
  }
  fit.exponent = sxy / sxx;
  fit.coefficient = std::exp(my - fit.exponent * mx);
  fit.points = static_cast<int>(points->size());
  fit.n_min = points->front().first;
  fit.n_max = points->front().first;
  for (const auto& p : *points) {
    fit.n_min = std::min(fit.n_min, p.first);
    fit.n_max = std::max(fit.n_max, p.first);
  }
  return fit;
}

}  // namespace attncheck

namespace attncheck::report_detail {

namespace {

bool is_failure(const std::string& status) {
  return status == "FAILED" || status == "CRASHED" || status == "TIMED_OUT";
}

}  // namespace

std::string verdict_for(const Model& model, const std::string& implementation) {
  int passed = 0, skipped = 0, total = 0, mutants = 0;
  std::vector<std::string> failed, inconclusive, bad_mutants, cut_short;
  for (const VerifyRun& v : model.verifies) {
    if (v.implementation != implementation) continue;
    for (const auto& p : v.doc["properties"]) {
      ++total;
      if (p.contains("cut_short") && p["cut_short"].is_string()) cut_short.push_back(p["name"].get<std::string>());
      const std::string status = p["status"].get<std::string>();
      if (status == "PASSED") ++passed;
      else if (status == "SKIPPED") ++skipped;
      else if (status == "INCONCLUSIVE") inconclusive.push_back(p["name"].get<std::string>());
      else if (is_failure(status)) failed.push_back(p["name"].get<std::string>() +
                                                    (status == "FAILED" ? "" : " " + status));
    }
    // A mutant must be killed (version 1) by a property expected to kill it (version 2).
    if (v.doc.contains("mutants") && v.doc["mutants"].is_array())
      for (const auto& m : v.doc["mutants"]) {
        ++mutants;
        const bool ok = m.contains("verdict") ? m["verdict"] == "KILLED_AS_EXPECTED"
                                              : m.value("killed", false) == true;
        if (!ok) bad_mutants.push_back(m.value("name", std::string("?")) +
                                       (m.contains("verdict") && m["verdict"].is_string() ? " " + m["verdict"].get<std::string>() : " not killed"));
      }
  }
  if (total == 0 && mutants == 0) {
    // The floors compute no attention: there is nothing to verify.
    if (is_floor(implementation)) return "a floor, not attention";
    return "not verified";
  }
  std::vector<std::string> parts;
  if (!failed.empty()) parts.push_back(fmt::format("{} of {} properties ({})", failed.size(), total, fmt::join(failed, ", ")));
  if (!bad_mutants.empty())
    parts.push_back(fmt::format("{} of {} mutants ({})", bad_mutants.size(), mutants, fmt::join(bad_mutants, ", ")));
  if (!parts.empty()) {
    std::string text = fmt::format("FAIL: {}", fmt::join(parts, "; "));
    if (!inconclusive.empty()) text += fmt::format("; inconclusive: {}", fmt::join(inconclusive, ", "));
    return text;
  }
  if (!inconclusive.empty())
    return fmt::format("INCONCLUSIVE: {} of {} properties ({})", inconclusive.size(), total, fmt::join(inconclusive, ", "));
  if (total == 0) return fmt::format("PASS: {} mutants killed as expected", mutants);
  // As `attncheck verify` judges it: a run that checked nothing, or that a time
  // budget cut short, is not a pass.
  if (passed == 0 && mutants == 0)
    return fmt::format("NOT VERIFIED: 0 passed, {} skipped (nothing was checked)", skipped);
  if (!cut_short.empty())
    return fmt::format("NOT VERIFIED: {} passed{}; cut short by the time budget: {}", passed,
                       skipped > 0 ? fmt::format(", {} skipped", skipped) : "", fmt::join(cut_short, ", "));
  return skipped > 0 ? fmt::format("PASS: {} passed, {} skipped", passed, skipped)
                     : fmt::format("PASS: {} passed", passed);
}

std::string bench_conditions(const BenchRun& run, int threads) {
  std::string flags = run.cxx_flags.empty() ? "" : " " + run.cxx_flags;
  std::string cpus = run.num_cpus > 0 ? fmt::format(" ({} logical CPUs)", run.num_cpus) : "";
  const std::string load =
      run.load_average ? fmt::format(", load average {}", format_number(*run.load_average, 2)) : "";
  // Where the tensors start decides whether a vector load spans two cache lines.
  std::string tensors;
  if (run.tensor_offset_bytes)
    tensors = *run.tensor_offset_bytes == 0
                  ? ", tensors on a 64-byte boundary"
                  : fmt::format(", tensors {} bytes past a 64-byte boundary", format_number(*run.tensor_offset_bytes, 2));
  const std::string placed =
      threads == 1 && run.one_thread_cpu ? fmt::format(" on CPU {:.0f}", *run.one_thread_cpu) : "";
  return fmt::format("{}{}, {} thread{}{}, {}{}, SIMD target {}, {}, wall time{}{}", run.cpu_model, cpus, threads,
                     threads == 1 ? "" : "s", placed, run.compiler, flags, run.simd_target, run.statistic, tensors,
                     load);
}

std::string verify_conditions(const VerifyRun& run) {
  const auto& doc = run.doc;
  const nlohmann::json context = doc.contains("context") && doc["context"].is_object() ? doc["context"]
                                                                                         : nlohmann::json::object();
  auto text = [&](const nlohmann::json& j, const char* key, const std::string& fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
  };
  return fmt::format("{}, {} core(s), {} {}, SIMD target {}, seed {}, {} cases per property, n ≤ {}",
                     text(context, "cpu_model", "unknown CPU"), text(context, "cores_used", "?"),
                     text(context, "compiler", "unknown compiler"), text(context, "flags", ""),
                     text(context, "simd_target", "unknown"), text(doc, "seed", "?"),
                     text(doc, "cases_per_property", "?"), text(doc, "max_n", "?"));
}

std::string power_conditions(const PowerRun& run, const std::string& separator) {
  const auto& doc = run.doc;
  const nlohmann::json context = doc.contains("context") && doc["context"].is_object() ? doc["context"]
                                                                                         : nlohmann::json::object();
  const nlohmann::json settings = doc.contains("settings") && doc["settings"].is_object() ? doc["settings"]
                                                                                            : nlohmann::json::object();
  auto text = [](const nlohmann::json& j, const char* key, const std::string& fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
  };
  auto first_load = [&](const char* key) -> std::optional<double> {
    if (context.contains(key) && context[key].is_array() && !context[key].empty() && context[key][0].is_number())
      return context[key][0].get<double>();
    return std::nullopt;
  };
  // The machine, the build, the problem.
  std::string machine = text(context, "cpu_model", "unknown CPU");
  if (context.contains("logical_cpus") && context["logical_cpus"].is_number())
    machine += fmt::format(" ({} logical CPUs)", context["logical_cpus"].dump());
  const std::string threads = text(settings, "threads", text(context, "cores_used", "?"));
  machine += fmt::format(", {} thread{}", threads, threads == "1" ? "" : "s");
  const auto start = first_load("load_avg_start"), end = first_load("load_avg");
  if (start && end)
    machine += fmt::format(", load average {} at the start, {} at the end", format_number(*start, 2),
                           format_number(*end, 2));
  else if (end)
    machine += fmt::format(", load average {}", format_number(*end, 2));
  const std::string flags = text(context, "flags", "");
  std::string build = fmt::format("{}{}, SIMD target {}", text(context, "compiler", "unknown compiler"),
                                  flags.empty() ? "" : " " + flags, text(context, "simd_target", "unknown"));
  if (context.contains("date")) build += ", " + text(context, "date", "");
  int64_t d = 0;
  for (const PowerPoint& p : run.points) d = std::max(d, p.d);
  std::string problem = fmt::format("d = {}, b = h = 1", d > 0 ? std::to_string(d) : "?");
  for (const PowerPoint& p : run.points)
    if (p.n_q < p.n) {  // the first subsampled n says how
      problem += fmt::format("; from n = {}, {} evenly spaced query rows against all n keys", p.n, p.n_q);
      break;
    }
  return machine + separator + build + separator + problem;
}

std::string format_number(double value, int significant) {
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  if (value == 0) return "0";
  const double magnitude = std::abs(value);
  if (magnitude >= 1e6 || magnitude < 1e-3) return fmt::format("{:.{}e}", value, significant - 1);
  const int digits = static_cast<int>(std::floor(std::log10(magnitude))) + 1;
  return fmt::format("{:.{}f}", value, std::max(0, significant - digits));
}

std::string format_fit(const std::optional<PowerFit>& fit) {
  if (!fit) return "—";
  if (fit->all_points)
    return fmt::format("{:.2f} (all n {:g}–{:g}: fewer than 2 points with n ≥ 256)", fit->exponent, fit->n_min,
                       fit->n_max);
  return fmt::format("{:.2f} (n {:g}–{:g}, {} points)", fit->exponent, fit->n_min, fit->n_max, fit->points);
}

std::string format_speedup(const Speedup& s, int64_t own_largest_n) {
  if (!s.factor) return "— (no common n)";
  if (s.n == own_largest_n) return fmt::format("{}×", format_number(*s.factor));
  return fmt::format("{}× (n={})", format_number(*s.factor), s.n);
}

std::string format_statistic(const Measurement& m) {
  if (m.statistic != "median") return "single run";
  std::string text = fmt::format("median of {}", m.repetitions);
  if (const auto spread = m.spread())
    text += fmt::format(" ({}–{} ms, spread {} %)", format_number(*m.time_min_s * 1e3),
                        format_number(*m.time_max_s * 1e3), format_number(*spread * 100, 2));
  return text;
}

void analyse(Model& model) {
  for (Series& s : model.series) {
    std::vector<std::pair<double, double>> points;
    for (const Measurement& m : s.points) points.emplace_back(static_cast<double>(m.n), m.time_s);
    s.fit = fit_power_law(points);
  }
  std::set<std::string> benchmarked;
  for (const Series& s : model.series) {
    benchmarked.insert(s.implementation);
    HeadlineRow row;
    row.implementation = s.implementation;
    row.configuration = s.config.label();
    const Measurement& last = s.points.back();
    row.largest_n = last.n;
    row.gflops = last.gflops;
    if (last.peak_fraction) row.peak_percent = *last.peak_fraction * 100;
    row.fit = s.fit;
    for (const Series& peer : model.series) {
      if (peer.config != s.config || peer.implementation == s.implementation) continue;
      Speedup speedup;
      speedup.peer = peer.implementation;
      for (auto own = s.points.rbegin(); own != s.points.rend() && !speedup.factor; ++own)
        for (const Measurement& other : peer.points)
          if (other.n == own->n) {
            speedup.factor = other.time_s / own->time_s;
            speedup.n = own->n;
            break;
          }
      row.speedups.push_back(speedup);
    }
    row.verdict = verdict_for(model, s.implementation);
    model.headline.push_back(row);
  }
  // Implementations that were verified but not benchmarked still get a row.
  for (const VerifyRun& v : model.verifies) {
    if (benchmarked.count(v.implementation)) continue;
    benchmarked.insert(v.implementation);
    HeadlineRow row;
    row.implementation = v.implementation;
    row.verdict = verdict_for(model, v.implementation);
    model.headline.push_back(row);
  }
}

}  // namespace attncheck::report_detail
