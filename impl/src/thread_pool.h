// The threads of the fused attention: kept between calls, because starting
// threads anew for every call cost more than the attention itself on small
// problems (n = 128, 1 head: 2 threads took 2.5× as long as 1).
#pragma once

#include <cstdint>
#include <functional>

namespace attncheck::detail {

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
