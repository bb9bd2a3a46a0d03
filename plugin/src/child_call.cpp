#include "child_call.h"

#include "abi.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <system_error>

namespace attncheck::plugin_detail {
namespace {

constexpr unsigned char kCanary = 0xA5;
constexpr int kFaultExit = 97;  // the child's exit status after a classified fault

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}
size_t round_to_pages(size_t bytes) {
  const size_t p = page_size();
  return (bytes + p - 1) / p * p;
}
size_t round_to(size_t bytes, size_t align) { return (bytes + align - 1) / align * align; }

// Written by the child, read by the parent after the child has ended.
struct Control {
  int32_t returned;  // 1 once the call returned
  int32_t result;
  int32_t fault;     // 0, or a ChildOutcome::Kind of a classified fault
  int32_t signal;
  uintptr_t address;
};

// What the child's fault handler needs; set in the child just before the call.
struct FaultMap {
  Control* control = nullptr;
  uintptr_t inputs_begin = 0, inputs_end = 0;
  uintptr_t guards[16][2] = {};
  size_t guard_count = 0;
} g_fault_map;

bool fault_was_write(void* context) {
#if defined(__x86_64__)
  // Bit 1 of the page-fault error code is set for writes.
  const auto* uc = static_cast<const ucontext_t*>(context);
  return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
  (void)context;
  return true;
#endif
}

void on_fault(int sig, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  int kind = 0;
  if (address >= g_fault_map.inputs_begin && address < g_fault_map.inputs_end) {
    kind = static_cast<int>(ChildOutcome::Kind::wrote_input);
  } else {
    for (size_t g = 0; g < g_fault_map.guard_count; ++g) {
      if (address >= g_fault_map.guards[g][0] && address < g_fault_map.guards[g][1])
        kind = static_cast<int>(fault_was_write(context) ? ChildOutcome::Kind::wrote_out_of_bounds
                                                         : ChildOutcome::Kind::read_out_of_bounds);
    }
  }
  if (kind != 0) {
    g_fault_map.control->fault = kind;
    g_fault_map.control->signal = sig;
    g_fault_map.control->address = address;
    _exit(kFaultExit);
  }
  // Any other fault: SA_RESETHAND restored the default action, so returning
  // re-runs the faulting instruction and the child dies of the signal.
}

[[noreturn]] void run_child(const std::function<int()>& call) {
  static char alt_stack[1 << 16];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
  const int result = call();
  g_fault_map.control->result = result;
  g_fault_map.control->returned = 1;
  std::fflush(nullptr);
  _exit(0);
}

std::string signal_text(int sig) {
  const char* name = strsignal(sig);
  return fmt::format("signal {} ({})", sig, name ? name : "unknown");
}

}  // namespace

Arena::Arena(std::vector<ArenaBuffer> buffers) : buffers_(std::move(buffers)) {
  const size_t page = page_size();
  size_t off = 0;
  control_at_ = off;
  off += round_to_pages(sizeof(Control));
  const auto guard = [&] {
    guards_.emplace_back(off, off + page);
    off += page;
  };
  guard();
  // Inputs back to back (64-byte aligned) in one read-only range.
  inputs_begin_ = off;
  std::vector<size_t> at(buffers_.size());
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (buffers_[i].output) continue;
    at[i] = off;
    off += round_to(buffers_[i].bytes, 64);
  }
  off = std::max(round_to_pages(off), inputs_begin_ + page);
  inputs_end_ = off;
  guard();
  // Each output at the start of its own pages, then canaries, then a guard page.
  region_end_.assign(buffers_.size(), 0);
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (!buffers_[i].output) continue;
    at[i] = off;
    off += std::max(round_to_pages(buffers_[i].bytes), page);
    region_end_[i] = off;
    guard();
  }
  if (guards_.size() > std::size(g_fault_map.guards)) throw std::logic_error("too many buffers");
  total_ = off;

  void* base = mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    throw std::system_error(errno, std::generic_category(),
                            fmt::format("mapping {} bytes of shared memory", total_));
  base_ = static_cast<std::byte*>(base);
  for (size_t i = 0; i < buffers_.size(); ++i) {
    ArenaBuffer& b = buffers_[i];
    b.data = base_ + at[i];
    if (!b.output) {
      if (b.bytes && b.source) std::memcpy(b.data, b.source, b.bytes);
      continue;
    }
    if (b.poison) {
      const uint32_t bits = kPoisonBits;
      for (size_t e = 0; e + 4 <= b.bytes; e += 4) std::memcpy(b.data + e, &bits, 4);
    }
    std::memset(b.data + b.bytes, kCanary, region_end_[i] - at[i] - b.bytes);
  }
}

void Arena::fill(size_t index, const void* source) {
  ArenaBuffer& b = buffers_[index];
  std::memcpy(b.data, source, b.bytes);
  b.source = source;
}

Arena::~Arena() {
  if (base_) munmap(base_, total_);
}

std::string Arena::locate(uintptr_t address) const {
  const auto base = reinterpret_cast<uintptr_t>(base_);
  for (const ArenaBuffer& b : buffers_) {
    const auto begin = reinterpret_cast<uintptr_t>(b.data);
    if (address >= begin && address < begin + b.bytes)
      return fmt::format("{} at byte {} (element {})", b.name, address - begin, (address - begin) / 4);
  }
  // Out of every buffer: name the nearest buffer ending before it or starting after it.
  std::string best = fmt::format("offset {} of the call's memory", address - base);
  uintptr_t best_distance = UINTPTR_MAX;
  for (const ArenaBuffer& b : buffers_) {
    const auto begin = reinterpret_cast<uintptr_t>(b.data);
    const uintptr_t end = begin + b.bytes;
    if (address >= end && address - end < best_distance) {
      best_distance = address - end;
      best = fmt::format("{} bytes past the end of {}", address - end, b.name);
    }
    if (address < begin && begin - address <= best_distance) {
      best_distance = begin - address;
      best = fmt::format("{} bytes before the start of {}", begin - address, b.name);
    }
  }
  return best;
}

std::string Arena::check_canaries() const {
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const ArenaBuffer& b = buffers_[i];
    if (!b.output) continue;
    const std::byte* end = base_ + region_end_[i];
    for (const std::byte* p = b.data + b.bytes; p < end; ++p)
      if (*p != std::byte{kCanary})
        return fmt::format("wrote past the end of {} ({} bytes): changed byte {} after its end",
                           b.name, b.bytes, p - (b.data + b.bytes));
  }
  return {};
}

ChildOutcome Arena::run(const std::function<int()>& call, int timeout_ms) {
  // The fault handler's map is process-wide: one call at a time.
  static std::mutex one_call_at_a_time;
  std::lock_guard lock(one_call_at_a_time);
  for (const auto& [begin, end] : guards_) mprotect(base_ + begin, end - begin, PROT_NONE);
  if (mprotect(base_ + inputs_begin_, inputs_end_ - inputs_begin_, PROT_READ) != 0)
    throw std::system_error(errno, std::generic_category(), "making the inputs read-only");
  auto* control = reinterpret_cast<Control*>(base_ + control_at_);
  *control = Control{};
  g_fault_map = FaultMap{};
  g_fault_map.control = control;
  g_fault_map.inputs_begin = reinterpret_cast<uintptr_t>(base_ + inputs_begin_);
  g_fault_map.inputs_end = reinterpret_cast<uintptr_t>(base_ + inputs_end_);
  for (const auto& [begin, end] : guards_) {
    g_fault_map.guards[g_fault_map.guard_count][0] = reinterpret_cast<uintptr_t>(base_ + begin);
    g_fault_map.guards[g_fault_map.guard_count][1] = reinterpret_cast<uintptr_t>(base_ + end);
    ++g_fault_map.guard_count;
  }

  // The child holds the write end of this pipe; it closes when the child ends.
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "creating a pipe");
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t pid = fork();
  if (pid < 0) {
    close(ends[0]);
    close(ends[1]);
    throw std::system_error(errno, std::generic_category(), "fork");
  }
  if (pid == 0) {
    close(ends[0]);
    run_child(call);
  }
  close(ends[1]);

  ChildOutcome outcome;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool ended = false;
  while (!ended) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) break;
    pollfd pfd{ends[0], POLLIN, 0};
    const int n = poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (n > 0) ended = true;
    if (n < 0 && errno != EINTR) break;
  }
  close(ends[0]);
  int status = 0;
  if (!ended) {
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    outcome.kind = ChildOutcome::Kind::timed_out;
    outcome.detail = fmt::format("did not return within {} ms and was killed", timeout_ms);
    return outcome;
  }
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  if (control->fault != 0) {
    outcome.kind = static_cast<ChildOutcome::Kind>(control->fault);
    const std::string where = locate(control->address);
    switch (outcome.kind) {
      case ChildOutcome::Kind::wrote_input:
        outcome.detail = fmt::format("wrote into read-only input {} ({})", where,
                                     signal_text(control->signal));
        break;
      case ChildOutcome::Kind::wrote_out_of_bounds:
        outcome.detail = fmt::format("wrote out of bounds: {} ({})", where, signal_text(control->signal));
        break;
      default:
        outcome.kind = ChildOutcome::Kind::read_out_of_bounds;
        outcome.detail = fmt::format("read out of bounds: {} ({})", where, signal_text(control->signal));
        break;
    }
    return outcome;
  }
  if (WIFSIGNALED(status)) {
    outcome.kind = ChildOutcome::Kind::crashed;
    outcome.detail = fmt::format("crashed: killed by {}", signal_text(WTERMSIG(status)));
    return outcome;
  }
  if (!control->returned || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    outcome.kind = ChildOutcome::Kind::crashed;
    outcome.detail = fmt::format("exited with status {} before returning",
                                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return outcome;
  }
  if (std::string oob = check_canaries(); !oob.empty()) {
    outcome.kind = ChildOutcome::Kind::wrote_out_of_bounds;
    outcome.detail = oob;
    return outcome;
  }
  // Inputs are read-only in the child; compare anyway, in case it remapped them.
  for (const ArenaBuffer& b : buffers_) {
    if (b.output || b.bytes == 0 || !b.source || std::memcmp(b.data, b.source, b.bytes) == 0) continue;
    size_t e = 0;
    while (std::memcmp(b.data + e, static_cast<const std::byte*>(b.source) + e, 1) == 0) ++e;
    outcome.kind = ChildOutcome::Kind::wrote_input;
    outcome.detail = fmt::format("changed input {} at byte {}", b.name, e);
    return outcome;
  }
  outcome.result = control->result;
  return outcome;
}

}  // namespace attncheck::plugin_detail
