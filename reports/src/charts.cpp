// Charts: each is a gnuplot script with its data inline (datablocks), run as a
// subprocess with the SVG terminal. Nothing here draws SVG by hand.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "attncheck/problem.h"
#include "model.h"

extern char** environ;

namespace attncheck::report_detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Runs gnuplot on the script in a private temporary directory and returns
/// what it wrote to stdout (the SVG).
std::string run_gnuplot(const std::string& gnuplot, const std::string& script, const std::string& what) {
  std::string pattern = (fs::temp_directory_path() / "attncheck-gnuplot-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error(fmt::format("cannot create a temporary directory: {}", std::strerror(errno)));
  const fs::path dir = pattern;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } cleanup{dir};
  const std::string script_path = (dir / "chart.gp").string();
  const std::string out_path = (dir / "chart.svg").string();
  const std::string err_path = (dir / "stderr.txt").string();
  {
    std::ofstream out(script_path, std::ios::binary);
    out << script;
    if (!out) throw std::runtime_error("cannot write the gnuplot script to " + script_path);
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv = {const_cast<char*>(gnuplot.c_str()), const_cast<char*>(script_path.c_str()), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, gnuplot.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    throw InvalidInput(fmt::format(
        "gnuplot: cannot run '{}' ({}); the charts need gnuplot: install the Debian package gnuplot-nox "
        "(./attncheck installs it)",
        gnuplot, std::strerror(spawned)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string err = read_whole(err_path);
    if (err.size() > 2000) err = err.substr(0, 2000) + "...";
    throw InvalidInput(fmt::format("gnuplot ('{}') failed drawing {} (exit status {}): {}", gnuplot, what,
                                   WIFEXITED(status) ? WEXITSTATUS(status) : -1, err));
  }
  std::string svg = read_whole(out_path);
  if (svg.find("<svg") == std::string::npos)
    throw InvalidInput(fmt::format("gnuplot ('{}') wrote no SVG for {}", gnuplot, what));
  return svg;
}

/// A gnuplot double-quoted string literal.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string gp_number(double value) {
  if (!std::isfinite(value)) return "NaN";
  return fmt::format("{:.9g}", value);
}

/// The common preamble: SVG terminal, plain text (no enhanced markup), the
/// conditions line at the bottom of the chart.
std::string preamble(int width, int height, const std::string& title, const std::string& conditions) {
  std::string s;
  s += fmt::format("set terminal svg size {},{} font \"sans,12\" background \"#ffffff\"\n", width, height);
  s += "set encoding utf8\nset termoption noenhanced\nset output\n";
  // The title, then the conditions on the line below it.
  s += "set label 901 " + quoted(title) + " at screen 0.5, screen 0.97 center font \",14\"\n";
  s += "set label 900 " + quoted(conditions) + " at screen 0.5, screen 0.93 center font \",10\"\n";
  s += fmt::format("set tmargin {}\n", 5 + std::count(conditions.begin(), conditions.end(), '\n'));
  s += "set grid lc rgb \"#dddddd\"\nset key below left Left reverse maxrows 6\n";
  return s;
}

/// One colour per implementation, the same in every chart.
std::map<std::string, int> implementation_colours(const Model& model) {
  std::set<std::string> names;
  for (const Series& s : model.series) names.insert(s.implementation);
  std::map<std::string, int> out;
  int next = 1;
  for (const auto& name : names) out[name] = next++;
  return out;
}

const char* palette_colour(int index) {
  static const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
                                  "#e377c2", "#17becf", "#000080", "#bcbd22", "#7f7f7f", "#aec7e8",
                                  "#ff9896", "#98df8a", "#c5b0d5", "#c49c94"};
  return colours[(index - 1) % 16];
}

std::string conditions_for(const Model& model, const std::vector<const Series*>& series) {
  std::set<size_t> runs;
  for (const Series* s : series) runs.insert(s->run);
  std::string out;
  for (size_t run : runs) {
    if (!out.empty()) out += "\n";
    out += bench_conditions(model.runs[run], series.front()->config.threads);
  }
  return out;
}

std::string series_datablock(const std::string& name, const Series& s, bool gflops) {
  std::string out = "$" + name + " << EOD\n";
  for (const Measurement& m : s.points) {
    const double y = gflops ? m.gflops.value_or(std::numeric_limits<double>::quiet_NaN()) : m.time_s * 1e3;
    out += fmt::format("{} {}\n", m.n, gp_number(y));
  }
  return out + "EOD\n";
}

std::string gbench_text(const Series& s) {
  if (!s.gbench) return "";
  std::string out = fmt::format("; GB {} coef {} {}", s.gbench->big_o, format_number(s.gbench->real_coefficient),
                                s.gbench->time_unit);
  if (s.gbench->rms) out += fmt::format(", RMS {}%", format_number(*s.gbench->rms * 100, 2));
  return out;
}

std::string fit_legend(const Series& s) {
  if (!s.fit) return s.implementation + ": no fit (one n)";
  if (s.fit->all_points)
    return fmt::format("{}: exponent {:.2f} (all n {:g}-{:g}){}", s.implementation, s.fit->exponent, s.fit->n_min,
                       s.fit->n_max, gbench_text(s));
  return fmt::format("{}: exponent {:.2f} (n {:g}-{:g}){}", s.implementation, s.fit->exponent, s.fit->n_min,
                     s.fit->n_max, gbench_text(s));
}

std::string config_stem(const Config& c) {
  std::string mask;
  for (const char ch : c.mask) mask += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '-';
  return fmt::format("d{}-{}-t{}", c.d, mask, c.threads);
}

Chart time_chart(const Model& model, const std::vector<const Series*>& series, const std::map<std::string, int>& colours) {
  const Config& config = series.front()->config;
  double n_min = 1e300, n_max = 0, log_n = 0, log_t = 0;
  int count = 0;
  for (const Series* s : series)
    for (const Measurement& m : s->points) {
      n_min = std::min(n_min, static_cast<double>(m.n));
      n_max = std::max(n_max, static_cast<double>(m.n));
      log_n += std::log(static_cast<double>(m.n));
      log_t += std::log(m.time_s * 1e3);
      ++count;
    }
  // The n² guide passes through the geometric centre of all points.
  const double guide = std::exp(log_t / count - 2 * log_n / count);
  Chart chart;
  chart.name = "time-" + config_stem(config);
  chart.section = "performance:" + config.label();
  const std::string conditions = conditions_for(model, series);
  chart.caption = fmt::format("Time per call vs n (log-log), {}. Exponents are least-squares fits of log time on "
                              "log n over the range shown. {}",
                              config.label(), conditions);
  std::string s = preamble(960, 640, fmt::format("Time per call vs n (n queries, n keys), {}; log-log", config.label()), conditions);
  s += "set logscale x 2\nset logscale y 10\nset format y \"%g\"\n";
  s += "set ylabel \"time per call (ms)\"\n";
  s += fmt::format("set xrange [{}:{}]\n", gp_number(n_min / 1.3), gp_number(n_max * 1.3));
  s += fmt::format("guide(x) = {} * x**2\n", gp_number(guide));
  std::string plot = "plot ";
  for (size_t i = 0; i < series.size(); ++i) {
    const std::string block = fmt::format("t{}", i);
    s += series_datablock(block, *series[i], false);
    plot += fmt::format("${} using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb \"{}\" title {}, ", block,
                        palette_colour(colours.at(series[i]->implementation)), quoted(fit_legend(*series[i])));
  }
  plot += "guide(x) with lines dt 2 lw 1.5 lc rgb \"#555555\" title \"n² guide\"\n";
  s += plot;
  chart.svg = s;
  return chart;
}

/// The read bandwidth a run measured with `threads` threads: the 1-thread
/// figure for one thread, the all-threads figure otherwise (as attncheck bench
/// divides by).
std::optional<double> bandwidth_for(const BenchRun& run, int threads) {
  return threads <= 1 ? run.bandwidth_1 : run.bandwidth_all;
}

Chart gflops_chart(const Model& model, const std::vector<const Series*>& series, const std::map<std::string, int>& colours) {
  const Config& config = series.front()->config;
  Chart chart;
  chart.name = "gflops-" + config_stem(config);
  chart.section = "performance:" + config.label();
  std::string conditions = conditions_for(model, series);
  // Which roof binds each point: the FMA peak unless bandwidth × intensity is lower.
  double intensity_min = 1e300, intensity_max = 0;
  std::vector<std::string> memory_bound;
  for (const Series* one : series)
    for (const Measurement& m : one->points) {
      const Roofline r = roofline(model, m);
      if (!r.intensity) continue;
      intensity_min = std::min(intensity_min, *r.intensity);
      intensity_max = std::max(intensity_max, *r.intensity);
      if (r.binds == "memory") memory_bound.push_back(fmt::format("{} n={}", one->implementation, m.n));
    }
  std::string binding;
  if (intensity_max > 0) {
    const BenchRun& run = model.runs[series.front()->run];
    const auto bandwidth = bandwidth_for(run, config.threads);
    const std::string ridge =
        bandwidth && run.peak_gflops
            ? fmt::format("; ridge {} flop/byte = FMA peak / read bandwidth {} GB/s",
                          format_number(*peak_for(run, config.threads) / *bandwidth), format_number(*bandwidth))
            : "";
    binding = fmt::format("useful flops per byte moved {}–{}{}: {}", format_number(intensity_min),
                          format_number(intensity_max), ridge,
                          ridge.empty() ? "no bandwidth in the bench context, binding roof unknown"
                          : memory_bound.empty()
                              ? "the FMA peak binds every point"
                              : fmt::format("memory bandwidth binds {}, the FMA peak the others",
                                            fmt::join(memory_bound, ", ")));
    conditions += "\n" + binding;
  }
  // The configuration's ceiling: the probe's figure for its threads (peak_for).
  std::optional<double> peak;
  for (const Series* s : series)
    if (!peak) peak = peak_for(model.runs[s->run], config.threads);
  chart.caption = fmt::format("Useful GFLOP/s (4·n_q·n_k·d, causal counts allowed pairs only) vs n, {}{}. {}",
                              config.label(),
                              peak ? fmt::format("; the dashed line is the measured FMA peak, {} GFLOP/s",
                                                 format_number(*peak))
                                   : "; no measured peak in the bench context",
                              conditions);
  std::string s = preamble(960, 640, fmt::format("Useful GFLOP/s vs n (n queries, n keys), {}", config.label()), conditions);
  s += "set logscale x 2\nset logscale y 10\nset format y \"%g\"\n";
  s += "set ylabel \"useful GFLOP/s\"\n";
  double n_min = 1e300, n_max = 0;
  for (const Series* one : series)
    for (const Measurement& m : one->points) {
      n_min = std::min(n_min, static_cast<double>(m.n));
      n_max = std::max(n_max, static_cast<double>(m.n));
    }
  s += fmt::format("set xrange [{}:{}]\n", gp_number(n_min / 1.3), gp_number(n_max * 1.3));
  std::string plot = "plot ";
  bool any = false;
  for (size_t i = 0; i < series.size(); ++i) {
    bool has = false;
    for (const Measurement& m : series[i]->points) has = has || m.gflops.has_value();
    if (!has) continue;
    any = true;
    const std::string block = fmt::format("g{}", i);
    s += series_datablock(block, *series[i], true);
    plot += fmt::format("${} using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb \"{}\" title {}, ", block,
                        palette_colour(colours.at(series[i]->implementation)), quoted(series[i]->implementation));
  }
  if (!any) return {};
  if (peak)
    plot += fmt::format("{} with lines dt 2 lw 2 lc rgb \"#000000\" title {}, ", gp_number(*peak),
                        quoted(fmt::format("measured peak {} GFLOP/s ({} thread{})", format_number(*peak), config.threads,
                                           config.threads == 1 ? "" : "s")));
  plot.resize(plot.size() - 2);
  s += plot + "\n";
  chart.svg = s;
  return chart;
}

/// Point types: which roof binds a point.
constexpr int memory_point = 7;  // filled circle
constexpr int fma_point = 5;     // filled square

/// The context fields a roofline chart prints beside the build conditions.
std::string roof_conditions(const BenchRun& run) {
  std::vector<std::string> parts;
  if (run.bandwidth_1)
    parts.push_back(fmt::format("read bandwidth {} GB/s on 1 thread{}{}", format_number(*run.bandwidth_1),
                                run.one_thread_cpu ? fmt::format(" (CPU {:.0f}, as every 1-thread run)", *run.one_thread_cpu)
                                                   : "",
                                run.bandwidth_all && run.bandwidth_threads > 1
                                    ? fmt::format(", {} GB/s on {}", format_number(*run.bandwidth_all), run.bandwidth_threads)
                                    : ""));
  if (run.peak_gflops)
    parts.push_back(fmt::format("FMA peak {} GFLOP/s per core{}", format_number(*run.peak_gflops),
                                run.peak_all && run.peak_threads > 1
                                    ? fmt::format(", {} on {} together", format_number(*run.peak_all), run.peak_threads)
                                    : ""));
  for (const char* key : {"batch", "heads"})
    if (run.context.contains(key)) {
      const json& v = run.context[key];
      parts.push_back(fmt::format("{} {}", key, v.is_string() ? v.get<std::string>() : v.dump()));
    }
  return fmt::format("{}", fmt::join(parts, ", "));
}

/// A legend's name for an implementation: long specs (exec: commands,
/// plugin paths) keep their start and end.
std::string short_name(const std::string& name) {
  if (name.size() <= 32) return name;
  return name.substr(0, 14) + "…" + name.substr(name.size() - 14);
}

/// Decode and cross shapes of one (d, mask): GB/s of K, V, Q and O against n_k,
/// one line per implementation × n_q × threads, under the measured read
/// bandwidth for 1 thread and for all threads. A point whose arithmetic
/// intensity puts it above the ridge is bound by the FMA peak instead: it is
/// drawn as a square, with that roof (peak / intensity, in GB/s) dotted.
Chart decode_chart(const Model& model, int64_t d, const std::string& mask) {
  std::vector<const Measurement*> points;
  for (const Measurement& m : model.cross)
    if (m.d == d && m.mask == mask && m.gbytes_per_s) points.push_back(&m);
  if (points.empty()) return {};
  // Lines in first-met order of (implementation, n_q, threads); colours per (implementation, n_q).
  std::vector<std::tuple<std::string, int64_t, int>> keys;
  std::vector<std::pair<std::string, int64_t>> colour_keys;
  for (const Measurement* m : points) {
    const auto key = std::make_tuple(m->implementation, m->n_q, m->threads);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    const auto colour_key = std::make_pair(m->implementation, m->n_q);
    if (std::find(colour_keys.begin(), colour_keys.end(), colour_key) == colour_keys.end())
      colour_keys.push_back(colour_key);
  }
  std::sort(keys.begin(), keys.end());
  std::sort(colour_keys.begin(), colour_keys.end());
  std::set<size_t> runs;
  double x_min = 1e300, x_max = 0, y_max = 0;
  for (const Measurement* m : points) {
    runs.insert(m->run);
    x_min = std::min(x_min, static_cast<double>(m->n_k));
    x_max = std::max(x_max, static_cast<double>(m->n_k));
    y_max = std::max(y_max, *m->gbytes_per_s);
  }
  const BenchRun& first = model.runs[*runs.begin()];
  std::string conditions;
  int max_threads = 1;
  for (const Measurement* m : points) max_threads = std::max(max_threads, m->threads);
  std::set<int> thread_counts;
  for (const Measurement* m : points) thread_counts.insert(m->threads);
  for (size_t run : runs) {
    if (!conditions.empty()) conditions += "\n";
    std::string line = bench_conditions(model.runs[run], max_threads);
    if (thread_counts.size() > 1) {  // bench_conditions names one thread count
      const std::string one = fmt::format(", {} threads,", max_threads);
      if (const size_t at = line.find(one); at != std::string::npos)
        line.replace(at, one.size(), fmt::format(", {} threads,", fmt::join(thread_counts, " and ")));
    }
    conditions += line + "\n" + roof_conditions(model.runs[run]);
  }

  // Two legend columns; the chart grows with its legend.
  const size_t entries = keys.size() + 4;
  const size_t legend_rows = (entries + 1) / 2;
  Chart chart;
  chart.name = fmt::format("decode-d{}-{}", d, mask);
  chart.section = "decode";
  std::string s = preamble(1100, 560 + 18 * static_cast<int>(legend_rows),
                           fmt::format("Decode and cross shapes: GB/s moved vs n_k (d={}, mask={}), under the read-bandwidth roof",
                                       d, mask),
                           conditions);
  s += "set logscale x 2\nset ylabel \"GB/s moved (K and V once, Q and O)\"\n";
  s += "set datafile missing \"NaN\"\n";
  std::string plot = "plot ";
  bool any_fma = false;
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto& [impl, n_q, threads] = keys[i];
    const int colour_index = static_cast<int>(std::find(colour_keys.begin(), colour_keys.end(),
                                                        std::make_pair(impl, n_q)) - colour_keys.begin()) + 1;
    std::vector<const Measurement*> line;
    for (const Measurement* m : points)
      if (m->implementation == impl && m->n_q == n_q && m->threads == threads) line.push_back(m);
    std::sort(line.begin(), line.end(), [](const Measurement* a, const Measurement* b) { return a->n_k < b->n_k; });
    // An implementation that reported its own compute time for every point is
    // charted by it (bytes over compute time): its wall time measures the isolation.
    const bool own_time = std::all_of(line.begin(), line.end(), [](const Measurement* m) { return m->compute_s.has_value(); });
    // Columns: n_k, GB/s, GB/s where memory binds, GB/s where the FMA peak binds, that roof in GB/s.
    s += fmt::format("$x{} << EOD\n", i);
    bool has_fma = false;
    for (const Measurement* m : line) {
      const Roofline r = roofline(model, *m);
      const bool fma = r.binds == "FMA";
      has_fma = has_fma || fma;
      const double fma_roof = fma && r.intensity && r.peak_gflops ? *r.peak_gflops / *r.intensity : NAN;
      if (std::isfinite(fma_roof)) y_max = std::max(y_max, fma_roof);
      const double y = own_time && *m->compute_s > 0 ? *m->gbytes_per_s * m->time_s / *m->compute_s : *m->gbytes_per_s;
      y_max = std::max(y_max, y);
      s += fmt::format("{} {} {} {} {}\n", m->n_k, gp_number(y), fma ? "NaN" : gp_number(y), fma ? gp_number(y) : "NaN",
                       gp_number(fma_roof));
    }
    s += "EOD\n";
    any_fma = any_fma || has_fma;
    const char* colour = palette_colour(colour_index);
    const int dash = threads == 1 ? 1 : 2;
    plot += fmt::format("$x{0} using 1:2 with lines lw 2 dt {1} lc rgb \"{2}\" title {3}, "
                        "$x{0} using 1:3 with points pt {4} ps 1 lc rgb \"{2}\" notitle, "
                        "$x{0} using 1:4 with points pt {5} ps 1 lc rgb \"{2}\" notitle, ",
                        i, dash, colour,
                        quoted(fmt::format("{}, n_q={}, {} thread{}{}", short_name(impl), n_q, threads,
                                           threads == 1 ? "" : "s", own_time ? " (own time)" : "")),
                        memory_point, fma_point);
    if (has_fma)
      plot += fmt::format("$x{} using 1:5 with lines lw 1 dt 3 lc rgb \"{}\" notitle, ", i, colour);
  }
  std::string roofs;
  if (first.bandwidth_1) {
    y_max = std::max(y_max, *first.bandwidth_1);
    plot += fmt::format("{} with lines dt 2 lw 2 lc rgb \"#000000\" title {}, ", gp_number(*first.bandwidth_1),
                        quoted(fmt::format("read bandwidth, 1 thread: {} GB/s", format_number(*first.bandwidth_1))));
    roofs = "the measured read bandwidth (black dashed: 1 thread";
  }
  if (first.bandwidth_all && first.bandwidth_threads > 1) {
    y_max = std::max(y_max, *first.bandwidth_all);
    plot += fmt::format("{} with lines dt 4 lw 2 lc rgb \"#777777\" title {}, ", gp_number(*first.bandwidth_all),
                        quoted(fmt::format("read bandwidth, {} threads: {} GB/s", first.bandwidth_threads,
                                           format_number(*first.bandwidth_all))));
    roofs += fmt::format("; grey: {} threads", first.bandwidth_threads);
  }
  if (!roofs.empty()) roofs += ")";
  // Legend entries for the point shapes.
  plot += fmt::format("NaN with points pt {} ps 1 lc rgb \"#000000\" title \"memory bandwidth binds\", ", memory_point);
  plot += fmt::format("NaN with points pt {} ps 1 lc rgb \"#000000\" title \"FMA peak binds (its roof dotted)\", ", fma_point);
  plot.resize(plot.size() - 2);
  s += fmt::format("set xrange [{}:{}]\nset yrange [0:{}]\n", gp_number(x_min / 1.4), gp_number(x_max * 1.4),
                   gp_number(y_max * 1.15));
  s += fmt::format("set key below left Left reverse maxrows {} font \",10\" samplen 3\n", legend_rows);
  s += plot + "\n";
  chart.svg = s;
  chart.caption = fmt::format(
      "Decode and cross shapes (n_q queries against n_k keys), d={}, mask={}: bytes moved per second (K and V "
      "read once up to the last readable key, Q read, O written) per second of wall time, or of the "
      "implementation's own compute time where it reported one for every point (\"own time\" in the legend; the "
      "table below gives both), vs n_k, against {}. Solid lines: 1 thread; dashed: more. Circles are points bound by memory bandwidth (useful flops per byte below the ridge "
      "FMA peak / bandwidth); squares are bound by the FMA peak{}. Conditions: {}",
      d, mask, roofs.empty() ? "no measured bandwidth (the bench JSON context has none)" : roofs,
      any_fma ? ", whose roof in GB/s (peak / intensity) is dotted" : " (none here)",
      [&] {
        std::string flat = conditions;
        std::replace(flat.begin(), flat.end(), '\n', ';');
        return flat;
      }());
  return chart;
}

std::optional<double> json_number(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

Chart error_chart(const VerifyRun& run, size_t index) {
  const json& rows = run.doc["error_vs_n"];
  std::map<std::string, std::vector<std::pair<double, double>>> groups;
  bool all_positive = true;
  double n_min = 1e300, n_max = 0, ratio_min = 1e300, ratio_max = 0;
  for (const json& r : rows) {
    const auto ratio = json_number(r, "error_over_bound");
    if (!ratio) continue;
    const std::string mask = r.contains("mask") && r["mask"].is_string() ? r["mask"].get<std::string>() : "none";
    const std::string d = r.contains("d") ? r["d"].dump() : "?";
    groups[fmt::format("d={}, mask={}", d, mask)].emplace_back(r["n"].get<double>(), *ratio);
    all_positive = all_positive && *ratio > 0;
    n_min = std::min(n_min, r["n"].get<double>());
    n_max = std::max(n_max, r["n"].get<double>());
    ratio_min = std::min(ratio_min, *ratio);
    ratio_max = std::max(ratio_max, *ratio);
  }
  if (groups.empty()) return {};
  Chart chart;
  chart.name = fmt::format("error-{}-{}", run.implementation, index);
  chart.section = fmt::format("error:{}", index);
  const std::string conditions = verify_conditions(run);
  chart.caption = fmt::format("Worst error of {} as a fraction of its forward error bound, vs n (1 = at the "
                              "bound). {}",
                              run.implementation, conditions);
  std::string s = preamble(960, 560, fmt::format("Error / bound vs n: {}", run.implementation), conditions);
  s += "set logscale x 2\nset ylabel \"max error / bound\"\n";
  s += fmt::format("set xrange [{}:{}]\n", gp_number(n_min / 1.3), gp_number(n_max * 1.3));
  // Always show the bound (1) with some room above it.
  if (all_positive)
    s += fmt::format("set logscale y 10\nset format y \"%g\"\nset yrange [{}:{}]\n", gp_number(ratio_min / 3),
                     gp_number(std::max(1.0, ratio_max) * 3));
  else
    s += fmt::format("set yrange [0:{}]\n", gp_number(std::max(1.0, ratio_max) * 1.2));
  std::string plot = "plot ";
  int i = 0;
  for (auto& [label, points] : groups) {
    std::sort(points.begin(), points.end());
    s += fmt::format("$e{} << EOD\n", i);
    for (const auto& [n, ratio] : points) s += fmt::format("{} {}\n", gp_number(n), gp_number(ratio));
    s += "EOD\n";
    plot += fmt::format("$e{} using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb \"{}\" title {}, ", i,
                        palette_colour(i + 1), quoted(label));
    ++i;
  }
  plot += "1 with lines dt 2 lw 2 lc rgb \"#000000\" title \"bound\"\n";
  s += plot;
  chart.svg = s;
  return chart;
}

/// One line of a log-log chart.
struct Line {
  std::string title;
  const char* colour = "#000000";
  int dash = 1;   ///< gnuplot dash type
  int point = 7;  ///< gnuplot point type
  std::vector<std::pair<double, double>> xy;
};

/// The axes, data and plot command of a chart with n (log 2) across and a
/// positive quantity (log 10) up; `bound` draws a dashed line at that height
/// (error / bound charts draw 1) and is always in view. Points that are not
/// finite and positive are left out. Empty when no line has a point.
std::string log_log_plot(std::vector<Line> lines, const std::string& ylabel, std::optional<double> bound,
                         const std::string& bound_title) {
  double n_min = 1e300, n_max = 0, y_min = 1e300, y_max = 0;
  for (Line& line : lines) {
    std::erase_if(line.xy, [](const auto& p) { return !(p.first > 0 && p.second > 0 && std::isfinite(p.second)); });
    std::sort(line.xy.begin(), line.xy.end());
    for (const auto& [n, y] : line.xy) {
      n_min = std::min(n_min, n);
      n_max = std::max(n_max, n);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
  }
  std::erase_if(lines, [](const Line& line) { return line.xy.empty(); });
  if (lines.empty()) return "";
  if (bound) {
    y_min = std::min(y_min, *bound);
    y_max = std::max(y_max, *bound);
  }
  std::string s = "set logscale x 2\nset logscale y 10\nset format y \"%g\"\n";
  s += "set ylabel " + quoted(ylabel) + "\n";
  s += fmt::format("set xrange [{}:{}]\nset yrange [{}:{}]\n", gp_number(n_min / 1.3), gp_number(n_max * 1.3),
                   gp_number(y_min / 3), gp_number(y_max * 3));
  std::string plot = "plot ";
  for (size_t i = 0; i < lines.size(); ++i) {
    s += fmt::format("$p{} << EOD\n", i);
    for (const auto& [n, y] : lines[i].xy) s += fmt::format("{} {}\n", gp_number(n), gp_number(y));
    s += "EOD\n";
    plot += fmt::format("$p{} using 1:2 with linespoints lw 2 dt {} pt {} ps 0.9 lc rgb \"{}\" title {}, ", i,
                        lines[i].dash, lines[i].point, lines[i].colour, quoted(std::as_const(lines[i].title)));
  }
  if (bound)
    plot += fmt::format("{} with lines dt 2 lw 2 lc rgb \"#000000\" title {}, ", gp_number(*bound), quoted(bound_title));
  plot.resize(plot.size() - 2);
  return s + plot + "\n";
}

/// How a power row's input distribution is named in a legend.
std::string input_label(const PowerRun& run, const std::string& input) {
  const json& settings = run.doc.value("settings", json::object());
  if (settings.contains("inputs") && settings["inputs"].is_object() && settings["inputs"].contains(input) &&
      settings["inputs"][input].is_string())
    return settings["inputs"][input].get<std::string>();
  return input;
}

/// The (input, mask) pairs of a power file, in row order.
std::vector<std::pair<std::string, std::string>> input_masks(const PowerRun& run) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const PowerPoint& p : run.points)
    if (std::find(out.begin(), out.end(), std::make_pair(p.input, p.mask)) == out.end())
      out.emplace_back(p.input, p.mask);
  return out;
}

/// Error / bound vs n from the power file, log-log: one line per implementation
/// × input × mask (colour: implementation, dashes: input, points: mask), or,
/// for one implementation, one colour per input × mask.
Chart tightness_chart(const PowerRun& run, const std::string& only, const std::string& name,
                      const std::string& section) {
  const auto pairs = input_masks(run);
  std::vector<Line> lines;
  int colour = 0;
  for (size_t i = 0; i < run.implementations.size(); ++i) {
    const std::string& impl = run.implementations[i];
    if (!only.empty() && impl != only) continue;
    for (size_t k = 0; k < pairs.size(); ++k) {
      const auto& [input, mask] = pairs[k];
      Line line;
      line.title = only.empty() ? fmt::format("{}, {}, mask {}", impl, input_label(run, input), mask)
                                : fmt::format("{}, mask {}", input_label(run, input), mask);
      line.colour = palette_colour(only.empty() ? static_cast<int>(i) + 1 : ++colour);
      line.dash = only.empty() && input != pairs.front().first ? 3 : 1;
      line.point = mask == "none" ? 7 : 5;
      for (const PowerPoint& p : run.points)
        if (p.input == input && p.mask == mask)
          if (const auto* t = p.find(impl); t && t->error_over_bound)
            line.xy.emplace_back(static_cast<double>(p.n), *t->error_over_bound);
      lines.push_back(std::move(line));
    }
  }
  const std::string plot = log_log_plot(lines, "worst error / bound", 1.0, "bound");
  if (plot.empty()) return {};
  Chart chart;
  chart.name = name;
  chart.section = section;
  const std::string conditions = power_conditions(run, "\n");
  const std::string who = only.empty() ? fmt::format("{}", fmt::join(run.implementations, " and ")) : only;
  chart.caption = fmt::format("Worst |O − reference| of {} as a fraction of its forward error bound, vs n, log-log "
                              "(1 = at the bound; the gap below 1 is the bound's slack). Inputs {}, from {} "
                              "(attncheck verify --power). {}",
                              who, only.empty() ? "U[-1, 1] (solid) and N(0, 1) (dashed), masks none (circles) and "
                                                  "causal (squares)"
                                                : "as in the legend",
                              run.file, power_conditions(run));
  chart.svg = preamble(960, 600, fmt::format("Error / bound vs n: {}; log-log", who), conditions) + plot;
  return chart;
}

/// The smallest relative perturbation ε of O caught vs n, log-log: one line per input × mask.
Chart epsilon_chart(const PowerRun& run) {
  const auto pairs = input_masks(run);
  std::string perturbed;
  for (const PowerPoint& p : run.points)
    if (!p.perturbed.empty()) perturbed = p.perturbed;
  std::vector<Line> lines;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const auto& [input, mask] = pairs[k];
    Line line;
    line.title = fmt::format("{}, mask {}", input_label(run, input), mask);
    line.colour = palette_colour(static_cast<int>(k) + 1);
    line.point = mask == "none" ? 7 : 5;
    for (const PowerPoint& p : run.points)
      if (p.input == input && p.mask == mask && p.caught_at_highest && p.smallest_caught)
        line.xy.emplace_back(static_cast<double>(p.n), *p.smallest_caught);
    lines.push_back(std::move(line));
  }
  const std::string plot = log_log_plot(lines, "smallest ε caught", std::nullopt, "");
  if (plot.empty()) return {};
  Chart chart;
  chart.name = "power-vs-n";
  chart.section = "power";
  const std::string conditions = power_conditions(run, "\n");
  chart.caption = fmt::format(
      "Power: the smallest ε for which {0}'s output O·(1 + ε) (every element moved by the same relative ε) "
      "fails differential_reference, vs n, log-log; lower is more powerful. Bisection on log ε{1}; a "
      "configuration never caught in that range has no point. From {2} (attncheck verify --power). {3}",
      perturbed.empty() ? "the implementation" : perturbed,
      run.epsilon_hi > 0 ? fmt::format(" in [{:g}, {:g}]", run.epsilon_lo, run.epsilon_hi) : "", run.file,
      power_conditions(run));
  chart.svg = preamble(960, 600, fmt::format("Smallest relative error caught vs n: {}·(1 + ε); log-log",
                                             perturbed.empty() ? "O" : perturbed),
                       conditions) +
              plot;
  return chart;
}

/// A table from the counterexample as rows of numbers; null or strings ("nan") become NaN.
std::vector<std::vector<double>> read_table(const json& t) {
  std::vector<std::vector<double>> out;
  if (!t.is_array()) return out;
  for (const json& row : t) {
    std::vector<double> values;
    if (row.is_array())
      for (const json& v : row)
        values.push_back(v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN());
    else if (row.is_number())
      values.push_back(row.get<double>());
    out.push_back(values);
  }
  return out;
}

std::string matrix_block(const std::string& name, const std::vector<std::vector<double>>& m) {
  std::string out = "$" + name + " << EOD\n";
  for (const auto& row : m) {
    for (size_t j = 0; j < row.size(); ++j) {
      if (j > 0) out += ' ';
      out += gp_number(row[j]);
    }
    out += "\n";
  }
  return out + "EOD\n";
}

std::string heatmap_panel(const std::string& block, const std::string& title,
                          const std::vector<std::vector<double>>& m, double lo, double hi, const char* palette) {
  const size_t rows = m.size(), cols = m.empty() ? 0 : m.front().size();
  if (!(hi > lo)) {
    lo -= 0.5;
    hi += 0.5;
  }
  std::string s;
  s += "set title " + quoted(title) + "\n";
  s += fmt::format("set xrange [-0.5:{}]\nset yrange [{}:-0.5]\n", gp_number(static_cast<double>(cols) - 0.5),
                   gp_number(static_cast<double>(rows) - 0.5));
  s += fmt::format("set cbrange [{}:{}]\n", gp_number(lo), gp_number(hi));
  // Integer tics on the cells, thinned out for large tables.
  s += fmt::format("set xtics 0,{} format \"%g\"\nset ytics 0,{} format \"%g\"\n", (cols + 11) / 12,
                   (rows + 11) / 12);
  s += std::string("set palette ") + palette + "\n";
  s += "plot $" + block + " matrix with image pixels notitle\n";
  return s;
}

std::pair<double, double> finite_range(std::initializer_list<const std::vector<std::vector<double>>*> tables) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto* t : tables)
    for (const auto& row : *t)
      for (const double v : row)
        if (std::isfinite(v)) {
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
  if (!std::isfinite(lo)) return {0, 1};
  return {lo, hi};
}

Chart counterexample_chart(const VerifyRun& run, const json& property, size_t index) {
  const json& ce = property["counterexample"];
  if (!ce.is_object() || !ce.contains("tables") || !ce["tables"].is_object()) return {};
  const json& tables = ce["tables"];
  const json reference = tables.value("reference", json::object());
  const json implementation = tables.value("implementation", json::object());
  struct Row {
    std::string table;
    std::vector<std::vector<double>> ref, impl, diff;
  };
  std::vector<Row> rows;
  for (const char* name : {"A", "O"}) {
    if (!reference.contains(name) || !implementation.contains(name)) continue;
    Row row{name, read_table(reference[name]), read_table(implementation[name]), {}};
    if (row.ref.empty() || row.ref.front().empty()) continue;
    bool same_shape = row.ref.size() == row.impl.size();
    for (size_t i = 0; same_shape && i < row.ref.size(); ++i) same_shape = row.ref[i].size() == row.impl[i].size();
    if (same_shape) {
      row.diff = row.ref;
      for (size_t i = 0; i < row.ref.size(); ++i)
        for (size_t j = 0; j < row.ref[i].size(); ++j) row.diff[i][j] = std::abs(row.impl[i][j] - row.ref[i][j]);
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) return {};
  const std::string property_name = property["name"].get<std::string>();
  Chart chart;
  chart.name = fmt::format("counterexample-{}-{}-{}", run.implementation, property_name, index);
  chart.section = fmt::format("property:{}:{}", index, property_name);
  std::string slice = tables.contains("slice") ? tables["slice"].dump() : "[0, 0]";
  const std::string conditions = verify_conditions(run);
  chart.caption = fmt::format("Counterexample of {} for {}: reference (left), implementation (middle) and "
                              "|implementation − reference| (right), batch/head slice {}. Rows are queries, "
                              "columns keys (A) or value dimensions (O); grey cells are NaN. {}",
                              property_name, run.implementation, slice, conditions);
  std::string s = preamble(1080, static_cast<int>(rows.size()) * 320 + 120,
                           fmt::format("{} counterexample: {} (slice {})", run.implementation, property_name, slice),
                           conditions);
  s += "set key off\nunset grid\nset tics font \",9\"\nset cbtics format \"%.3g\"\n";
  s += "set xtics out nomirror\nset ytics out nomirror\nset colorbox\nset datafile missing \"NaN\"\n";
  s += "set object 1 rectangle from graph 0,0 to graph 1,1 behind fc rgb \"#bbbbbb\" fs solid noborder\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    s += matrix_block(fmt::format("r{}", r), rows[r].ref);
    s += matrix_block(fmt::format("i{}", r), rows[r].impl);
    if (!rows[r].diff.empty()) s += matrix_block(fmt::format("d{}", r), rows[r].diff);
  }
  s += "set tmargin 0\n";
  s += fmt::format("set multiplot layout {},3 margins 0.04,0.93,0.05,{} spacing 0.09,0.12\n", rows.size(),
                   rows.size() == 1 ? "0.75" : "0.86");
  const char* sequential = "defined (0 \"#f7fbff\", 0.5 \"#6baed6\", 1 \"#08306b\")";
  const char* errors = "defined (0 \"#fff5f0\", 0.5 \"#fb6a4a\", 1 \"#67000d\")";
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    const auto [lo, hi] = finite_range({&row.ref, &row.impl});
    s += heatmap_panel(fmt::format("r{}", r), "reference " + row.table, row.ref, lo, hi, sequential);
    s += "unset label 900\nunset label 901\n";  // title and conditions, drawn once with the first panel
    s += heatmap_panel(fmt::format("i{}", r), "implementation " + row.table, row.impl, lo, hi, sequential);
    if (!row.diff.empty()) {
      const auto [dlo, dhi] = finite_range({&row.diff});
      s += heatmap_panel(fmt::format("d{}", r), "|difference| " + row.table, row.diff, 0, std::max(dhi, dlo),
                         errors);
    } else {
      s += "set multiplot next\n";
    }
  }
  s += "unset multiplot\n";
  chart.svg = s;
  return chart;
}

}  // namespace

std::optional<double> peak_for(const BenchRun& run, int threads) {
  if (!run.peak_gflops) return std::nullopt;
  if (threads <= 1) return run.peak_gflops;
  if (!run.peak_all || run.peak_threads < 1) return *run.peak_gflops * threads;
  if (threads >= run.peak_threads) return run.peak_all;
  return *run.peak_all * threads / run.peak_threads;
}

Roofline roofline(const Model& model, const Measurement& m) {
  Roofline r;
  if (m.run >= model.runs.size()) return r;
  const BenchRun& run = model.runs[m.run];
  r.peak_gflops = peak_for(run, m.threads);
  r.bandwidth_gbps = bandwidth_for(run, m.threads);
  if (m.gflops && m.gbytes_per_s && *m.gbytes_per_s > 0) r.intensity = *m.gflops / *m.gbytes_per_s;
  if (!r.intensity || !r.peak_gflops || !r.bandwidth_gbps) return r;
  const double memory_roof = *r.bandwidth_gbps * *r.intensity;  // GFLOP/s the bandwidth allows
  if (memory_roof < *r.peak_gflops) {
    r.binds = "memory";
    r.fraction = *m.gbytes_per_s / *r.bandwidth_gbps;
  } else {
    r.binds = "FMA";
    r.fraction = *m.gflops / *r.peak_gflops;
  }
  return r;
}

namespace {

// The floor row (read-floor or fma-floor) of m's shape and threads in m's bench run.
const Measurement* floor_for(const Model& model, const Measurement& m, const std::string& floor_name) {
  if (is_floor(m.implementation)) return nullptr;
  const auto same = [&](const Measurement& floor) {
    return floor.implementation == floor_name && floor.run == m.run && floor.time_s > 0 &&
           std::tie(floor.n, floor.n_q, floor.n_k, floor.d, floor.mask, floor.threads) ==
               std::tie(m.n, m.n_q, m.n_k, m.d, m.mask, m.threads);
  };
  for (const Measurement& floor : model.cross)
    if (same(floor)) return &floor;
  for (const Series& s : model.series)
    for (const Measurement& floor : s.points)
      if (same(floor)) return &floor;
  return nullptr;
}

// The time per call of the floor `floor_name` for m's shape and threads: the
// one timed call by call beside m when `paired` (bench --paired-floors), else
// the floor's row from m's run.
std::optional<double> floor_seconds(const Model& model, const Measurement& m, const std::string& floor_name,
                                    bool paired) {
  if (paired) return floor_name == kReadFloor ? m.paired_read_floor_s : m.paired_fma_floor_s;
  const Measurement* floor = floor_for(model, m, floor_name);
  if (!floor) return std::nullopt;
  return floor->time_s;
}

}  // namespace

std::optional<double> over_floor(const Model& model, const Measurement& m, const std::string& floor_name) {
  if (is_floor(m.implementation)) return std::nullopt;
  const std::optional<double>& paired = floor_name == kReadFloor ? m.paired_over_read : m.paired_over_fma;
  if (paired) return paired;
  const Measurement* floor = floor_for(model, m, floor_name);
  if (!floor) return std::nullopt;
  return m.own_seconds() / floor->time_s;
}

std::optional<double> over_slower_floor(const Model& model, const Measurement& m) {
  if (is_floor(m.implementation)) return std::nullopt;
  if (m.paired_over_roofline) return m.paired_over_roofline;
  const Measurement* read = floor_for(model, m, kReadFloor);
  const Measurement* fma = floor_for(model, m, kFmaFloor);
  if (!read || !fma) return std::nullopt;
  return m.own_seconds() / std::max(read->time_s, fma->time_s);
}

std::string floor_ratio_cell(const std::optional<double>& ratio, const Measurement& m) {
  if (!ratio) return "—";
  return format_number(*ratio) + (m.paired_over_roofline ? " (paired)" : "");
}

std::vector<std::vector<std::string>> decode_table(const Model& model) {
  std::vector<std::vector<std::string>> t = {{"implementation", "n_q", "n_k", "d", "mask", "threads", "time per call",
                                              "GB/s", "GFLOP/s", "flop/byte", "binding roof", "% of binding roof",
                                              "× read floor", "× FMA floor", "× slower floor", "own compute time",
                                              "statistic"}};
  std::vector<const Measurement*> sorted;
  for (const Measurement& m : model.cross) sorted.push_back(&m);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Measurement* a, const Measurement* b) {
    return std::tie(a->d, a->mask, a->implementation, a->n_q, a->threads, a->n_k) <
           std::tie(b->d, b->mask, b->implementation, b->n_q, b->threads, b->n_k);
  });
  const auto number = [](const std::optional<double>& v) { return v ? format_number(*v) : std::string("—"); };
  for (const Measurement* m : sorted) {
    const Roofline r = roofline(model, *m);
    std::string roof = "—";
    if (r.binds == "memory") roof = fmt::format("memory, {} GB/s", format_number(*r.bandwidth_gbps));
    if (r.binds == "FMA") roof = fmt::format("FMA, {} GFLOP/s", format_number(*r.peak_gflops));
    t.push_back({m->implementation, std::to_string(m->n_q), std::to_string(m->n_k), std::to_string(m->d), m->mask,
                 std::to_string(m->threads), format_number(m->time_s * 1e3) + " ms", number(m->gbytes_per_s),
                 number(m->gflops), number(r.intensity), roof,
                 r.fraction ? format_number(*r.fraction * 100, 2) + " %" : "—",
                 floor_ratio_cell(over_floor(model, *m, kReadFloor), *m),
                 floor_ratio_cell(over_floor(model, *m, kFmaFloor), *m),
                 floor_ratio_cell(over_slower_floor(model, *m), *m),
                 m->compute_s ? format_number(*m->compute_s * 1e3) + " ms" : "—", format_statistic(*m)});
  }
  return t;
}

std::vector<ThreadScaling> thread_scaling(const Model& model) {
  std::vector<const Measurement*> all;
  for (const Series& s : model.series)
    for (const Measurement& m : s.points) all.push_back(&m);
  for (const Measurement& m : model.cross) all.push_back(&m);
  const auto same_shape = [](const Measurement& a, const Measurement& b) {
    return a.implementation == b.implementation && a.run == b.run &&
           std::tie(a.n, a.n_q, a.n_k, a.d, a.mask) == std::tie(b.n, b.n_q, b.n_k, b.d, b.mask);
  };
  std::vector<ThreadScaling> result;
  for (const Measurement* many : all) {
    if (many->threads <= 1 || is_floor(many->implementation) || many->time_s <= 0) continue;
    const auto one = std::find_if(all.begin(), all.end(), [&](const Measurement* m) {
      return m->threads == 1 && m->time_s > 0 && same_shape(*m, *many);
    });
    if (one == all.end()) continue;
    ThreadScaling s;
    s.one = *one;
    s.many = many;
    s.speedup = (*one)->own_seconds() / many->own_seconds();
    double slower_one = 0, slower_many = 0;
    // Paired floors at both counts, else the floor rows at both: never one of each (as the bench's summary).
    const bool paired = (*one)->paired_over_roofline && many->paired_over_roofline;
    for (const char* name : {kReadFloor, kFmaFloor}) {
      const std::optional<double> f1 = floor_seconds(model, **one, name, paired);
      const std::optional<double> fn = floor_seconds(model, *many, name, paired);
      if (!f1 || !fn) continue;
      (name == kReadFloor ? s.read_floor : s.fma_floor) = *f1 / *fn;
      slower_one = std::max(slower_one, *f1);
      slower_many = std::max(slower_many, *fn);
    }
    if (slower_many > 0) s.roofline = slower_one / slower_many;
    result.push_back(s);
  }
  std::stable_sort(result.begin(), result.end(), [](const ThreadScaling& a, const ThreadScaling& b) {
    const Measurement &x = *a.many, &y = *b.many;
    return std::tie(x.d, x.mask, x.implementation, x.n, x.n_q, x.n_k, x.threads, x.run) <
           std::tie(y.d, y.mask, y.implementation, y.n, y.n_q, y.n_k, y.threads, y.run);
  });
  return result;
}

std::vector<std::vector<std::string>> thread_scaling_table(const Model& model) {
  std::vector<std::vector<std::string>> t = {{"implementation", "shape", "d", "mask", "threads", "time, 1 thread",
                                              "time", "speed-up", "read floor's", "FMA floor's", "roofline's",
                                              "speed-up over the roofline's"}};
  const auto number = [](const std::optional<double>& v) { return v ? format_number(*v) : std::string("—"); };
  for (const ThreadScaling& s : thread_scaling(model)) {
    const Measurement& m = *s.many;
    const std::string shape = m.n > 0 ? fmt::format("n = {}", m.n) : fmt::format("n_q = {}, n_k = {}", m.n_q, m.n_k);
    t.push_back({m.implementation, shape, std::to_string(m.d), m.mask, std::to_string(m.threads),
                 format_number(s.one->own_seconds() * 1e3) + " ms", format_number(m.own_seconds() * 1e3) + " ms",
                 format_number(s.speedup), number(s.read_floor), number(s.fma_floor), number(s.roofline),
                 number(s.over_roofline())});
  }
  return t;
}

std::vector<std::string> isolation_notes(const Model& model) {
  std::vector<const Measurement*> all;
  for (const Series& s : model.series)
    for (const Measurement& m : s.points) all.push_back(&m);
  for (const Measurement& m : model.cross) all.push_back(&m);
  std::vector<std::string> notes;
  for (const Measurement* m : all) {
    if (!m->compute_s) continue;
    const double share = 1.0 - *m->compute_s / m->time_s;
    notes.push_back(fmt::format("{}: wall {} ms, own compute {} ms: isolation (copies, pipe or process) is {} % of "
                                "the wall time{}",
                                m->benchmark, format_number(m->time_s * 1e3), format_number(*m->compute_s * 1e3),
                                format_number(std::max(0.0, share) * 100, 2),
                                share > 0.5 ? ", so it dominates the wall time: compare its own compute time (the decode chart does)" : ""));
  }
  return notes;
}

std::vector<Chart> draw_charts(const Model& model, const std::string& gnuplot) {
  std::vector<Chart> scripts;
  const auto colours = implementation_colours(model);
  std::map<Config, std::vector<const Series*>> by_config;
  for (const Series& s : model.series) by_config[s.config].push_back(&s);
  for (const auto& [config, series] : by_config) {
    scripts.push_back(time_chart(model, series, colours));
    Chart g = gflops_chart(model, series, colours);
    if (!g.svg.empty()) scripts.push_back(std::move(g));
  }
  std::set<std::pair<int64_t, std::string>> cross_configs;
  for (const Measurement& m : model.cross) cross_configs.emplace(m.d, m.mask);
  for (const auto& [d, mask] : cross_configs) {
    Chart c = decode_chart(model, d, mask);
    if (!c.svg.empty()) scripts.push_back(std::move(c));
  }
  if (model.power) {
    Chart t = tightness_chart(*model.power, "", "tightness-vs-n", "power");
    if (!t.svg.empty()) scripts.push_back(std::move(t));
    Chart e = epsilon_chart(*model.power);
    if (!e.svg.empty()) scripts.push_back(std::move(e));
  }
  for (size_t v = 0; v < model.verifies.size(); ++v) {
    const VerifyRun& run = model.verifies[v];
    // The power file's rows for this implementation, when it has them, are its error vs n.
    if (model.power && model.power->has(run.implementation)) {
      Chart e = tightness_chart(*model.power, run.implementation, fmt::format("error-{}-{}", run.implementation, v),
                                fmt::format("error:{}", v));
      if (!e.svg.empty()) scripts.push_back(std::move(e));
    } else if (run.doc.contains("error_vs_n")) {
      Chart e = error_chart(run, v);
      if (!e.svg.empty()) scripts.push_back(std::move(e));
    }
    for (const json& p : run.doc["properties"]) {
      if (!p.contains("counterexample")) continue;
      Chart c = counterexample_chart(run, p, v);
      if (!c.svg.empty()) scripts.push_back(std::move(c));
    }
  }
  // Each chart's svg field holds its script until gnuplot turns it into SVG.
  std::vector<Chart> charts;
  for (Chart& chart : scripts) {
    chart.svg = run_gnuplot(gnuplot, chart.svg, "chart '" + chart.name + "'");
    charts.push_back(std::move(chart));
  }
  return charts;
}

}  // namespace attncheck::report_detail
