// The fused attention's thread pool: its tasks run at the same time (they may
// wait for each other), callers from several threads at once each get a whole
// result, and a forked child, which has none of the pool's threads, still
// computes instead of waiting for threads that do not exist.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "attncheck/attention.h"
#include "thread_pool.h"

using attncheck::Problem;

namespace {

struct Call {
  Problem problem;
  std::vector<float> q, k, v;
};

Call make_call(int64_t n_q, int64_t n_k, uint32_t seed) {
  Call c;
  c.problem.shape = {1, 2, n_q, n_k, 32, 32};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (auto* t : {&c.q, &c.k, &c.v}) {
    t->resize(static_cast<size_t>(t == &c.q ? 2 * n_q * 32 : 2 * n_k * 32));
    for (float& x : *t) x = normal(rng);
  }
  return c;
}

std::vector<float> run(const Call& c, int threads) {
  std::vector<float> out(static_cast<size_t>(c.problem.shape.out_size()));
  attncheck::AttentionOptions options;
  options.threads = threads;
  attncheck::attention(c.problem, c.q.data(), c.k.data(), c.v.data(), out.data(), options);
  return out;
}

}  // namespace

TEST_CASE("the pool runs every task at the same time, and again on the next call") {
  for (int64_t count : {2, 3, 5}) {
    for (int call = 0; call < 3; ++call) {
      std::barrier meet(static_cast<std::ptrdiff_t>(count));  // would never open if a task ran after another
      std::vector<std::atomic<int>> ran(static_cast<size_t>(count));
      attncheck::detail::run_concurrently(
          count,
          [&](int64_t t) {
            meet.arrive_and_wait();
            ran[static_cast<size_t>(t)].fetch_add(1);
          },
          [](int64_t missing) { FAIL("threads not started: " << missing); });
      for (auto& r : ran) CHECK(r.load() == 1);
    }
  }
}

TEST_CASE("callers on several threads at once each get the single-thread result") {
  const Call small = make_call(130, 300, 1), decode = make_call(3, 2500, 2);
  const auto small_expected = run(small, 1), decode_expected = run(decode, 1);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> callers;
  for (int caller = 0; caller < 3; ++caller)
    callers.emplace_back([&] {
      for (int repeat = 0; repeat < 20; ++repeat) {
        if (run(small, 2) != small_expected) mismatches.fetch_add(1);
        if (run(decode, 3) != decode_expected) mismatches.fetch_add(1);
      }
    });
  for (auto& c : callers) c.join();
  CHECK(mismatches.load() == 0);
}

TEST_CASE("a forked child computes with several threads although the pool's threads stayed in the parent") {
  const Call c = make_call(130, 300, 3);
  const auto expected = run(c, 1);
  CHECK(run(c, 2) == expected);  // the pool now has a thread, which a child will not have
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(run(c, 2) == expected ? 0 : 1);
  int status = 0;
  pid_t done = 0;
  for (int waited_ms = 0; waited_ms < 20000 && (done = waitpid(child, &status, WNOHANG)) == 0; waited_ms += 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  INFO("the child " << (done == 0 ? "hung" : "finished"));
  REQUIRE(done == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
