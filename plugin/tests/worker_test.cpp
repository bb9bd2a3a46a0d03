// The plugin worker against plugins that end their process from inside
// forward (raised, sent and real signals, exit, _exit) or tamper with its
// control channel (tests/hostile_signal_plugin.c), its persistence and
// restarts, the per-call timeout's scaling, and the reported compute time.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "attncheck/plugin.h"

using namespace attncheck;
using Kind = ImplementationFault::Kind;

namespace {

std::string signal_plugin(const std::string& name) {
  return std::string(ATTNCHECK_PLUGIN_DIR) + "/libattn_signal_" + name + "_plugin.so";
}

struct Case {
  Problem problem;
  std::vector<float> q, k, v, out;
};

Case small_case(float q0 = 0.5f) {
  Case c;
  c.problem.shape = {1, 2, 3, 4, 2, 3};
  const Shape& s = c.problem.shape;
  for (int64_t i = 0; i < s.q_size(); ++i) c.q.push_back(std::cos(0.3f * float(i)));
  for (int64_t i = 0; i < s.k_size(); ++i) c.k.push_back(std::sin(0.7f * float(i)));
  for (int64_t i = 0; i < s.v_size(); ++i) c.v.push_back(float(i % 5) - 2.0f);
  c.q[0] = q0;
  c.out.assign(size_t(s.out_size()), 42.0f);
  return c;
}

OutOfProcessOptions options(int timeout_ms = 10000) {
  OutOfProcessOptions o;
  o.timeout_ms = timeout_ms;
  return o;
}

ImplementationFault fault_of(Implementation& impl, Case c) {
  try {
    impl.forward(c.problem, c.q, c.k, c.v, c.out, {}, 1);
  } catch (const ImplementationFault& fault) {
    for (float x : c.out) REQUIRE(x == 42.0f);  // nothing reaches the caller from a failed call
    return fault;
  }
  FAIL("no fault raised by " << impl.name());
  throw std::logic_error("unreachable");
}

ImplementationFault fault_of(const std::string& name) {
  auto impl = load_plugin(signal_plugin(name), options());
  return fault_of(*impl, small_case());
}

// The process id the pid_or_misbehave plugin wrote into every output element.
float worker_pid(Implementation& impl) {
  Case c = small_case();
  impl.forward(c.problem, c.q, c.k, c.v, c.out, {}, 1);
  for (float x : c.out) REQUIRE(x == c.out[0]);
  return c.out[0];
}

}  // namespace

TEST_CASE("a fatal signal raised, sent or caused inside forward is a crash naming the signal") {
  struct Expected {
    const char* plugin;
    const char* signal;
  };
  const Expected expected[] = {
      {"raise_segv", "signal 11 (SIGSEGV"}, {"raise_bus", "signal 7 (SIGBUS"},
      {"raise_fpe", "signal 8 (SIGFPE"},    {"raise_ill", "signal 4 (SIGILL"},
      {"raise_abrt", "signal 6 (SIGABRT"},  {"kill_segv", "signal 11 (SIGSEGV"},
      {"kill_kill", "signal 9 (SIGKILL"},   {"real_fpe", "signal 8 (SIGFPE"},
      {"real_ill", "signal 4 (SIGILL"},     {"abort", "signal 6 (SIGABRT"},
  };
  for (const Expected& e : expected) {
    INFO(e.plugin);
    const ImplementationFault fault = fault_of(e.plugin);
    CHECK(fault.kind() == Kind::crashed);
    CHECK_THAT(fault.what(), Catch::Contains("killed by " + std::string(e.signal)) &&
                                 Catch::Contains("signal-c on b1h2q3k4d2v3"));
  }
}

TEST_CASE("exit() or _exit() inside forward is a crash with the exit status") {
  const ImplementationFault exited = fault_of("exit");
  CHECK(exited.kind() == Kind::crashed);
  CHECK_THAT(exited.what(), Catch::Contains("exited with status") && Catch::Contains("inside the call"));
  const ImplementationFault underscore = fault_of("underscore_exit");
  CHECK(underscore.kind() == Kind::crashed);
  CHECK_THAT(underscore.what(), Catch::Contains("exited with status 0 inside the call"));
}

TEST_CASE("a plugin that closes the control channel is a crash saying so, even if it then hangs") {
  const ImplementationFault closed = fault_of("close_channel");
  CHECK(closed.kind() == Kind::crashed);
  CHECK_THAT(closed.what(), Catch::Contains("control channel"));

  const auto begin = std::chrono::steady_clock::now();
  const ImplementationFault hung = fault_of("close_and_hang");
  CHECK(hung.kind() == Kind::crashed);
  CHECK_THAT(hung.what(), Catch::Contains("control channel") && Catch::Contains("was killed"));
  // Found at the end of file, not at the call's timeout (1 s for this size).
  CHECK(std::chrono::steady_clock::now() - begin < std::chrono::milliseconds(1500));
}

TEST_CASE("a plugin that writes to the control channel is a protocol fault quoting it") {
  const ImplementationFault fault = fault_of("write_channel");
  CHECK(fault.kind() == Kind::protocol);
  CHECK_THAT(fault.what(), Catch::Contains("control channel") && Catch::Contains("not a reply"));
}

TEST_CASE("one worker serves every call, and is replaced after a crash, a timeout or a stray write") {
  auto impl = load_plugin(signal_plugin("pid_or_misbehave"), options(5000));
  const float first = worker_pid(*impl);
  CHECK(worker_pid(*impl) == first);
  CHECK(worker_pid(*impl) == first);

  CHECK(fault_of(*impl, small_case(-1.0f)).kind() == Kind::crashed);
  const float after_crash = worker_pid(*impl);
  CHECK(after_crash != first);
  CHECK(worker_pid(*impl) == after_crash);

  CHECK(fault_of(*impl, small_case(-2.0f)).kind() == Kind::timed_out);
  const float after_timeout = worker_pid(*impl);
  CHECK(after_timeout != after_crash);

  const ImplementationFault stray = fault_of(*impl, small_case(-3.0f));
  CHECK(stray.kind() == Kind::wrote_out_of_bounds);
  CHECK_THAT(stray.what(), Catch::Contains("past the end of out"));
  CHECK(worker_pid(*impl) != after_timeout);
}

TEST_CASE("the per-call timeout scales with the problem's size, up to --timeout-ms") {
  const Shape tiny{1, 1, 2, 2, 1, 1};
  const Shape medium{2, 2, 64, 64, 32, 32};      // 2.1 MFLOP: 210 ms more
  const Shape huge{8, 8, 1024, 1024, 64, 64};
  CHECK(call_timeout_ms(tiny, 10000, 0) == 1001);
  CHECK(call_timeout_ms(tiny, 10000, 1000) == 2001);
  CHECK(call_timeout_ms(medium, 10000, 0) == 1210);
  CHECK(call_timeout_ms(huge, 10000, 0) == 10000);
  CHECK(call_timeout_ms(tiny, 10000, 10000) == 10000);
  CHECK(call_timeout_ms(tiny, 200, 0) == 21);
  CHECK(call_timeout_ms(tiny, 1, 0) == 1);
  // A fresh child's start-up: all of it for the run's first call, then twice
  // what that took, at least a tenth; nothing once the child has answered.
  CHECK(start_up_allowance_ms(true, std::nullopt, 10000) == 10000);
  CHECK(start_up_allowance_ms(true, 3.2, 10000) == 1000);
  CHECK(start_up_allowance_ms(true, 2500.0, 10000) == 5000);
  CHECK(start_up_allowance_ms(true, 9000.0, 10000) == 10000);
  CHECK(start_up_allowance_ms(false, std::nullopt, 10000) == 0);
}

TEST_CASE("a small case that hangs is killed after its own limit, not the whole --timeout-ms") {
  auto impl = load_plugin(signal_plugin("pid_or_misbehave"), options(5000));
  worker_pid(*impl);  // the worker is up: the next call is not its first
  const auto begin = std::chrono::steady_clock::now();
  const ImplementationFault fault = fault_of(*impl, small_case(-2.0f));
  const auto took = std::chrono::steady_clock::now() - begin;
  CHECK(fault.kind() == Kind::timed_out);
  CHECK_THAT(fault.what(), Catch::Contains("within 501 ms"));
  CHECK(took < std::chrono::milliseconds(2500));
}

TEST_CASE("a plugin's compute time: measured around forward, or reported by the plugin") {
  auto measured = load_plugin(std::string(ATTNCHECK_PLUGIN_DIR) + "/libattn_example_plugin.so", options());
  CHECK_FALSE(measured->last_compute_seconds());
  Case c = small_case();
  measured->forward(c.problem, c.q, c.k, c.v, c.out, {}, 1);
  REQUIRE(measured->last_compute_seconds());
  CHECK(*measured->last_compute_seconds() >= 0);
  CHECK(*measured->last_compute_seconds() < 1);

  auto reported = load_plugin(signal_plugin("reports_time"), options());
  reported->forward(c.problem, c.q, c.k, c.v, c.out, {}, 1);
  REQUIRE(reported->last_compute_seconds());
  CHECK(*reported->last_compute_seconds() == 0.25);

  auto bad = load_plugin(signal_plugin("reports_bad_time"), options());
  const ImplementationFault fault = fault_of(*bad, small_case());
  CHECK(fault.kind() == Kind::protocol);
  CHECK_THAT(fault.what(), Catch::Contains("attn_plugin_compute_seconds returned -1") &&
                               Catch::Contains("finite and >= 0"));
  CHECK_FALSE(bad->last_compute_seconds());
}

TEST_CASE("a plugin that exports attn_plugin_set_threads gets the caller's thread count before each call") {
  auto plain = load_plugin(signal_plugin("reports_time"), options());
  CHECK_FALSE(plain->capabilities().threads);
  auto takes = load_plugin(signal_plugin("takes_threads"), options());
  CHECK(takes->capabilities().threads);  // so thread_determinism checks it
  Case c = small_case();
  for (const int threads : {3, 1, 2}) {
    takes->forward(c.problem, c.q, c.k, c.v, c.out, {}, threads);
    REQUIRE(takes->last_compute_seconds());  // the plugin reports the count it was given
    CHECK(*takes->last_compute_seconds() == threads);
  }
  takes->forward(c.problem, c.q, c.k, c.v, c.out, {}, 0);
  CHECK(*takes->last_compute_seconds() == 1);  // at least 1
}
