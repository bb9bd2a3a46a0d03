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

TEST_CASE("calls that need fewer threads than the pool has run each task once, and no other") {
  // The pool grows to 4 helpers at the first call; later calls need 0 to 4 of them.
  for (int64_t count : {5, 2, 4, 1, 3, 5, 2, 2, 5}) {
    INFO("threads " << count);
    std::barrier meet(static_cast<std::ptrdiff_t>(count));  // would never open if a task ran after another
    std::vector<std::atomic<int>> ran(static_cast<size_t>(count));
    std::atomic<int> stray{0};  // a task index the call does not have: a thread it did not need ran
    attncheck::detail::run_concurrently(
        count,
        [&](int64_t t) {
          if (t < 0 || t >= count) {
            stray.fetch_add(1);
            return;
          }
          meet.arrive_and_wait();
          ran[static_cast<size_t>(t)].fetch_add(1);
        },
        [](int64_t missing) { FAIL("threads not started: " << missing); });
    CHECK(stray.load() == 0);
    for (auto& r : ran) CHECK(r.load() == 1);
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

// The kernels' barrier: every thread leaves a phase only after all have
// arrived and the completion step has run once, whether a waiter is still
// polling or has gone to sleep (a thread arriving after kSpins polls).
TEST_CASE("the spinning barrier opens each phase once, after the completion step, also for sleeping waiters") {
  constexpr int kThreads = 3, kPhases = 200;
  std::atomic<int> arrived{0};
  int completions = 0;  // written only by the completion step, two per phase
  std::atomic<int> bad{0};
  attncheck::detail::SpinBarrier sync(kThreads, [&]() noexcept {
    if (arrived.load() != (completions / 2 + 1) * kThreads) bad.fetch_add(1);  // every thread of the phase is in
    ++completions;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int phase = 0; phase < kPhases; ++phase) {
        // Now and then one thread arrives late enough that the others sleep.
        if (phase % 50 == 7 && t == phase % kThreads) std::this_thread::sleep_for(std::chrono::milliseconds(3));
        arrived.fetch_add(1);
        sync.arrive_and_wait();
        if (completions != 2 * phase + 1) bad.fetch_add(1);  // the step ran, and only once
        sync.arrive_and_wait();  // nobody starts the next phase before all checked this one
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(bad.load() == 0);
  CHECK(completions == 2 * kPhases);
}

TEST_CASE("a thread that drops from the spinning barrier no longer holds the others") {
  attncheck::detail::SpinBarrier sync(3);
  std::atomic<int> passed{0};
  std::vector<std::thread> threads;
  threads.emplace_back([&] { sync.arrive_and_drop(); });  // the thread that could not start
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int phase = 0; phase < 100; ++phase) sync.arrive_and_wait();
      passed.fetch_add(1);
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(passed.load() == 2);
}
