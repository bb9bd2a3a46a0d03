#include "thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace attncheck::detail {
namespace {

class Pool {
 public:
  // Starts threads until there are `wanted` (fewer if the system refuses);
  // returns how many there are.
  int64_t grow(int64_t wanted) {
    while (static_cast<int64_t>(threads_.size()) < wanted) {
      try {
        std::condition_variable& wake = wakes_.emplace_back();  // a deque: earlier ones stay where they are
        try {
          threads_.emplace_back([this, index = static_cast<int64_t>(threads_.size()), &wake] { serve(index, wake); });
        } catch (...) {
          wakes_.pop_back();
          throw;
        }
      } catch (...) {
        break;
      }
    }
    return static_cast<int64_t>(threads_.size());
  }

  // task(1) … task(helpers) on the pool's first `helpers` threads; then waits
  // for them after the caller's own task(0).
  void run(int64_t helpers, const std::function<void(int64_t)>& task) {
    {
      std::lock_guard lock(mutex_);
      task_ = &task;
      helpers_ = helpers;
      pending_.store(helpers);
      generation_.fetch_add(1);
    }
    // Only the threads this call needs: one it does not need stays asleep
    // (or, polling, goes to sleep) instead of taking a core from those at work.
    for (int64_t t = 0; t < helpers; ++t) wakes_[static_cast<size_t>(t)].notify_one();
    task(0);
    for (int spin = 0; spin < kSpins && pending_.load() != 0; ++spin) spin_pause();
    if (pending_.load() != 0) {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return pending_.load() == 0; });
    }
  }

 private:
  // Thread `index` runs task(index + 1) of every call that needs it (index <
  // helpers): it polls for the next call after taking part in one, then
  // sleeps on its own condition variable, which only such calls notify.
  // 2-thread calls among 3-thread ones on 2 cores, n = 512 and 1024, took
  // 0.77-0.90x the time with the unneeded thread asleep instead of woken to
  // poll (docs/performance.md, "Threads").
  void serve(int64_t index, std::condition_variable& wake) {
    uint64_t seen = 0;
    for (;;) {
      for (int spin = 0; spin < kSpins && generation_.load() == seen; ++spin) spin_pause();
      const std::function<void(int64_t)>* task;
      {
        std::unique_lock lock(mutex_);
        wake.wait(lock, [&] { return generation_.load() != seen && index < helpers_; });
        seen = generation_.load();
        task = task_;
      }
      (*task)(index + 1);
      if (pending_.fetch_sub(1) == 1) {
        std::lock_guard lock(mutex_);  // so that the caller cannot miss the notification
        done_.notify_one();
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable done_;
  std::deque<std::condition_variable> wakes_;  // wakes_[i]: thread i's
  std::vector<std::thread> threads_;  // never joined: the pool lives as long as the process
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> pending_{0};
  const std::function<void(int64_t)>* task_ = nullptr;
  int64_t helpers_ = 0;
};

// One pool per process, never destroyed (its threads may still wait at exit).
Pool& shared_pool() {
  static Pool* pool = new Pool;
  return *pool;
}

std::mutex pool_in_use;
// Set in every child this process forks (pthread_atfork): a child has none of
// the pool's threads. getpid() compared on every call instead is a system
// call: 2-thread calls took 1.06-1.13x the time with it (n = 128, and one
// query row against 4096 keys, 1 head; docs/performance.md, "Per-call costs").
std::atomic<bool> forked_child{false};
const bool forked_child_tracked = [] {
  return pthread_atfork(nullptr, nullptr, [] { forked_child.store(true, std::memory_order_relaxed); }) == 0;
}();

void run_on_fresh_threads(int64_t count, const std::function<void(int64_t)>& task,
                          const std::function<void(int64_t)>& unstarted) {
  std::vector<std::thread> threads;
  try {
    for (int64_t t = 1; t < count; ++t) threads.emplace_back(task, t);
  } catch (...) {
  }
  const auto started = static_cast<int64_t>(threads.size());
  if (started < count - 1) unstarted(count - 1 - started);
  task(0);
  for (auto& thread : threads) thread.join();
}

}  // namespace

void run_concurrently(int64_t count, const std::function<void(int64_t)>& task,
                      const std::function<void(int64_t)>& unstarted) {
  if (count <= 1) {
    task(0);
    return;
  }
  // A forked child has none of its parent's pool threads (only the forking one).
  std::unique_lock use(pool_in_use, std::try_to_lock);
  if (!use.owns_lock() || forked_child.load(std::memory_order_relaxed) || !forked_child_tracked) {
    run_on_fresh_threads(count, task, unstarted);
    return;
  }
  Pool& pool = shared_pool();
  const int64_t helpers = std::min(pool.grow(count - 1), count - 1);
  if (helpers < count - 1) unstarted(count - 1 - helpers);
  pool.run(helpers, task);
}

}  // namespace attncheck::detail
