#include "attncheck/verify.h"

#include <fmt/format.h>
#include <rapidcheck.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <iostream>
#include <mutex>
#include <set>

#include <fcntl.h>
#include <unistd.h>

#include <rapidcheck/detail/Configuration.h>

#include "attncheck/builtin_implementations.h"
#include "attncheck/tolerance.h"

namespace attncheck {
namespace {

using Clock = std::chrono::steady_clock;

// Evaluations spent shrinking one failure.
constexpr int kShrinkBudget = 400;

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return h;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class ProgressListener : public rc::detail::TestListener {
 public:
  ProgressListener(const VerifyOptions& options, const std::string& name) : options_(options), name_(name) {}
  void onTestCaseFinished(const rc::detail::CaseDescription& d) override {
    if (d.result.type != rc::detail::CaseResult::Type::Discard) ++done_;
    report(false);
  }
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override { report(true); }
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}

 private:
  void report(bool shrinking) {
    if (options_.progress) options_.progress(name_, done_, options_.cases, shrinking);
  }
  const VerifyOptions& options_;
  std::string name_;
  int done_ = 0;
};

// Properties with a weight-level form: not exercised without weights.
bool uses_weights(const std::string& name) {
  static const std::set<std::string> names = {"shape", "row_sum", "nonnegative", "mask_zero",
                                              "key_value_permutation", "causal_prefix", "empty_row_policy",
                                              "differential_reference"};
  return names.count(name) > 0;
}

Status fault_status(const ImplementationFault& f) {
  return f.kind() == ImplementationFault::Kind::timed_out ? Status::timed_out : Status::crashed;
}

// The verdict on one case, with faults and exceptions turned into outcomes.
struct Verdict {
  Outcome outcome;
  std::optional<Status> fault;
};

Verdict judge_case(const Property& property, Implementation& impl, const Case& c, int threads) {
  Verdict v;
  try {
    v.outcome = property.check(impl, c, threads);
  } catch (const ImplementationFault& f) {
    v.fault = fault_status(f);
    v.outcome.ok = false;
    v.outcome.message = fmt::format("the implementation {}: {}",
                                    *v.fault == Status::timed_out ? "timed out" : "crashed", f.what());
  } catch (const InvalidInput& e) {
    v.outcome.ok = false;
    v.outcome.message = std::string("rejected a valid case: ") + e.what();
  } catch (const std::exception& e) {
    v.outcome.ok = false;
    v.outcome.message = std::string("threw: ") + e.what();
  }
  return v;
}

void record_counterexample(PropertyResult& r, Implementation& impl, Case c, const Outcome& o,
                           const VerifyOptions& options) {
  c.labels["property"] = r.name;
  c.labels["seed"] = std::to_string(options.seed);
  c.labels["implementation"] = impl.name();
  c.labels["message"] = o.message;
  r.message = o.message;
  if (!options.failures_dir.empty()) {
    try {
      std::filesystem::create_directories(options.failures_dir);
      const std::string path = fmt::format("{}/{}-{:08x}.json", options.failures_dir, r.name,
                                           fnv1a(case_to_json(c) + impl.name()) & 0xffffffffu);
      write_case_file(c, path);
      r.case_file = path;
    } catch (const std::exception& e) {
      r.message += fmt::format(" (case file not written: {})", e.what());
    }
  }
  if (r.status != Status::timed_out) {
    try {
      r.tables = compare_slice(impl, c, o.slice_b, o.slice_h);
    } catch (const std::exception& e) {
      r.tables = {{"slice", {o.slice_b, o.slice_h}}, {"error", e.what()}};
    }
  }
  r.counterexample = std::move(c);
}

// RapidCheck prints its configuration to stderr the first time it loads it;
// attncheck passes every parameter explicitly, so that line is only noise.
void load_rapidcheck_configuration_quietly() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::cerr.flush();
    const int saved = dup(2);
    const int null = open("/dev/null", O_WRONLY);
    if (saved >= 0 && null >= 0) dup2(null, 2);
    (void)rc::detail::configuration();
    std::cerr.flush();
    if (saved >= 0) {
      dup2(saved, 2);
      close(saved);
    }
    if (null >= 0) close(null);
  });
}

}  // namespace

std::string to_string(Status s) {
  switch (s) {
    case Status::passed: return "PASSED";
    case Status::failed: return "FAILED";
    case Status::skipped: return "SKIPPED";
    case Status::crashed: return "CRASHED";
    case Status::timed_out: return "TIMED_OUT";
  }
  return "?";
}

PropertyResult run_property(Implementation& impl, const Property& property, const VerifyOptions& options) {
  const auto start = Clock::now();
  PropertyResult r;
  r.name = property.name;
  const Capabilities caps = impl.capabilities();
  r.skipped_reason = property.skip_reason(caps, impl.precision());
  r.not_exercised = missing_capabilities(caps);
  if (!caps.weights && uses_weights(property.name)) r.not_exercised.push_back("weights");
  if (!r.skipped_reason.empty()) {
    r.status = Status::skipped;
    return r;
  }

  CaseRequest request = property.request(caps);
  request.max_n = options.max_n;
  request.max_d = std::min<int64_t>(options.max_n, 64);
  const rc::Gen<Case> gen = gen_case(request);
  load_rapidcheck_configuration_quietly();

  struct State {
    std::optional<Case> failing;  // the last failing case: after shrinking, the minimal one
    Outcome failing_outcome;
    std::optional<Status> fault;
    bool stop = false;  // after a timeout, further calls would only time out again
    int discarded = 0;
    int shrink_steps = 0;
    std::optional<double> worst;
    std::set<std::string> oracles;
  } state;

  auto body = [&] {
    const Case c = *gen;
    if (state.stop) RC_DISCARD("stopped after a timeout");
    // Shrinking stops after a budget of evaluations: the smallest failing case
    // found so far is kept (discarded candidates are never accepted).
    if (state.failing && ++state.shrink_steps > kShrinkBudget) RC_DISCARD("shrink budget spent");
    Verdict v = judge_case(property, impl, c, options.threads);
    if (v.outcome.discard) {
      ++state.discarded;
      RC_DISCARD(v.outcome.message);
    }
    if (v.outcome.worst_ratio && (!state.worst || *v.outcome.worst_ratio > *state.worst))
      state.worst = v.outcome.worst_ratio;
    if (!v.outcome.oracle.empty()) state.oracles.insert(v.outcome.oracle);
    if (!v.outcome.ok) {
      state.failing = c;
      state.failing_outcome = v.outcome;
      if (v.fault) state.fault = v.fault;
      if (v.fault == Status::timed_out) state.stop = true;
      RC_FAIL(v.outcome.message);
    }
  };

  rc::detail::TestParams params;
  params.seed = options.seed ^ fnv1a(property.name);
  params.maxSuccess = options.cases;
  params.maxSize = 100;
  params.maxDiscardRatio = 10;
  rc::detail::TestMetadata metadata;
  metadata.id = property.name;
  metadata.description = property.sentence;
  ProgressListener listener(options, property.name);
  const rc::detail::TestResult result =
      rc::detail::checkProperty(rc::detail::toProperty(body), metadata, params, listener);

  r.discarded = state.discarded;
  r.worst_ratio = property.has_bound ? state.worst : std::nullopt;
  r.oracles.assign(state.oracles.begin(), state.oracles.end());
  rc::detail::SuccessResult success;
  rc::detail::FailureResult failure;
  rc::detail::GaveUpResult gave_up;
  rc::detail::Error error;
  if (result.match(success)) {
    r.cases = success.numSuccess;
    r.status = r.cases > 0 ? Status::passed : Status::failed;
    if (r.cases == 0) r.message = "no case ran";
  } else if (result.match(failure)) {
    r.cases = failure.numSuccess + 1;
    r.status = state.fault.value_or(Status::failed);
    if (state.failing) {
      if (state.failing_outcome.worst_ratio && property.has_bound) r.worst_ratio = state.failing_outcome.worst_ratio;
      record_counterexample(r, impl, *state.failing, state.failing_outcome, options);
    } else {
      r.message = failure.description;
    }
  } else if (result.match(gave_up)) {
    r.cases = gave_up.numSuccess;
    r.status = Status::failed;
    r.message = fmt::format("gave up after {} cases: {} cases discarded ({})", r.cases, r.discarded,
                            gave_up.description);
  } else if (result.match(error)) {
    r.status = Status::failed;
    r.message = "RapidCheck error: " + error.description;
  }
  r.seconds = seconds_since(start);
  return r;
}

VerifyReport run_verify(Implementation& impl, const VerifyOptions& options) {
  VerifyReport report;
  report.implementation = impl.name();
  report.precision = impl.precision();
  report.capabilities = impl.capabilities();
  report.options = options;
  for (const std::string& name : options.properties)
    if (!find_property(name)) {
      std::string known;
      for (const Property& p : all_properties()) known += (known.empty() ? "" : ", ") + p.name;
      throw InvalidInput(fmt::format("option --property: unknown property '{}'; known: {}", name, known));
    }
  for (const Property& p : all_properties()) {
    if (!options.properties.empty() &&
        std::find(options.properties.begin(), options.properties.end(), p.name) == options.properties.end())
      continue;
    report.properties.push_back(run_property(impl, p, options));
  }
  return report;
}

std::vector<PropertyResult> replay_case(Implementation& impl, const Case& c, const VerifyOptions& options) {
  std::vector<const Property*> chosen;
  if (auto it = c.labels.find("property"); it != c.labels.end() && find_property(it->second)) {
    chosen.push_back(find_property(it->second));
  } else {
    for (const Property& p : all_properties()) chosen.push_back(&p);
  }
  std::vector<PropertyResult> results;
  for (const Property* p : chosen) {
    const auto start = Clock::now();
    PropertyResult r;
    r.name = p->name;
    r.skipped_reason = p->skip_reason(impl.capabilities(), impl.precision());
    if (!r.skipped_reason.empty()) {
      r.status = Status::skipped;
      results.push_back(r);
      continue;
    }
    const Verdict v = judge_case(*p, impl, c, options.threads);
    r.cases = v.outcome.discard ? 0 : 1;
    r.worst_ratio = p->has_bound ? v.outcome.worst_ratio : std::nullopt;
    if (!v.outcome.oracle.empty()) r.oracles.push_back(v.outcome.oracle);
    if (v.outcome.discard) {
      r.status = Status::skipped;
      r.skipped_reason = "the case does not exercise it: " + v.outcome.message;
    } else if (!v.outcome.ok) {
      r.status = v.fault.value_or(Status::failed);
      r.message = v.outcome.message;
      r.counterexample = c;
      if (r.status != Status::timed_out) {
        try {
          r.tables = compare_slice(impl, c, v.outcome.slice_b, v.outcome.slice_h);
        } catch (const std::exception&) {
        }
      }
    }
    r.seconds = seconds_since(start);
    results.push_back(std::move(r));
  }
  return results;
}

std::vector<MutantResult> hunt_mutants(const VerifyOptions& options) {
  std::vector<MutantResult> results;
  for (auto& mutant : make_mutants()) {
    MutantResult m;
    m.name = mutant->name();
    VerifyOptions o = options;
    for (const Property& p : all_properties()) {
      if (!options.properties.empty() &&
          std::find(options.properties.begin(), options.properties.end(), p.name) == options.properties.end())
        continue;
      const PropertyResult r = run_property(*mutant, p, o);
      if (r.status == Status::passed || r.status == Status::skipped) continue;
      m.killed = true;
      m.killed_by = p.name;
      m.message = r.message;
      m.case_file = r.case_file;
      if (r.counterexample) m.case_name = canonical_name(r.counterexample->problem);
      break;
    }
    results.push_back(std::move(m));
  }
  return results;
}

nlohmann::json error_versus_n(Implementation& impl, const std::vector<int64_t>& sizes) {
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t n : sizes)
    for (Causal causal : {Causal::none, Causal::top_left}) {
      Case c;
      c.problem.shape = {1, 1, n, n, 64, 64};
      c.problem.causal = causal;
      std::mt19937 rng(static_cast<unsigned>(n));
      std::uniform_real_distribution<float> value(-1, 1);
      for (auto* t : {&c.q, &c.k, &c.v}) {
        t->resize(static_cast<size_t>(n * 64));
        for (float& x : *t) x = value(rng);
      }
      const Oracle oracle = choose_oracle(c.problem, impl.precision());
      const std::vector<double> ref = oracle_attention(oracle, c, nullptr);
      const Run r = run_implementation(impl, c, false, 1);
      const ErrorBounds eb = forward_error_bounds(c, {unit_roundoff(impl.precision())});
      const Comparison cmp = compare(r.out, ref, eb.out);
      double max_abs = 0;
      for (size_t i = 0; i < ref.size(); ++i) max_abs = std::max(max_abs, std::fabs(r.out[i] - ref[i]));
      rows.push_back({{"n", n}, {"d", 64}, {"mask", causal == Causal::none ? "none" : "causal"},
                      {"max_abs_error", max_abs}, {"error_over_bound", cmp.worst_ratio},
                      {"oracle", to_string(oracle)}});
    }
  return rows;
}

nlohmann::json compare_slice(Implementation& impl, const Case& c, int64_t b, int64_t h) {
  const Shape& s = c.problem.shape;
  validate(c.problem, c.q, c.k, c.v);
  if (b < 0 || b >= s.batch || h < 0 || h >= s.heads)
    throw InvalidInput(fmt::format("slice ({}, {}) is outside batch {} × heads {}", b, h, s.batch, s.heads));
  const bool w = impl.capabilities().weights;
  const Oracle oracle = choose_oracle(c.problem, impl.precision());
  std::vector<double> ref_a;
  const std::vector<double> ref_o = oracle_attention(oracle, c, &ref_a);
  const Run r = run_implementation(impl, c, w, 1);
  const ErrorBounds eb = forward_error_bounds(c, {unit_roundoff(impl.precision())});
  const int64_t slice = b * s.heads + h;
  auto matrix = [](auto first, int64_t rows, int64_t cols) {
    nlohmann::json m = nlohmann::json::array();
    for (int64_t i = 0; i < rows; ++i) {
      nlohmann::json row = nlohmann::json::array();
      for (int64_t j = 0; j < cols; ++j) {
        const double x = static_cast<double>(first[i * cols + j]);
        row.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(fmt::format("{}", x)));
      }
      m.push_back(row);
    }
    return m;
  };
  nlohmann::json out;
  out["slice"] = {b, h};
  out["oracle"] = to_string(oracle);
  out["reference"] = {{"A", matrix(ref_a.begin() + slice * s.n_q * s.n_k, s.n_q, s.n_k)},
                      {"O", matrix(ref_o.begin() + slice * s.n_q * s.d_v, s.n_q, s.d_v)}};
  out["implementation"] = {{"O", matrix(r.out.begin() + slice * s.n_q * s.d_v, s.n_q, s.d_v)}};
  if (w) out["implementation"]["A"] = matrix(r.weights.begin() + slice * s.n_q * s.n_k, s.n_q, s.n_k);
  nlohmann::json cells = nlohmann::json::array();
  double worst = 0;
  for (int64_t i = 0; i < s.n_q; ++i)
    for (int64_t col = 0; col < s.d_v; ++col) {
      const size_t idx = static_cast<size_t>((slice * s.n_q + i) * s.d_v + col);
      const double err = std::fabs(r.out[idx] - ref_o[idx]);
      const double ratio = std::isfinite(err) ? err / eb.out[idx] : INFINITY;
      worst = std::max(worst, ratio);
      if (!(ratio <= 1))
        cells.push_back({{"table", "O"}, {"row", i}, {"col", col}, {"implementation", fmt::format("{:.9g}", r.out[idx])},
                         {"reference", ref_o[idx]}, {"error", fmt::format("{:.3g}", err)}, {"bound", eb.out[idx]}});
    }
  if (w)
    for (int64_t i = 0; i < s.n_q; ++i)
      for (int64_t j = 0; j < s.n_k; ++j) {
        const size_t idx = static_cast<size_t>((slice * s.n_q + i) * s.n_k + j);
        const double err = std::fabs(r.weights[idx] - ref_a[idx]);
        const double ratio = err == 0 ? 0 : (std::isfinite(err) ? err / eb.weights[idx] : INFINITY);
        worst = std::max(worst, ratio);
        if (!(ratio <= 1))
          cells.push_back({{"table", "A"}, {"row", i}, {"col", j}, {"implementation", fmt::format("{:.9g}", r.weights[idx])},
                           {"reference", ref_a[idx]}, {"error", fmt::format("{:.3g}", err)}, {"bound", eb.weights[idx]}});
      }
  out["differing_cells"] = cells;
  out["worst_error_over_bound"] = std::isfinite(worst) ? nlohmann::json(worst) : nlohmann::json("inf");
  return out;
}

std::string format_slice_comparison(const nlohmann::json& cmp) {
  std::string text;
  auto cell = [](const nlohmann::json& x) {
    return x.is_number() ? fmt::format("{:>13.6g}", x.get<double>()) : fmt::format("{:>13}", x.get<std::string>());
  };
  auto table = [&](const std::string& title, const nlohmann::json& m) {
    text += title + "\n";
    for (const auto& row : m) {
      for (const auto& x : row) text += cell(x);
      text += "\n";
    }
  };
  text += fmt::format("slice (b={}, h={}), judged by the {} reference\n", cmp["slice"][0].get<int64_t>(),
                      cmp["slice"][1].get<int64_t>(), cmp["oracle"].get<std::string>());
  table("O, reference:", cmp["reference"]["O"]);
  table("O, implementation:", cmp["implementation"]["O"]);
  if (cmp["implementation"].contains("A")) {
    table("A, reference:", cmp["reference"]["A"]);
    table("A, implementation:", cmp["implementation"]["A"]);
  }
  const auto& cells = cmp["differing_cells"];
  if (cells.empty()) {
    text += "no cell differs by more than its bound\n";
  } else {
    text += fmt::format("{} cell(s) differ by more than the bound:\n", cells.size());
    for (const auto& c : cells)
      text += fmt::format("  {}[{}][{}]: implementation {} reference {:.9g} error {} bound {:.3g}\n",
                          c["table"].get<std::string>(), c["row"].get<int64_t>(), c["col"].get<int64_t>(), c["implementation"].get<std::string>(),
                          c["reference"].get<double>(), c["error"].get<std::string>(), c["bound"].get<double>());
  }
  return text;
}

}  // namespace attncheck
