// The threads of the fused attention: kept between calls, because starting
// threads anew for every call cost more than the attention itself on small
// problems (n = 128, 1 head: 2 threads took 2.5× as long as 1).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>

namespace attncheck::detail {

/// Iterations a thread polls (for work, for the other tasks, at a barrier)
/// before it sleeps: about a tenth of a millisecond, so back-to-back calls (a
/// benchmark, the heads of a model) and the short waits inside one skip the
/// sleep and wake-up of a condition variable.
inline constexpr int kSpins = 4000;

inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// The tasks of one run_concurrently() call meet here, as at a std::barrier
/// (arrive_and_wait, arrive_and_drop, a completion step run by the last
/// thread to arrive, before any leaves), but a waiting thread polls for
/// kSpins before it sleeps. std::barrier (libstdc++ 12) yields and sleeps
/// after a few polls: on 2 threads, 1-head n = 1024 calls made 3.6 futex and
/// 5.3 sched_yield calls each (0.8 and none with this barrier) and took
/// 1.01-1.03x the time (docs/performance.md).
template <class Completion = void (*)()>
class SpinBarrier {
 public:
  explicit SpinBarrier(std::ptrdiff_t count, Completion completion = [] {})
      : expected_(count), remaining_(count), completion_(std::move(completion)) {}

  void arrive_and_wait() { arrive(false); }
  /// Arrives, and leaves the barrier's count for the phases after this one.
  void arrive_and_drop() { arrive(true); }

 private:
  void arrive(bool drop) {
    uint64_t phase;
    {
      std::lock_guard lock(mutex_);
      phase = phase_.load(std::memory_order_relaxed);
      if (drop) --expected_;
      if (--remaining_ == 0) {
        completion_();
        remaining_ = expected_;
        phase_.store(phase + 1, std::memory_order_release);
        next_phase_.notify_all();
        return;
      }
    }
    if (drop) return;
    for (int spin = 0; spin < kSpins; ++spin) {
      if (phase_.load(std::memory_order_acquire) != phase) return;
      spin_pause();
    }
    std::unique_lock lock(mutex_);
    next_phase_.wait(lock, [&] { return phase_.load(std::memory_order_relaxed) != phase; });
  }

  std::mutex mutex_;
  std::condition_variable next_phase_;
  std::atomic<uint64_t> phase_{0};
  std::ptrdiff_t expected_, remaining_;  // guarded by mutex_
  Completion completion_;
};

/// Runs task(0) on the calling thread and task(1) … task(count − 1) on other
/// threads at the same time, and returns when every task has finished. Tasks
/// may wait for each other (a barrier): all of them run concurrently.
///
/// The threads come from a pool kept for the next call. When the pool is in
/// use (another thread's call) or this is a forked child of the process that
/// started it, fresh threads are started for this call instead. If fewer than
/// count − 1 threads can be had, the missing tasks are not run:
/// unstarted(missing) is called first, on the calling thread, before task(0).
void run_concurrently(int64_t count, const std::function<void(int64_t)>& task,
                      const std::function<void(int64_t)>& unstarted);

}  // namespace attncheck::detail
