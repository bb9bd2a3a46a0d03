// Runs one function in a forked child with a shared-memory arena: inputs
// read-only, outputs between guard pages and canary bytes and poisoned with
// NaN, a timeout that kills a child that hangs. Used by the plugin loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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
  } kind = Kind::returned;
  int result = 0;
  std::string detail;
};

/// Shared memory holding all buffers of one call; unmapped on destruction.
class Arena {
 public:
  explicit Arena(std::vector<ArenaBuffer> buffers);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  std::byte* data(size_t index) const { return buffers_[index].data; }
  /// Copies `source` into input `index` (before run()) and keeps it to
  /// compare with afterwards; for inputs whose content depends on the arena.
  void fill(size_t index, const void* source);
  const ArenaBuffer& buffer(size_t index) const { return buffers_[index]; }

  /// Maps the inputs read-only and the guard pages inaccessible, then runs `call` in a forked child and waits at most timeout_ms. The value
  /// `call` returns is handed back in ChildOutcome::result. Checks canaries
  /// and that the inputs are unchanged afterwards.
  ChildOutcome run(const std::function<int()>& call, int timeout_ms);

 private:
  std::string locate(uintptr_t address) const;
  std::string check_canaries() const;

  std::vector<ArenaBuffer> buffers_;
  std::byte* base_ = nullptr;
  size_t total_ = 0;
  size_t control_at_ = 0;
  size_t inputs_begin_ = 0, inputs_end_ = 0;
  std::vector<std::pair<size_t, size_t>> guards_;  // [begin, end) offsets
  std::vector<size_t> region_end_;                  // per buffer: end of its pages
};

}  // namespace attncheck::plugin_detail
