#include "attncheck/verify.h"

#include <fmt/format.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>
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
#include "attncheck/naive.h"
#include "attncheck/tolerance.h"

namespace attncheck {
namespace {

using Clock = std::chrono::steady_clock;

// Distinct notes kept per property; further ones are only counted.
constexpr size_t kMaxNotes = 20;

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

// An implementation that declines a case (Unsupported or InvalidInput thrown
// by forward()) is within its rights when the case is beyond its precision
// class (DESIGN.md "Range"); inside the class's range it is a failure.
Outcome judge_declined(Implementation& impl, const Case& c, const std::string& what, const char* in_range) {
  Outcome o;
  std::optional<std::string> beyond;
  try {
    beyond = out_of_class_range(c, impl.precision());
  } catch (const std::exception& e) {
    o.ok = false;
    o.message = fmt::format("{}{} (and the range check threw: {})", in_range, what, e.what());
    return o;
  }
  if (beyond) {
    o.unsupported = true;
    o.message = fmt::format("declined a case out of range for {} ({}): {}", to_string(impl.precision()), *beyond, what);
  } else {
    o.ok = false;
    o.message = in_range + what;
  }
  return o;
}

Verdict judge_case(const Property& property, Implementation& impl, const Case& c, int threads) {
  Verdict v;
  try {
    v.outcome = property.check(impl, c, threads);
  } catch (const ImplementationFault& f) {
    v.fault = fault_status(f);
    v.outcome.ok = false;
    v.outcome.message = fmt::format("the implementation {}: {}",
                                    *v.fault == Status::timed_out ? "timed out" : "crashed", f.what());
  } catch (const Unsupported& e) {
    v.outcome = judge_declined(impl, c, e.what(), "declined a case inside its class's range: ");
  } catch (const InvalidInput& e) {
    v.outcome = judge_declined(impl, c, e.what(), "rejected a valid case: ");
  } catch (const std::exception& e) {
    v.outcome.ok = false;
    v.outcome.message = std::string("threw: ") + e.what();
  }
  return v;
}

// Writes r.counterexample (labelled) to failures_dir and sets r.case_file.
void write_counterexample_file(PropertyResult& r, const std::string& implementation, const std::string& failures_dir) {
  if (failures_dir.empty() || !r.counterexample) return;
  try {
    std::filesystem::create_directories(failures_dir);
    const std::string path = fmt::format("{}/{}-{:08x}.json", failures_dir, r.name,
                                         fnv1a(case_to_json(*r.counterexample) + implementation) & 0xffffffffu);
    write_case_file(*r.counterexample, path);
    r.case_file = path;
  } catch (const std::exception& e) {
    r.message += fmt::format(" (case file not written: {})", e.what());
  }
}

// Hands a written case file to options.on_case_written; its failure is noted, never fatal.
void announce_case_file(PropertyResult& r, Implementation& impl, int64_t b, int64_t h, const VerifyOptions& options) {
  if (!options.on_case_written || r.case_file.empty() || !r.counterexample || r.status == Status::timed_out) return;
  try {
    options.on_case_written(r.case_file, *r.counterexample, impl, b, h);
  } catch (const std::exception& e) {
    r.message += fmt::format(" (case page not written: {})", e.what());
  }
}

void record_counterexample(PropertyResult& r, Implementation& impl, Case c, const Outcome& o,
                           const VerifyOptions& options) {
  c.labels["property"] = r.name;
  c.labels["seed"] = std::to_string(options.seed);
  c.labels["implementation"] = impl.name();
  c.labels["message"] = o.message;
  if (!o.sent.empty()) c.labels["sent"] = o.sent;  // the bad input made from the case
  r.message = o.message;
  r.counterexample = c;
  write_counterexample_file(r, impl.name(), options.failures_dir);
  announce_case_file(r, impl, o.slice_b, o.slice_h, options);
  if (r.status != Status::timed_out) {
    try {
      r.tables = compare_slice(impl, c, o.slice_b, o.slice_h);
    } catch (const std::exception& e) {
      r.tables = {{"slice", {o.slice_b, o.slice_h}}, {"error", e.what()}};
    }
  }
}

void add_notes(std::vector<std::string>& notes, int& dropped, const std::vector<std::string>& more) {
  for (const std::string& n : more) {
    if (std::find(notes.begin(), notes.end(), n) != notes.end()) continue;
    if (notes.size() < kMaxNotes) notes.push_back(n);
    else ++dropped;
  }
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
    case Status::inconclusive: return "INCONCLUSIVE";
  }
  return "?";
}

std::string to_string(MutantVerdict v) {
  switch (v) {
    case MutantVerdict::killed_as_expected: return "KILLED_AS_EXPECTED";
    case MutantVerdict::escaped: return "ESCAPED";
    case MutantVerdict::killed_unexpectedly: return "KILLED_UNEXPECTEDLY";
  }
  return "?";
}

bool inconclusive_flagged(const PropertyResult& r) {
  const int checked = r.cases + r.inconclusive;
  return r.inconclusive > 0 && r.inconclusive > kInconclusiveFlagFraction * checked;
}

std::string inconclusive_text(const PropertyResult& r) {
  if (r.inconclusive == 0) return "";
  const int checked = r.cases + r.inconclusive;
  return fmt::format("{} of {} checked cases ({:.0f} %) inconclusive{}: {}", r.inconclusive, checked,
                     100.0 * r.inconclusive / checked,
                     inconclusive_flagged(r) ? fmt::format(", more than {:.0f} %", 100 * kInconclusiveFlagFraction) : "",
                     r.inconclusive_reason);
}

bool is_kill(const PropertyResult& r) { return r.status == Status::failed && r.counterexample.has_value(); }

MutantVerdict mutant_verdict(const std::vector<KillCell>& row) {
  bool any = false, expected = false;
  for (const KillCell& c : row) {
    any = any || c.kill;
    expected = expected || (c.kill && c.expected);
  }
  return expected ? MutantVerdict::killed_as_expected : any ? MutantVerdict::killed_unexpectedly : MutantVerdict::escaped;
}

bool all_mutants_killed_as_expected(const std::vector<MutantResult>& mutants) {
  return std::all_of(mutants.begin(), mutants.end(),
                     [](const MutantResult& m) { return m.verdict == MutantVerdict::killed_as_expected; });
}

namespace {

// What the properties of one run share: its start (the run-wide time budget)
// and whether a timeout was already shrunk (the others need not shrink theirs).
struct RunState {
  Clock::time_point start = Clock::now();
  std::string shrank_timeout_in;  // the property that shrank a timeout; empty: none yet
};

// The sum of a case's sizes: a hang's shrinking accepts only smaller ones.
int64_t shape_size(const Case& c) {
  const Shape& s = c.problem.shape;
  return s.batch + s.heads + s.n_q + s.n_k + s.d_k + s.d_v;
}

// Cases of chunk `chunk` of `chunks`: consecutive shares of `cases`, the first
// ones one larger when they do not divide evenly.
int chunk_cases(int cases, int chunks, int chunk) { return cases / chunks + (chunk < cases % chunks ? 1 : 0); }

PropertyResult run_property_chunk(Implementation& impl, const Property& property, const VerifyOptions& options,
                                  int chunk, RunState* run) {
  const auto start = Clock::now();
  PropertyResult r;
  r.name = property.name;
  r.chunks = {chunk};
  const Capabilities caps = impl.capabilities();
  r.skipped_reason = property.skip_reason(caps, impl.precision());
  r.not_exercised = missing_capabilities(caps);
  if (!caps.weights && uses_weights(property.name)) r.not_exercised.push_back("weights");
  if (!r.skipped_reason.empty()) {
    r.status = Status::skipped;
    return r;
  }
  const int wanted = chunk_cases(options.cases, std::max(options.case_chunks, 1), chunk);

  CaseRequest request = property.request(caps);
  request.max_n = options.max_n;
  request.max_d = std::min<int64_t>(options.max_n, 64);
  request.precision = impl.precision();
  const rc::Gen<Case> gen = gen_case(request);
  load_rapidcheck_configuration_quietly();

  // Why the run stopped drawing cases before RapidCheck's own limits.
  enum class Stop { none, timeout, discards, inconclusive, unsupported, budget };
  struct State {
    std::optional<Case> failing;  // the last failing case: after shrinking, the minimal one
    Outcome failing_outcome;
    std::optional<Status> fault;
    Stop stop = Stop::none;
    int discarded = 0, inconclusive = 0, unsupported = 0;
    std::string inconclusive_reason, unsupported_reason;
    std::vector<std::string> notes;
    int dropped_notes = 0;
    int shrink_steps = 0;
    int timed_out = 0, timed_out_shrinking = 0;
    std::string cut_short;
    std::optional<double> worst;
    std::set<std::string> oracles;
  } state;
  // Each budget is counted outside shrinking only; past it the run discards
  // every further case without evaluating it, until RapidCheck gives up.
  const int64_t cases = std::max(wanted, 0);
  auto over = [&](int count, int budget) { return count > budget * cases; };
  // The time budgets: the reason the property must stop now, or empty.
  auto time_spent = [&]() -> std::string {
    if (options.property_time_budget > 0 && seconds_since(start) > options.property_time_budget)
      return fmt::format("the per-property time budget of {:g} s was spent", options.property_time_budget);
    if (run && options.time_budget > 0 && seconds_since(run->start) > options.time_budget)
      return fmt::format("the run's time budget of {:g} s was spent", options.time_budget);
    return "";
  };

  auto body = [&] {
    // A spent time budget ends the run at once: a failure before any value is
    // generated has nothing to shrink (discarding would draw on to RapidCheck's
    // discard limit). The result is read as cut short, not as a failure.
    if (state.stop == Stop::budget) RC_FAIL("time budget spent");
    if (state.stop != Stop::none) RC_DISCARD("stopped");
    if (std::string spent = time_spent(); !spent.empty()) {
      state.cut_short = std::move(spent);
      state.stop = Stop::budget;
      RC_FAIL("time budget spent");
    }
    const Case c = *gen;
    const bool shrinking = state.failing.has_value();
    // Shrinking stops after a budget of evaluations: the smallest failing case
    // found so far is kept (discarded candidates are never accepted).
    if (shrinking && ++state.shrink_steps > options.shrink_budget) RC_DISCARD("shrink budget spent");
    // Each candidate of a hanging case that hangs too costs a whole per-call
    // timeout: only smaller shapes are worth it (not other values or flags).
    if (shrinking && state.fault == Status::timed_out && shape_size(c) >= shape_size(*state.failing))
      RC_DISCARD("a hang shrinks by its shape");
    Verdict v = judge_case(property, impl, c, options.threads);
    const Outcome& o = v.outcome;
    if (v.fault == Status::timed_out) {
      // Every timeout cost a whole per-call timeout: count them, and bound how
      // many shrinking may spend before the smallest hanging case is kept.
      ++state.timed_out;
      if (shrinking && ++state.timed_out_shrinking >= options.timed_out_shrink_steps) state.stop = Stop::timeout;
      if (!shrinking && ((run && !run->shrank_timeout_in.empty()) || options.timed_out_shrink_steps <= 0))
        state.stop = Stop::timeout;
    }
    // A failure wins over the flags; of the flags, discard, then unsupported, then inconclusive.
    if (o.discard) {
      if (!shrinking && over(++state.discarded, kDiscardBudget)) state.stop = Stop::discards;
      RC_DISCARD(o.message);
    }
    if (!o.oracle.empty()) state.oracles.insert(o.oracle);
    if (!shrinking) add_notes(state.notes, state.dropped_notes, o.notes);
    if (o.ok && o.unsupported) {
      if (!shrinking) {
        if (state.unsupported_reason.empty()) state.unsupported_reason = o.message;
        if (over(++state.unsupported, kUnsupportedBudget)) state.stop = Stop::unsupported;
      }
      RC_DISCARD(o.message);
    }
    if (o.ok && o.inconclusive) {
      // Never a pass: RapidCheck draws another case in its place.
      if (!shrinking) {
        if (state.inconclusive_reason.empty()) state.inconclusive_reason = o.message;
        if (over(++state.inconclusive, kInconclusiveBudget)) state.stop = Stop::inconclusive;
      }
      RC_DISCARD(o.message);
    }
    if (o.worst_ratio && (!state.worst || *o.worst_ratio > *state.worst)) state.worst = o.worst_ratio;
    if (!o.ok) {
      state.failing = c;
      state.failing_outcome = o;
      state.fault = v.fault;  // the kind of the smallest failing case found so far
      RC_FAIL(o.message);
    }
  };

  rc::detail::TestParams params;
  params.seed = options.seed ^ fnv1a(chunk == 0 ? property.name : fmt::format("{}#{}", property.name, chunk));
  params.maxSuccess = wanted;
  params.maxSize = 100;
  params.disableShrinking = options.shrink_budget <= 0;
  // Above the sum of attncheck's own budgets, so that RapidCheck gives up only
  // after one of them stopped the run (then quickly: stopped cases are not evaluated).
  params.maxDiscardRatio = kDiscardBudget + kInconclusiveBudget + kUnsupportedBudget + 2;
  rc::detail::TestMetadata metadata;
  metadata.id = property.name;
  metadata.description = property.sentence;
  VerifyOptions chunk_options = options;
  chunk_options.cases = wanted;
  ProgressListener listener(chunk_options, property.name);
  const rc::detail::TestResult result =
      rc::detail::checkProperty(rc::detail::toProperty(body), metadata, params, listener);

  r.discarded = state.discarded;
  r.inconclusive = state.inconclusive;
  r.unsupported = state.unsupported;
  r.inconclusive_reason = state.inconclusive_reason;
  r.unsupported_reason = state.unsupported_reason;
  r.timed_out = state.timed_out;
  r.cut_short = state.cut_short;
  r.notes = state.notes;
  if (state.dropped_notes > 0) r.notes.push_back(fmt::format("({} further distinct notes not kept)", state.dropped_notes));
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
  } else if (result.match(failure) && !state.failing && state.stop == Stop::budget) {
    // Every case it ran passed, but not every case it should have run.
    r.cases = failure.numSuccess;
    r.status = r.cases > 0 ? Status::passed : Status::skipped;
    if (r.cases == 0) r.skipped_reason = "not run: " + r.cut_short;
    else r.message = fmt::format("cut short after {} of {} cases: {}", r.cases, wanted, r.cut_short);
  } else if (result.match(failure)) {
    r.cases = failure.numSuccess + 1;
    r.status = state.fault.value_or(Status::failed);
    if (state.failing) {
      if (state.failing_outcome.worst_ratio && property.has_bound) r.worst_ratio = state.failing_outcome.worst_ratio;
      record_counterexample(r, impl, *state.failing, state.failing_outcome, options);
      if (r.status == Status::timed_out && run) {
        if (run->shrank_timeout_in.empty() && state.timed_out_shrinking > 0) run->shrank_timeout_in = property.name;
        else if (!run->shrank_timeout_in.empty() && run->shrank_timeout_in != property.name)
          r.message += fmt::format(" (not shrunk: {} shrank this run's timeout)", run->shrank_timeout_in);
      }
      if (!r.cut_short.empty()) r.message += " (shrinking was cut short: " + r.cut_short + ")";
    } else {
      r.message = failure.description;
    }
  } else if (result.match(gave_up)) {
    r.cases = gave_up.numSuccess;
    if (state.stop == Stop::inconclusive) {
      r.status = Status::inconclusive;
      r.message = fmt::format("only {} of {} cases could be judged: {} were inconclusive ({})", r.cases, wanted,
                              r.inconclusive, r.inconclusive_reason);
    } else if (state.stop == Stop::unsupported && r.cases == 0 && r.inconclusive == 0) {
      r.status = Status::skipped;
      r.skipped_reason = fmt::format("the implementation declined every case ({}) as out of range for its class: {}",
                                     r.unsupported, r.unsupported_reason);
    } else if (state.stop == Stop::unsupported && r.cases == 0) {
      r.status = Status::inconclusive;
      r.message = fmt::format("no case could be judged: {} declined as out of range, {} inconclusive ({})",
                              r.unsupported, r.inconclusive, r.inconclusive_reason);
    } else if (state.stop == Stop::unsupported) {
      // Every case it accepted passed; the counts say how few those were.
      r.status = Status::passed;
      r.message = fmt::format("only {} of {} cases ran: {} were declined as out of range", r.cases, wanted,
                              r.unsupported);
    } else {
      r.status = Status::failed;
      r.message = fmt::format("gave up after {} cases: {} cases discarded ({})", r.cases, r.discarded,
                              gave_up.description);
    }
  } else if (result.match(error)) {
    r.status = Status::failed;
    r.message = "RapidCheck error: " + error.description;
  }
  r.seconds = seconds_since(start);
  return r;
}

bool is_failure(Status s) { return s == Status::failed || s == Status::crashed || s == Status::timed_out; }

}  // namespace

PropertyResult run_property(Implementation& impl, const Property& property, const VerifyOptions& options) {
  VerifyOptions whole = options;
  whole.case_chunks = 1;
  return run_property_chunk(impl, property, whole, 0, nullptr);
}

PropertyResult merge_chunks(const std::vector<PropertyResult>& chunks) {
  if (chunks.empty()) throw std::logic_error("merge_chunks: no chunk");
  if (chunks.size() == 1) return chunks.front();
  PropertyResult r;
  r.name = chunks.front().name;
  r.not_exercised = chunks.front().not_exercised;
  const PropertyResult* verdict = nullptr;  // the chunk whose verdict the property takes
  for (Status s : {Status::failed, Status::inconclusive, Status::passed, Status::skipped})
    for (const PropertyResult& c : chunks)
      if (!verdict && (s == Status::failed ? is_failure(c.status) : c.status == s)) verdict = &c;
  std::set<std::string> oracles;
  int dropped = 0;
  for (const PropertyResult& c : chunks) {
    r.cases += c.cases;
    r.discarded += c.discarded;
    r.inconclusive += c.inconclusive;
    r.unsupported += c.unsupported;
    r.timed_out += c.timed_out;
    r.seconds += c.seconds;
    r.chunks.insert(r.chunks.end(), c.chunks.begin(), c.chunks.end());
    if (r.inconclusive_reason.empty()) r.inconclusive_reason = c.inconclusive_reason;
    if (r.unsupported_reason.empty()) r.unsupported_reason = c.unsupported_reason;
    if (r.cut_short.empty()) r.cut_short = c.cut_short;
    add_notes(r.notes, dropped, c.notes);
    oracles.insert(c.oracles.begin(), c.oracles.end());
    if (c.worst_ratio && (!r.worst_ratio || *c.worst_ratio > *r.worst_ratio)) r.worst_ratio = c.worst_ratio;
  }
  if (dropped > 0) r.notes.push_back(fmt::format("({} further distinct notes not kept)", dropped));
  r.oracles.assign(oracles.begin(), oracles.end());
  r.status = verdict->status;
  r.message = verdict->message;
  if (r.status == Status::skipped) r.skipped_reason = verdict->skipped_reason;
  if (is_failure(r.status)) {
    r.worst_ratio = verdict->worst_ratio;
    r.counterexample = verdict->counterexample;
    r.case_file = verdict->case_file;
    r.tables = verdict->tables;
  }
  return r;
}

void parse_shard(const std::string& text, VerifyOptions& options) {
  int index = 0, count = 0;
  const char* end = text.data() + text.size();
  const auto slash = text.find('/');
  bool ok = slash != std::string::npos && slash > 0;
  if (ok) {
    const auto [p1, e1] = std::from_chars(text.data(), text.data() + slash, index);
    const auto [p2, e2] = std::from_chars(text.data() + slash + 1, end, count);
    ok = e1 == std::errc() && p1 == text.data() + slash && e2 == std::errc() && p2 == end && slash + 1 < text.size();
  }
  if (!ok)
    throw InvalidInput(fmt::format("option --shard: '{}' is not a shard spec; give I/N, e.g. 2/3 (shard 2 of 3)", text));
  if (count < 1) throw InvalidInput(fmt::format("option --shard: '{}' has {} shards; N must be at least 1", text, count));
  if (index < 1 || index > count)
    throw InvalidInput(fmt::format("option --shard: '{}': shard I must be from 1 to N = {}", text, count));
  options.shard_index = index;
  options.shard_count = count;
}

void check_shard_options(const VerifyOptions& o) {
  if (o.shard_count < 1 || o.shard_index < 1 || o.shard_index > o.shard_count)
    throw InvalidInput(fmt::format("option --shard: {}/{}: shard I must be from 1 to N, N at least 1", o.shard_index,
                                   o.shard_count));
  if (o.case_chunks < 1 || o.case_chunks > o.cases)
    throw InvalidInput(fmt::format("option --case-chunks is {}; it must be from 1 to --cases ({})", o.case_chunks,
                                   o.cases));
  if (!(o.time_budget >= 0) || !std::isfinite(o.time_budget))
    throw InvalidInput(fmt::format("option --time-budget is {}; it must be a number of seconds >= 0", o.time_budget));
  if (!(o.property_time_budget >= 0) || !std::isfinite(o.property_time_budget))
    throw InvalidInput(fmt::format("option --property-time-budget is {}; it must be a number of seconds >= 0",
                                   o.property_time_budget));
}

VerifyReport run_verify(Implementation& impl, const VerifyOptions& options) {
  check_shard_options(options);
  VerifyReport report;
  report.implementation = impl.name();
  report.declared_name = impl.declared_name();
  report.precision = impl.precision();
  report.capabilities = impl.capabilities();
  report.options = options;
  for (const std::string& name : options.properties)
    if (!find_property(name)) {
      std::string known;
      for (const Property& p : all_properties()) known += (known.empty() ? "" : ", ") + p.name;
      throw InvalidInput(fmt::format("option --property: unknown property '{}'; known: {}", name, known));
    }
  RunState run;
  int unit = 0;  // work units (property, chunk) in property order, then chunk order
  for (const Property& p : all_properties()) {
    if (!options.properties.empty() &&
        std::find(options.properties.begin(), options.properties.end(), p.name) == options.properties.end())
      continue;
    std::vector<PropertyResult> chunks;
    for (int chunk = 0; chunk < options.case_chunks; ++chunk, ++unit)
      if (unit % options.shard_count + 1 == options.shard_index)
        chunks.push_back(run_property_chunk(impl, p, options, chunk, &run));
    if (chunks.empty()) continue;
    if (options.shard_count > 1) report.units.insert(report.units.end(), chunks.begin(), chunks.end());
    report.properties.push_back(merge_chunks(chunks));
    if (options.on_property) options.on_property(report.properties.back());
  }
  return report;
}

std::string shell_command(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& w : words) {
    if (!line.empty()) line += ' ';
    const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](unsigned char ch) {
      return std::isalnum(ch) || std::string_view("_@%+=:,./-").find(static_cast<char>(ch)) != std::string_view::npos;
    });
    if (plain) {
      line += w;
      continue;
    }
    line += '\'';
    for (char ch : w) line += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    line += '\'';
  }
  return line;
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
    const Outcome& o = v.outcome;
    const bool judged = !o.discard && (!o.ok || (!o.unsupported && !o.inconclusive));
    r.cases = judged ? 1 : 0;
    r.worst_ratio = p->has_bound && judged ? o.worst_ratio : std::nullopt;
    if (!o.oracle.empty()) r.oracles.push_back(o.oracle);
    int dropped = 0;
    add_notes(r.notes, dropped, o.notes);
    if (o.discard) {
      r.status = Status::skipped;
      r.skipped_reason = "the case does not exercise it: " + o.message;
    } else if (o.ok && o.unsupported) {
      r.status = Status::skipped;
      r.unsupported = 1;
      r.unsupported_reason = o.message;
      r.skipped_reason = o.message;
    } else if (o.ok && o.inconclusive) {
      r.status = Status::inconclusive;
      r.inconclusive = 1;
      r.inconclusive_reason = o.message;
      r.message = "the case could not be judged: " + o.message;
    } else if (!v.outcome.ok) {
      r.status = v.fault.value_or(Status::failed);
      r.message = v.outcome.message;
      r.counterexample = c;
      if (!v.outcome.sent.empty()) r.counterexample->labels["sent"] = v.outcome.sent;
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
  std::map<std::string, std::vector<std::string>> expected;
  for (const FlawInfo& f : all_flaws()) expected["mutant:" + f.name] = f.killed_by;
  return hunt_mutants(make_mutants(), expected, options);
}

std::vector<MutantResult> hunt_mutants(std::vector<std::unique_ptr<Implementation>> mutants,
                                       const std::map<std::string, std::vector<std::string>>& expected,
                                       const VerifyOptions& options) {
  std::vector<const Property*> selected;
  for (const Property& p : all_properties())
    if (options.properties.empty() ||
        std::find(options.properties.begin(), options.properties.end(), p.name) != options.properties.end())
      selected.push_back(&p);
  std::vector<MutantResult> results;
  for (auto& mutant : mutants) {
    MutantResult m;
    m.name = mutant->name();
    if (auto it = expected.find(m.name); it != expected.end()) m.expected_killers = it->second;
    // The matrix needs a verdict per cell, not a minimal case: cells are not
    // shrunk, and only the shown counterexample is shrunk and written, below.
    VerifyOptions o = options;
    o.failures_dir.clear();
    o.shrink_budget = 0;
    if (options.progress)
      o.progress = [&](const std::string& property, int done, int total, bool shrinking) {
        options.progress(m.name + " " + property, done, total, shrinking);
      };
    std::optional<PropertyResult> shown;
    const Property* shown_property = nullptr;
    int shown_cases = 0;
    for (const Property* p : selected) {
      KillCell cell;
      cell.property = p->name;
      cell.expected =
          std::find(m.expected_killers.begin(), m.expected_killers.end(), p->name) != m.expected_killers.end();
      o.cases = cell.expected || options.matrix_cases <= 0 ? options.cases : std::min(options.cases, options.matrix_cases);
      PropertyResult r = run_property(*mutant, *p, o);
      cell.status = r.status;
      cell.kill = is_kill(r);
      m.matrix.push_back(cell);
      // Show the first expected killer's counterexample, else the first killer's.
      const bool shown_expected =
          shown && std::find(m.expected_killers.begin(), m.expected_killers.end(), shown->name) != m.expected_killers.end();
      if (cell.kill && (!shown || (cell.expected && !shown_expected))) {
        shown = std::move(r);
        shown_property = p;
        shown_cases = o.cases;
      }
    }
    m.verdict = mutant_verdict(m.matrix);
    if (shown) {
      m.killed = true;
      // The same seed and case count find the same failure again, now shrunk to a minimal case.
      VerifyOptions again = options;
      again.cases = shown_cases;
      again.progress = o.progress;
      PropertyResult shrunk = run_property(*mutant, *shown_property, again);
      if (is_kill(shrunk)) shown = std::move(shrunk);
      else {
        write_counterexample_file(*shown, m.name, options.failures_dir);
        const nlohmann::json& slice = shown->tables.is_object() ? shown->tables.value("slice", nlohmann::json()) : nlohmann::json();
        announce_case_file(*shown, *mutant, slice.is_array() ? slice[0].get<int64_t>() : 0,
                           slice.is_array() ? slice[1].get<int64_t>() : 0, options);
      }
      m.killed_by = shown->name;
      m.message = shown->message;
      m.case_file = shown->case_file;
      const auto& labels = shown->counterexample->labels;  // input_validation: the bad input sent
      m.case_name = labels.count("sent") ? labels.at("sent") : canonical_name(shown->counterexample->problem);
    }
    results.push_back(std::move(m));
  }
  return results;
}

std::string format_kill_matrix(const std::vector<MutantResult>& mutants) {
  std::vector<std::string> columns;
  for (const MutantResult& m : mutants)
    for (const KillCell& c : m.matrix)
      if (std::find(columns.begin(), columns.end(), c.property) == columns.end()) columns.push_back(c.property);
  size_t width = 6;
  for (const MutantResult& m : mutants) width = std::max(width, m.name.size());
  std::string text = fmt::format("{:<{}}", "mutant", width);
  for (size_t i = 0; i < columns.size(); ++i) text += fmt::format(" {:>3}", i + 1);
  text += "  verdict\n";
  for (const MutantResult& m : mutants) {
    text += fmt::format("{:<{}}", m.name, width);
    for (const std::string& property : columns) {
      const auto cell = std::find_if(m.matrix.begin(), m.matrix.end(),
                                     [&](const KillCell& c) { return c.property == property; });
      if (cell == m.matrix.end()) {
        text += "    ";
        continue;
      }
      char code = 'G';
      if (cell->kill) code = 'K';
      else if (cell->status == Status::passed) code = '.';
      else if (cell->status == Status::skipped) code = 's';
      else if (cell->status == Status::inconclusive) code = 'i';
      else if (cell->status == Status::crashed) code = 'C';
      else if (cell->status == Status::timed_out) code = 'T';
      text += cell->expected ? fmt::format(" [{}]", code) : fmt::format("  {} ", code);
    }
    text += "  " + to_string(m.verdict) + "\n";
  }
  text += "columns:";
  for (size_t i = 0; i < columns.size(); ++i) text += fmt::format(" {} {}{}", i + 1, columns[i], i + 1 < columns.size() ? "," : "");
  text += "\ncells: K killed (FAILED with a counterexample), . passed, s skipped, i inconclusive, C crashed, "
          "T timed out, G gave up or FAILED without a counterexample; [ ] an expected killer\n";
  for (const MutantResult& m : mutants) {
    if (m.killed)
      text += fmt::format("{}: killed by {}, minimal case {}{}\n", m.name, m.killed_by, m.case_name,
                          m.case_file.empty() ? "" : " (" + m.case_file + ")");
    if (m.verdict == MutantVerdict::killed_as_expected) continue;
    std::vector<std::string> expected;
    for (const std::string& e : m.expected_killers) {
      const auto cell = std::find_if(m.matrix.begin(), m.matrix.end(), [&](const KillCell& c) { return c.property == e; });
      expected.push_back(cell == m.matrix.end() ? e + " not run" : e + " " + to_string(cell->status));
    }
    const std::string expectation =
        m.expected_killers.empty() ? "no expected killer is named" : fmt::format("expected killers: {}", fmt::join(expected, ", "));
    text += m.verdict == MutantVerdict::escaped
                ? fmt::format("{}: ESCAPED: no property failed with a counterexample ({})\n", m.name, expectation)
                : fmt::format("{}: KILLED_UNEXPECTEDLY: killed only by properties not expected to kill it ({})\n",
                              m.name, expectation);
  }
  return text;
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
      const ErrorBounds eb = forward_error_bounds(c, {impl.precision()});
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
  const ErrorBounds eb = forward_error_bounds(c, {impl.precision()});
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
