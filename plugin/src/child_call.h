// Runs plugin code in another process over shared memory: inputs read-only,
// outputs between guard pages and canary bytes and poisoned with NaN, a
// timeout that kills a child that hangs. Arena::run forks one child per call
// (the loading probe); Worker keeps one child alive across calls (forward).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace attncheck::plugin_detail {

/// A buffer inside the arena. Inputs are copied in before the call and
/// mapped read-only; outputs are poisoned before it and followed by canary
/// bytes up to the next guard page.
struct ArenaBuffer {
  std::string name;
  size_t bytes = 0;
  bool output = false;
  bool poison = true;     ///< outputs only: fill with the NaN poison (else zeros)
  const void* source = nullptr;  ///< inputs only: copied in
  std::byte* data = nullptr;     ///< set by the arena
};

/// How the child ended.
struct ChildOutcome {
  enum class Kind {
    returned,            ///< the function returned; `result` holds its value
    timed_out,
    crashed,             ///< killed by a signal or exited inside the call
    wrote_input,         ///< write fault inside the read-only inputs
    wrote_out_of_bounds, ///< write fault in a guard page, or a canary changed
    read_out_of_bounds,  ///< read fault in a guard page
    protocol,            ///< the child wrote something else on the control channel
  } kind = Kind::returned;
  int result = 0;
  std::string detail;
  /// Returned calls: the wall time of the call measured around it in the
  /// child, and the compute time the code called reported, if it did.
  double measured_seconds = 0;
  std::optional<double> reported_seconds;
};

constexpr size_t kMaxArenaBuffers = 12;

/// Where everything lies in the arena, as offsets: sent to a worker, which
/// maps the arena at an address of its own.
struct ArenaLayout {
  size_t total = 0;
  size_t control_at = 0;
  size_t inputs_begin = 0, inputs_end = 0;
  size_t guard_count = 0;
  size_t guards[kMaxArenaBuffers + 2][2] = {};  // [begin, end)
  size_t buffer_count = 0;
  size_t offset[kMaxArenaBuffers] = {};
  size_t bytes[kMaxArenaBuffers] = {};
};

/// Shared memory (a memfd) holding all buffers of one call; unmapped on destruction.
class Arena {
 public:
  explicit Arena(std::vector<ArenaBuffer> buffers);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  std::byte* data(size_t index) const { return buffers_[index].data; }
  /// Copies `source` into input `index` (before run()) and, unless the
  /// child adjusts it before the call, keeps it to compare with afterwards.
  void fill(size_t index, const void* source, bool compare_after = true);
  const ArenaBuffer& buffer(size_t index) const { return buffers_[index]; }
  const ArenaLayout& layout() const { return layout_; }
  int fd() const { return fd_; }

  /// Maps the inputs read-only and the guard pages inaccessible, then runs
  /// `call` in a forked child and waits at most timeout_ms. The value `call`
  /// returns is handed back in ChildOutcome::result. Checks canaries and
  /// that the inputs are unchanged afterwards.
  ChildOutcome run(const std::function<int()>& call, int timeout_ms);

  /// Resets the control block before a call.
  void reset_control();
  /// After a child ended with `status`: the classified fault, the signal or
  /// exit status, or, when the call returned, the canaries and the inputs.
  ChildOutcome judge_exit(int status) const;
  /// After the call returned: canaries and inputs, then the result.
  ChildOutcome judge_return() const;

 private:
  std::string locate(uintptr_t offset) const;  // names the buffer at an arena offset
  std::string check_canaries() const;
  std::string check_inputs() const;

  std::vector<ArenaBuffer> buffers_;
  ArenaLayout layout_;
  std::byte* base_ = nullptr;
  int fd_ = -1;
  std::vector<size_t> region_end_;  // per buffer: end of its pages
};

/// What a worker does per call, in its own mapping of the arena.
struct WorkerTask {
  /// Before the inputs become read-only (e.g. pointers into the arena).
  std::function<void(std::byte* base, const ArenaLayout& layout)> prepare;
  /// The call; sets `reported_seconds` when the code called reports its compute time.
  std::function<int(std::byte* base, const ArenaLayout& layout,
                    std::optional<double>& reported_seconds)>
      call;
};

/// One child process that serves calls for its whole life: started on the
/// first call, restarted after a crash, a timeout, a fault found in the
/// arena or a broken control channel. Arenas reach it as memfds over a unix
/// socket; each call gets its own guard pages and read-only inputs.
class Worker {
 public:
  explicit Worker(WorkerTask task) : task_(std::move(task)) {}
  ~Worker() { stop(/*graceful=*/true); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// Whether the next call starts a fresh child (it pays the child's
  /// first-call costs: thread pools, JIT).
  bool fresh() const;
  /// Runs one call on `arena` in the worker; waits at most timeout_ms.
  ChildOutcome call(Arena& arena, int timeout_ms);

 private:
  void start();
  void stop(bool graceful);
  ChildOutcome ended(Arena& arena, int grace_ms, const std::string& how);

  WorkerTask task_;
  mutable std::mutex mutex_;
  pid_t pid_ = -1;
  int fd_ = -1;
  uint64_t sequence_ = 0;
};

/// "signal 11 (Segmentation fault)".
std::string signal_text(int sig);

}  // namespace attncheck::plugin_detail
