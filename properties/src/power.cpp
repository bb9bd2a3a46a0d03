#include "attncheck/power.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "attncheck/properties.h"
#include "attncheck/registry.h"
#include "attncheck/tolerance.h"
#include "attncheck/verify.h"

namespace attncheck {

ThresholdSearch find_threshold(const std::function<bool(double)>& caught, double lo, double hi, int steps) {
  if (!(lo > 0 && hi > lo && std::isfinite(hi)))
    throw InvalidInput(fmt::format("threshold search: the range [{:g}, {:g}] must satisfy 0 < lo < hi", lo, hi));
  ThresholdSearch r;
  r.lo = lo;
  r.hi = hi;
  auto check = [&](double epsilon) {
    ++r.evaluations;
    return caught(epsilon);
  };
  r.caught_at_hi = check(hi);
  if (!r.caught_at_hi) {
    r.largest_missed = hi;
    return r;
  }
  r.caught_at_lo = check(lo);
  if (r.caught_at_lo) {
    r.smallest_caught = lo;
    return r;
  }
  double missed = lo, hit = hi;
  for (int i = 0; i < steps; ++i) {
    const double mid = std::sqrt(missed * hit);  // the midpoint of log ε
    (check(mid) ? hit : missed) = mid;
  }
  r.smallest_caught = hit;
  r.largest_missed = missed;
  return r;
}

RelativePerturbation::RelativePerturbation(std::unique_ptr<Implementation> base, double epsilon)
    : base_(std::move(base)), epsilon_(epsilon) {}

std::string RelativePerturbation::name() const {
  return epsilon_ == 0 ? base_->name() : fmt::format("{}·(1+{:.3g})", base_->name(), epsilon_);
}

Capabilities RelativePerturbation::capabilities() const {
  Capabilities c = base_->capabilities();
  c.weights = false;
  return c;
}

void RelativePerturbation::forward(const Problem& problem, std::span<const float> q, std::span<const float> k,
                                   std::span<const float> v, std::span<float> out, std::span<float>, int threads) {
  const bool cached = cached_case_ && cached_case_->problem == problem &&
                      std::ranges::equal(cached_case_->q, q) && std::ranges::equal(cached_case_->k, k) &&
                      std::ranges::equal(cached_case_->v, v) && cached_out_.size() == out.size();
  if (!cached) {
    cached_case_.reset();
    std::vector<float> o(out.size());
    base_->forward(problem, q, k, v, o, {}, threads);
    Case c;
    c.problem = problem;
    c.q.assign(q.begin(), q.end());
    c.k.assign(k.begin(), k.end());
    c.v.assign(v.begin(), v.end());
    cached_case_ = std::move(c);
    cached_out_ = std::move(o);
  }
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<float>(static_cast<double>(cached_out_[i]) * (1.0 + epsilon_));
}

namespace {

bool sampled(int64_t n, const PowerOptions& o) { return n > o.subsample_above && o.sampled_queries < n; }

// The row of the n×n problem that sampled query r stands for.
int64_t sampled_row(int64_t r, int64_t n, int64_t n_q) { return (r + 1) * n / n_q - 1; }

std::string query_rows_text(int64_t n, int64_t n_q) {
  if (n_q == n) return fmt::format("all {} rows", n);
  return fmt::format("{} of the {} rows, evenly spaced ({}, {}, ..., {}), against all {} keys", n_q, n,
                     sampled_row(0, n, n_q), sampled_row(1, n, n_q), sampled_row(n_q - 1, n, n_q), n);
}

std::string describe_input(const std::string& input) {
  if (input == "positive_v") return "Q, K ~ N(0, 1), V ~ U[0, 1]";
  return input == "normal" ? "N(0, 1)" : "U[-1, 1]";
}

// Whether the differential check caught an implementation: FAILED, not
// inconclusive, discarded or declined.
bool is_failure(const Outcome& o) { return !o.ok && !o.inconclusive && !o.discard && !o.unsupported; }

std::string verdict_of(const Outcome& o) {
  if (o.inconclusive) return "INCONCLUSIVE";
  if (o.unsupported) return "DECLINED";
  return o.ok ? "PASSED" : "FAILED";
}

std::string ratio_text(const std::optional<double>& r) {
  if (!r) return "-";
  return std::isfinite(*r) ? fmt::format("{:.3g}", *r) : "inf";
}

std::string epsilon_text(const ThresholdSearch& s) {
  if (s.evaluations == 0) return "-";
  if (!s.caught_at_hi) return fmt::format("> {:.0e}", s.hi);
  if (s.caught_at_lo) return fmt::format("<= {:.0e}", s.lo);
  return fmt::format("{:.3g}", s.smallest_caught);
}

nlohmann::json optional_number(const std::optional<double>& x) {
  if (!x) return nullptr;
  if (!std::isfinite(*x)) return "inf";
  return *x;
}

nlohmann::json search_json(const ThresholdSearch& s) {
  return {{"smallest_epsilon_caught", s.caught_at_hi ? nlohmann::json(s.smallest_caught) : nlohmann::json(nullptr)},
          {"largest_epsilon_missed", s.caught_at_lo ? nlohmann::json(nullptr) : nlohmann::json(s.largest_missed)},
          {"caught_at_lowest", s.caught_at_lo},
          {"caught_at_highest", s.caught_at_hi},
          {"checks", s.evaluations}};
}

}  // namespace

Case power_case(const PowerConfig& config, const PowerOptions& options) {
  if (config.input != "uniform" && config.input != "normal" && config.input != "positive_v")
    throw InvalidInput(fmt::format("power: input '{}' is not uniform, normal or positive_v", config.input));
  if (config.mask != "none" && config.mask != "causal")
    throw InvalidInput(fmt::format("power: mask '{}' is not none or causal", config.mask));
  const int64_t n = config.n, d = options.d;
  const int64_t n_q = sampled(n, options) ? options.sampled_queries : n;
  Case c;
  c.problem.shape = {1, 1, n_q, n, d, d};
  const uint64_t stream = config.input == "normal" ? 1 : config.input == "positive_v" ? 2 : 0;
  std::mt19937_64 rng(static_cast<uint64_t>(n) * 3 + stream);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f), unit(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // positive_v: outputs that do not cancel (a V with a common offset), where a
  // relative error of O is as visible as it gets.
  auto draw = [&](std::vector<float>& t, int64_t count, bool values) {
    t.resize(static_cast<size_t>(count));
    for (float& x : t)
      x = config.input == "uniform" ? uniform(rng) : values && config.input == "positive_v" ? unit(rng) : normal(rng);
  };
  draw(c.k, n * d, false);
  draw(c.v, n * d, true);
  draw(c.q, n_q * d, false);
  if (config.mask == "causal") {
    if (n_q == n) {
      c.problem.causal = Causal::top_left;
    } else {  // each sampled row keeps its row of the n×n causal mask
      ExplicitMask m;
      m.allowed.assign(static_cast<size_t>(n_q * n), 0);
      for (int64_t r = 0; r < n_q; ++r)
        std::fill_n(m.allowed.begin() + r * n, sampled_row(r, n, n_q) + 1, uint8_t{1});
      c.problem.mask = std::move(m);
    }
  }
  c.labels["power"] = fmt::format("n={} input={} mask={}", n, config.input, config.mask);
  return c;
}

std::vector<PowerRow> measure_power(const PowerOptions& options) {
  if (options.implementations.empty()) throw InvalidInput("power: no implementation to measure");
  const Property* differential = find_property("differential_reference");
  if (!differential) throw InvalidInput("power: the property differential_reference is missing");
  std::vector<PowerRow> rows;
  for (int64_t n : options.sizes)
    for (const std::string& input : options.inputs)
      for (const std::string& mask : options.masks) {
        const auto start = std::chrono::steady_clock::now();
        PowerRow row;
        row.config = {n, input, mask};
        const Case c = power_case(row.config, options);
        row.n_q = c.problem.shape.n_q;
        row.n_k = c.problem.shape.n_k;
        row.query_rows = query_rows_text(n, row.n_q);
        const Oracle oracle = choose_oracle(c.problem, Precision::fp32);
        row.oracle = to_string(oracle);
        const std::vector<double> reference = oracle_attention(oracle, c, nullptr);
        std::unique_ptr<RelativePerturbation> perturbed;
        for (const std::string& name : options.implementations) {
          // ε = 0: the implementation itself, O only (its weights are not judged here).
          auto impl = std::make_unique<RelativePerturbation>(make_implementation(name), 0.0);
          Tightness t;
          t.implementation = name;
          try {
            const Outcome o = differential->check(*impl, c, options.threads);
            t.error_over_bound = o.worst_ratio;
            t.verdict = verdict_of(o);
            t.message = o.message;
            std::vector<float> out(reference.size());
            impl->forward(c.problem, c.q, c.k, c.v, out, {}, options.threads);  // cached
            for (size_t i = 0; i < out.size(); ++i)
              t.max_abs_error = std::max(t.max_abs_error, std::fabs(out[i] - reference[i]));
          } catch (const std::exception& e) {  // Unsupported, InvalidInput, a fault
            t.verdict = "DECLINED";
            t.message = e.what();
          }
          row.tightness.push_back(t);
          if (!perturbed && t.verdict != "DECLINED") {
            row.perturbed = name;
            perturbed = std::move(impl);
          }
        }
        if (perturbed) {
          // The check recomputes the reference and the bound at every call (seconds
          // at n = 1024), so the bisection runs on the same comparison against a
          // reference and bound computed once, and differential_reference itself
          // confirms the bracket's two ends; where it disagrees, the bisection is
          // redone with it.
          const ErrorBounds eb = forward_error_bounds(c, {perturbed->precision()});
          std::vector<float> base(reference.size()), moved(reference.size());
          perturbed->set_epsilon(0);
          perturbed->forward(c.problem, c.q, c.k, c.v, base, {}, options.threads);  // cached
          auto direct = [&](double epsilon) {
            for (size_t i = 0; i < base.size(); ++i)
              moved[i] = static_cast<float>(static_cast<double>(base[i]) * (1.0 + epsilon));
            return !compare(moved, reference, eb.out).ok;
          };
          auto by_property = [&](double epsilon) {
            ++row.property_checks;
            perturbed->set_epsilon(epsilon);
            return is_failure(differential->check(*perturbed, c, options.threads));
          };
          row.power = find_threshold(direct, options.epsilon_lo, options.epsilon_hi, options.steps);
          const ThresholdSearch& s = row.power;
          const bool confirmed = !s.caught_at_hi  ? !by_property(s.hi)
                                 : s.caught_at_lo ? by_property(s.lo)
                                                  : by_property(s.smallest_caught) && !by_property(s.largest_missed);
          row.power_method = "bisection on the comparison against a reference and bound computed once; "
                             "differential_reference agrees at the bracket's ends";
          if (!confirmed) {
            row.power = find_threshold(by_property, options.epsilon_lo, options.epsilon_hi, options.steps);
            row.power_method = "bisection with differential_reference (the direct comparison disagreed with it)";
          }
        }
        row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (options.on_row) options.on_row(row);
        rows.push_back(std::move(row));
      }
  return rows;
}

nlohmann::json power_json(const std::vector<PowerRow>& rows, const PowerOptions& options,
                          const nlohmann::json& context_at_start) {
  nlohmann::json j;
  j["power_json_version"] = kPowerJsonVersion;
  nlohmann::json inputs = nlohmann::json::object(), masks = nlohmann::json::object();
  for (const std::string& input : options.inputs) inputs[input] = describe_input(input);
  for (const std::string& mask : options.masks) masks[mask] = mask == "causal" ? "causal, top-left aligned" : "no mask";
  j["settings"] = {
      {"d", options.d},
      {"batch", 1},
      {"heads", 1},
      {"sizes", options.sizes},
      {"inputs", inputs},
      {"masks", masks},
      {"threads", options.threads},
      {"implementations", options.implementations},
      {"tightness", "worst |O - reference| / bound over O, from differential_reference (1 = at the bound)"},
      {"subsampling",
       fmt::format("for n > {}, {} query rows of the n×n problem, evenly spaced, against all n keys; under the "
                   "causal mask each keeps its row of the n×n causal mask (given as an explicit mask)",
                   options.subsample_above, options.sampled_queries)},
      {"epsilon_range", {options.epsilon_lo, options.epsilon_hi}},
      {"bisection_steps", options.steps},
      {"perturbation",
       {{"form", "O·(1 + ε) element by element (product in double, rounded to float)"},
        {"of", options.implementations.front()},
        {"caught_by", "differential_reference FAILED"},
        {"search", fmt::format("bisection on log ε in [{:g}, {:g}], {} steps, on the comparison of "
                               "differential_reference against a reference and bound computed once per case; "
                               "differential_reference itself is run at the bracket's two ends (rows: power.method)",
                               options.epsilon_lo, options.epsilon_hi, options.steps)}}}};
  j["context"] = run_context(options.threads);
  if (context_at_start.is_object() && context_at_start.contains("load_avg"))
    j["context"]["load_avg_start"] = context_at_start["load_avg"];
  nlohmann::json table = nlohmann::json::array(), error_rows = nlohmann::json::array();
  for (const PowerRow& r : rows) {
    nlohmann::json row = {{"n", r.config.n},        {"n_q", r.n_q},         {"n_k", r.n_k},
                          {"d", options.d},         {"input", r.config.input},
                          {"mask", r.config.mask},  {"query_rows", r.query_rows},
                          {"oracle", r.oracle},     {"seconds", r.seconds}};
    nlohmann::json tight = nlohmann::json::object();
    for (const Tightness& t : r.tightness) {
      tight[t.implementation] = {{"error_over_bound", optional_number(t.error_over_bound)},
                                 {"max_abs_error", t.max_abs_error},
                                 {"verdict", t.verdict}};
      if (!t.message.empty()) tight[t.implementation]["message"] = t.message;
      nlohmann::json e = {{"n", r.config.n},
                          {"d", options.d},
                          {"mask", r.config.mask},
                          {"max_abs_error", t.max_abs_error},
                          {"error_over_bound", optional_number(t.error_over_bound)},
                          {"oracle", r.oracle},
                          {"implementation", t.implementation},
                          {"input", r.config.input},
                          {"n_q", r.n_q},
                          {"n_k", r.n_k},
                          {"verdict", t.verdict}};
      e["smallest_epsilon_caught"] = t.implementation == r.perturbed && r.power.caught_at_hi
                                         ? nlohmann::json(r.power.smallest_caught)
                                         : nlohmann::json(nullptr);
      error_rows.push_back(e);
    }
    row["tightness"] = tight;
    row["power"] = search_json(r.power);
    row["power"]["perturbed"] = r.perturbed;
    row["power"]["method"] = r.power_method;
    row["power"]["differential_reference_checks"] = r.property_checks;
    table.push_back(row);
  }
  j["rows"] = table;
  j["error_vs_n"] = error_rows;
  return j;
}

std::string format_power_header(const PowerOptions& options) {
  std::string s = fmt::format("{:>5} {:>10} {:<8} {:<7}", "n", "n_q×n_k", "input", "mask");
  for (const std::string& name : options.implementations) s += fmt::format(" {:>18}", name + " err/bd");
  s += fmt::format(" {:>16} {:>8}\n", "smallest ε caught", "time");
  return s;
}

std::string format_power_row(const PowerRow& row) {
  std::string s = fmt::format("{:>5} {:>10} {:<8} {:<7}", row.config.n, fmt::format("{}×{}", row.n_q, row.n_k),
                              row.config.input, row.config.mask);
  for (const Tightness& t : row.tightness)
    s += fmt::format(" {:>18}", t.verdict == "PASSED" ? ratio_text(t.error_over_bound)
                                                       : fmt::format("{} {}", ratio_text(t.error_over_bound), t.verdict));
  s += fmt::format(" {:>16} {:>7.1f}s\n", epsilon_text(row.power), row.seconds);
  return s;
}

std::vector<PowerRow> run_power(const PowerOptions& given, const std::string& json_path) {
  // Opened first: an unwritable path is reported before minutes of measuring.
  std::ofstream out;
  if (!json_path.empty()) {
    out.open(json_path);
    if (!out) throw InvalidInput(fmt::format("option --json/--power-json: cannot write '{}'", json_path));
  }
  PowerOptions options = given;
  const nlohmann::json context_at_start = run_context(options.threads);
  fmt::print("tightness and power of the tolerance model: d = {}, b = h = 1, inputs {}, masks {}, n = {}\n"
             "  err/bd: worst |O - reference| / bound of differential_reference (1 = at the bound)\n"
             "  smallest ε caught: the least ε for which {}'s O·(1 + ε) fails differential_reference "
             "(bisection on log ε in [{:g}, {:g}])\n"
             "  n > {}: {} evenly spaced query rows against all n keys\n",
             options.d, fmt::join(options.inputs, ", "), fmt::join(options.masks, ", "), fmt::join(options.sizes, ", "),
             options.implementations.front(), options.epsilon_lo,
             options.epsilon_hi, options.subsample_above, options.sampled_queries);
  fmt::print("{}", format_power_header(options));
  std::fflush(stdout);
  options.on_row = [&given](const PowerRow& row) {
    fmt::print("{}", format_power_row(row));
    std::fflush(stdout);
    if (given.on_row) given.on_row(row);
  };
  const std::vector<PowerRow> rows = measure_power(options);
  for (const PowerRow& row : rows)
    for (const Tightness& t : row.tightness)
      if (t.verdict != "PASSED")
        fmt::print("  n={} {} {}: {} {}: {}\n", row.config.n, row.config.input, row.config.mask, t.implementation,
                   t.verdict, t.message);
  if (!json_path.empty()) {
    out << power_json(rows, options, context_at_start).dump(2) << "\n";
    if (!out) throw InvalidInput(fmt::format("option --json/--power-json: writing '{}' failed", json_path));
    fmt::print("wrote {}\n", json_path);
  }
  return rows;
}

int run_power_command(const std::string& json_path, int threads) {
  PowerOptions options;
  options.threads = threads;
  run_power(options, json_path);
  return 0;
}

}  // namespace attncheck
