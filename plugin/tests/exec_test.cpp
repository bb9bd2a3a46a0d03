// The exec: client against children that answer correctly and children that
// die, hang, print garbage or truncate their reply (tests/exec_child.py).
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "attncheck/plugin.h"

using namespace attncheck;
using Kind = ImplementationFault::Kind;

namespace {

std::string child(const std::string& mode) {
  return std::string("/usr/bin/python3 ") + ATTNCHECK_SOURCE_DIR + "/plugin/tests/exec_child.py " + mode;
}

OutOfProcessOptions quick() {
  OutOfProcessOptions options;
  options.timeout_ms = 3000;  // all of it for the first call, 301 ms for later small ones
  options.startup_timeout_ms = 20000;
  return options;
}

struct ExecInputs {
  Problem problem;
  std::vector<float> q, k, v, out;
};

ExecInputs inputs() {
  ExecInputs in;
  in.problem.shape = {1, 2, 3, 4, 2, 3};
  in.problem.causal = Causal::top_left;
  const Shape& s = in.problem.shape;
  for (int64_t i = 0; i < s.q_size(); ++i) in.q.push_back(std::cos(0.3f * float(i)));
  for (int64_t i = 0; i < s.k_size(); ++i) in.k.push_back(std::sin(0.7f * float(i)));
  for (int64_t i = 0; i < s.v_size(); ++i) in.v.push_back(float(i % 5) - 2.0f);
  in.out.assign(size_t(s.out_size()), 42.0f);
  return in;
}

ImplementationFault exec_fault_of(const std::string& mode) {
  auto impl = start_exec(child(mode), quick());
  ExecInputs in = inputs();
  try {
    impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, 1);
  } catch (const ImplementationFault& fault) {
    for (float x : in.out) REQUIRE(x == 42.0f);
    return fault;
  }
  FAIL("mode " << mode << " raised no fault");
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("a correct child answers cases over the protocol, with weights, many times") {
  auto impl = start_exec(child("ok"), quick());
  CHECK(impl->name() == "exec:" + child("ok"));
  CHECK(impl->capabilities().weights);
  CHECK(impl->precision() == Precision::fp32);
  ExecInputs in = inputs();
  std::vector<float> weights(size_t(in.problem.shape.weights_size()));
  for (int round = 0; round < 3; ++round) {
    impl->forward(in.problem, in.q, in.k, in.v, in.out, weights, 1);
    // Query 0 may read only key 0 (causal): its output is V row 0 of its head.
    CHECK(in.out[0] == Approx(in.v[0]));
    CHECK(in.out[1] == Approx(in.v[1]));
    CHECK(weights[0] == Approx(1.0f));
    CHECK(weights[1] == 0.0f);
  }
}

TEST_CASE("an explicit mask and key lengths reach the child") {
  auto impl = start_exec(child("ok"), quick());
  ExecInputs in = inputs();
  in.problem.causal = Causal::none;
  in.problem.key_lengths = {3};
  ExplicitMask mask;
  mask.allowed.assign(size_t(3 * 4), 0);
  for (int i = 0; i < 3; ++i) mask.allowed[size_t(i * 4 + 2)] = 1;  // every query reads key 2 only
  in.problem.mask = mask;
  impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, 1);
  // Head 0, query 1 reads only key 2: V[0][0][2][:].
  for (int c = 0; c < 3; ++c) CHECK(in.out[size_t(3 + c)] == Approx(in.v[size_t(2 * 3 + c)]));
}

TEST_CASE("a child's rejection is InvalidInput with its message, and the child lives on") {
  auto impl = start_exec(child("invalid"), quick());
  ExecInputs in = inputs();
  CHECK_THROWS_AS(impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, 1), InvalidInput);
  CHECK_THROWS_WITH(impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, 1),
                    Catch::Contains("Q is too small"));
}

TEST_CASE("a child's \"unsupported\" answer is Unsupported with its message, and the child lives on") {
  auto impl = start_exec(child("unsupported"), quick());
  ExecInputs in = inputs();
  in.q[1] = 5e4f;
  try {
    impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, 1);
    FAIL("accepted");
  } catch (const Unsupported& e) {
    CHECK_THAT(e.what(), Catch::Contains("child-unsupported") && Catch::Contains("answered \"unsupported\"") &&
                             Catch::Contains("Q holds 50000, beyond what I hold"));
  }
  for (float x : in.out) CHECK(x == 42.0f);
  in.q[1] = 0.5f;  // the same child answers the next case
  impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, 1);
  CHECK(in.out[0] == Approx(in.v[0]));
}

TEST_CASE("stray prints of the function do not corrupt the protocol") {
  auto impl = start_exec(child("chatty"), quick());
  ExecInputs in = inputs();
  impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, 1);
  CHECK(in.out[0] == Approx(in.v[0]));
}

TEST_CASE("a child that exits inside a case is reported as crashed with its status") {
  const ImplementationFault fault = exec_fault_of("die");
  CHECK(fault.kind() == Kind::crashed);
  CHECK_THAT(fault.what(), Catch::Contains("exited with status 3"));
}

TEST_CASE("a child killed by a signal is reported as crashed with the signal") {
  const ImplementationFault fault = exec_fault_of("crash");
  CHECK(fault.kind() == Kind::crashed);
  CHECK_THAT(fault.what(), Catch::Contains("signal 11"));
}

TEST_CASE("a child that hangs is killed at the timeout and reported as timed_out") {
  OutOfProcessOptions options = quick();
  options.timeout_ms = 1000;
  auto impl = start_exec(child("hang"), options);
  ExecInputs in = inputs();
  try {
    impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, 1);
    FAIL("no fault");
  } catch (const ImplementationFault& fault) {
    CHECK(fault.kind() == Kind::timed_out);
    // The run's first call gets the whole timeout (start_up_allowance_ms).
    CHECK_THAT(fault.what(), Catch::Contains("within 1000 ms"));
  }
}

TEST_CASE("a child that closes its end of the channel and stays alive is crashed, not timed out") {
  // `exec`: no shell stays in between holding the channel open.
  auto impl = start_exec("exec " + child("close_channel"), quick());
  ExecInputs in = inputs();
  try {
    impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, 1);
    FAIL("no fault");
  } catch (const ImplementationFault& fault) {
    CHECK(fault.kind() == Kind::crashed);
    CHECK_THAT(fault.what(), Catch::Contains("closed its output"));
  }
}

TEST_CASE("a child's compute_seconds is its last compute time; a bad one is a protocol fault") {
  auto impl = start_exec(child("ok"), quick());
  CHECK_FALSE(impl->last_compute_seconds());
  ExecInputs in = inputs();
  impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, 1);
  REQUIRE(impl->last_compute_seconds());  // the Python helper sends it
  CHECK(*impl->last_compute_seconds() >= 0);
  CHECK(*impl->last_compute_seconds() < 5);

  const ImplementationFault fault = exec_fault_of("bad_compute_seconds");
  CHECK(fault.kind() == Kind::protocol);
  CHECK_THAT(fault.what(), Catch::Contains("\"compute_seconds\" is -1"));
}

TEST_CASE("each case tells the child the threads the caller asked for") {
  auto impl = start_exec(child("threads"), quick());
  ExecInputs in = inputs();
  for (int threads : {1, 3, 2}) {
    impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, threads);
    CHECK(in.out.front() == float(threads));
    CHECK(in.out.back() == float(threads));
  }
  impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, 0);  // "the default": sent as 1
  CHECK(in.out.front() == 1.0f);
}

TEST_CASE("a child that prints garbage is a protocol fault quoting it") {
  const ImplementationFault fault = exec_fault_of("garbage");
  CHECK(fault.kind() == Kind::protocol);
  CHECK_THAT(fault.what(), Catch::Contains("not JSON") && Catch::Contains("this is not json"));
}

TEST_CASE("a child that truncates its payload and exits is reported with the byte count") {
  const ImplementationFault fault = exec_fault_of("truncate");
  CHECK(fault.kind() == Kind::crashed);
  CHECK_THAT(fault.what(), Catch::Contains("after 6 of the 72 bytes"));
}

TEST_CASE("a child that truncates its payload and stays alive times out") {
  CHECK(exec_fault_of("truncate_hang").kind() == Kind::timed_out);
}

TEST_CASE("after a fault the next case starts a fresh child") {
  auto impl = start_exec(child("die"), quick());
  ExecInputs in = inputs();
  for (int round = 0; round < 2; ++round)
    CHECK_THROWS_AS(impl->forward(in.problem, in.q, in.k, in.v, in.out, {}, 1), ImplementationFault);
}

TEST_CASE("a bad handshake refuses the command, naming it and the reason") {
  OutOfProcessOptions options = quick();
  options.startup_timeout_ms = 3000;
  CHECK_THROWS_WITH(start_exec(child("bad_handshake"), options),
                    Catch::Contains("exec_child.py bad_handshake") && Catch::Contains("not JSON"));
  CHECK_THROWS_WITH(start_exec(child("wrong_version"), options),
                    Catch::Contains("version 7") && Catch::Contains("speaks version 1"));
  CHECK_THROWS_WITH(start_exec(child("unknown_feature"), options), Catch::Contains("\"flash\""));
  options.startup_timeout_ms = 1000;
  CHECK_THROWS_WITH(start_exec(child("no_handshake"), options), Catch::Contains("1000 ms"));
  CHECK_THROWS_WITH(start_exec("exit 5", options), Catch::Contains("exited with status 5"));
  CHECK_THROWS_AS(start_exec("", options), InvalidInput);
}
