#include "child_call.h"

#include "abi.h"
#include "exec_protocol.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace attncheck::plugin_detail {
namespace {

using Clock = std::chrono::steady_clock;

constexpr unsigned char kCanary = 0xA5;
constexpr int kFaultExit = 97;    // the child's exit status after a classified fault
constexpr int kChannelExit = 98;  // a worker whose control channel broke
constexpr int kChannelFd = 3;     // the worker's end of the control channel
constexpr uint64_t kMagic = 0x6174746e63686b31;

// The signals that end a child; each is reported with its name.
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}
size_t round_to_pages(size_t bytes) {
  const size_t p = page_size();
  return (bytes + p - 1) / p * p;
}
size_t round_to(size_t bytes, size_t align) { return (bytes + align - 1) / align * align; }

// Written by the child, read by the parent after the call.
struct Control {
  int32_t returned;  // 1 once the call returned
  int32_t result;
  int32_t fault;     // 0, or a ChildOutcome::Kind of a classified fault
  int32_t signal;
  uintptr_t address;  // of a classified fault: its offset in the arena
  double measured_seconds;
  int32_t reported;  // 1 when the call reported its compute time
  double reported_seconds;
};

// Parent -> worker, with the arena's memfd attached; worker -> parent.
struct Request {
  uint64_t magic;
  uint64_t sequence;
  ArenaLayout layout;
};
struct Reply {
  uint64_t magic;
  uint64_t sequence;
};

// What the child's fault handler needs; set in the child just before each call.
struct FaultMap {
  Control* control = nullptr;
  uintptr_t base = 0;  // fault addresses are recorded as offsets from it
  uintptr_t inputs_begin = 0, inputs_end = 0;
  uintptr_t guards[kMaxArenaBuffers + 2][2] = {};
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

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  Control* control = g_fault_map.control;
  // Only a fault the kernel raised (si_code > 0) has a meaningful address;
  // a signal sent with raise() or kill() is a crash like any other.
  if ((sig == SIGSEGV || sig == SIGBUS) && info->si_code > 0 && control) {
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
      control->fault = kind;
      control->signal = sig;
      control->address = address - g_fault_map.base;
      _exit(kFaultExit);
    }
  }
  if (control) control->signal = sig;
  // Die of the signal itself: returning would resume a raised signal's caller.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(sig, &default_action, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(sig);
  _exit(128 + sig);  // not reached
}

void install_fault_handlers() {
  static char alt_stack[1 << 16];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigset_t unblock;
  sigemptyset(&unblock);
  for (int sig : kFatalSignals) {
    sigaction(sig, &sa, nullptr);
    sigaddset(&unblock, sig);
  }
  sigprocmask(SIG_UNBLOCK, &unblock, nullptr);
}

// In the child: guard pages inaccessible, inputs read-only, the handler's map set.
void protect(std::byte* base, const ArenaLayout& layout) {
  for (size_t g = 0; g < layout.guard_count; ++g)
    mprotect(base + layout.guards[g][0], layout.guards[g][1] - layout.guards[g][0], PROT_NONE);
  if (mprotect(base + layout.inputs_begin, layout.inputs_end - layout.inputs_begin, PROT_READ) != 0)
    _exit(kChannelExit);
  g_fault_map = FaultMap{};
  g_fault_map.control = reinterpret_cast<Control*>(base + layout.control_at);
  g_fault_map.base = reinterpret_cast<uintptr_t>(base);
  g_fault_map.inputs_begin = reinterpret_cast<uintptr_t>(base + layout.inputs_begin);
  g_fault_map.inputs_end = reinterpret_cast<uintptr_t>(base + layout.inputs_end);
  for (size_t g = 0; g < layout.guard_count; ++g) {
    g_fault_map.guards[g][0] = reinterpret_cast<uintptr_t>(base + layout.guards[g][0]);
    g_fault_map.guards[g][1] = reinterpret_cast<uintptr_t>(base + layout.guards[g][1]);
  }
  g_fault_map.guard_count = layout.guard_count;
}

// Waits for `pid` until `deadline`; the wait status, or nothing if it still runs.
std::optional<int> wait_until(pid_t pid, Clock::time_point deadline) {
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    int status = 0;
    const pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) return status;
    if (got < 0 && errno != EINTR) return 0;  // not our child any more
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(10000));
  }
}

int kill_and_reap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// In the worker: serves calls until the parent closes the channel.
// (No PR_SET_PDEATHSIG: it follows the forking thread, not the process, and
// would kill the worker when that thread ends. A worker sees the end of file
// of its channel when attncheck exits, and shares its process group.)
[[noreturn]] void serve(int channel, const WorkerTask& task) {
  // Keep only the channel: the plugin cannot reach attncheck's other files
  // or the channels of other children, whose end of file must be seen.
  if (channel != kChannelFd) {
    if (dup2(channel, kChannelFd) < 0) _exit(kChannelExit);
  } else {
    fcntl(kChannelFd, F_SETFD, 0);
  }
  close_range(kChannelFd + 1, ~0U, 0);
  install_fault_handlers();
  for (;;) {
    Request request{};
    alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int))];
    iovec io{&request, sizeof request};
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    message.msg_control = space;
    message.msg_controllen = sizeof space;
    const ssize_t n = recvmsg(kChannelFd, &message, MSG_CMSG_CLOEXEC);
    if (n == 0) _exit(0);  // attncheck is done
    if (n < 0 && errno == EINTR) continue;
    int fd = -1;
    if (const cmsghdr* c = CMSG_FIRSTHDR(&message);
        c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    if (n != static_cast<ssize_t>(sizeof request) || request.magic != kMagic || fd < 0)
      _exit(kChannelExit);
    const ArenaLayout& layout = request.layout;
    void* mapped = mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (mapped == MAP_FAILED) _exit(kChannelExit);
    auto* base = static_cast<std::byte*>(mapped);
    auto* control = reinterpret_cast<Control*>(base + layout.control_at);
    task.prepare(base, layout);
    protect(base, layout);
    std::optional<double> reported;
    const auto begin = Clock::now();
    const int result = task.call(base, layout, reported);
    control->measured_seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    control->reported = reported.has_value();
    control->reported_seconds = reported.value_or(0);
    control->result = result;
    control->returned = 1;
    g_fault_map.control = nullptr;
    munmap(mapped, layout.total);
    const Reply reply{kMagic, request.sequence};
    if (send(kChannelFd, &reply, sizeof reply, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof reply))
      _exit(kChannelExit);
  }
}

}  // namespace

std::string signal_text(int sig) {
  const char* name = sigabbrev_np(sig);
  const char* description = strsignal(sig);
  return fmt::format("signal {} ({}{}{})", sig, name ? "SIG" : "", name ? name : "",
                     description ? fmt::format("{}{}", name ? ", " : "", description) : "");
}

Arena::Arena(std::vector<ArenaBuffer> buffers) : buffers_(std::move(buffers)) {
  if (buffers_.size() > kMaxArenaBuffers) throw std::logic_error("too many buffers");
  const size_t page = page_size();
  ArenaLayout& l = layout_;
  size_t off = 0;
  l.control_at = off;
  off += round_to_pages(sizeof(Control));
  const auto guard = [&] {
    l.guards[l.guard_count][0] = off;
    l.guards[l.guard_count][1] = off + page;
    ++l.guard_count;
    off += page;
  };
  guard();
  // Inputs back to back (64-byte aligned) in one read-only range.
  l.inputs_begin = off;
  l.buffer_count = buffers_.size();
  for (size_t i = 0; i < buffers_.size(); ++i) {
    l.bytes[i] = buffers_[i].bytes;
    if (buffers_[i].output) continue;
    l.offset[i] = off;
    off += round_to(buffers_[i].bytes, 64);
  }
  off = std::max(round_to_pages(off), l.inputs_begin + page);
  l.inputs_end = off;
  guard();
  // Each output at the start of its own pages, then canaries, then a guard page.
  region_end_.assign(buffers_.size(), 0);
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (!buffers_[i].output) continue;
    l.offset[i] = off;
    off += std::max(round_to_pages(buffers_[i].bytes), page);
    region_end_[i] = off;
    guard();
  }
  l.total = off;

  fd_ = memfd_create("attncheck-call", MFD_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "memfd_create");
  if (ftruncate(fd_, static_cast<off_t>(l.total)) != 0) {
    const int error = errno;
    close(fd_);
    throw std::system_error(error, std::generic_category(),
                            fmt::format("sizing {} bytes of shared memory", l.total));
  }
  void* base = mmap(nullptr, l.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (base == MAP_FAILED) {
    const int error = errno;
    close(fd_);
    throw std::system_error(error, std::generic_category(),
                            fmt::format("mapping {} bytes of shared memory", l.total));
  }
  base_ = static_cast<std::byte*>(base);
  for (size_t i = 0; i < buffers_.size(); ++i) {
    ArenaBuffer& b = buffers_[i];
    b.data = base_ + l.offset[i];
    if (!b.output) {
      if (b.bytes && b.source) std::memcpy(b.data, b.source, b.bytes);
      continue;
    }
    if (b.poison) {
      const uint32_t bits = kPoisonBits;
      for (size_t e = 0; e + 4 <= b.bytes; e += 4) std::memcpy(b.data + e, &bits, 4);
    }
    std::memset(b.data + b.bytes, kCanary, region_end_[i] - l.offset[i] - b.bytes);
  }
  reset_control();
}

void Arena::fill(size_t index, const void* source, bool compare_after) {
  ArenaBuffer& b = buffers_[index];
  std::memcpy(b.data, source, b.bytes);
  b.source = compare_after ? source : nullptr;
}

Arena::~Arena() {
  if (base_) munmap(base_, layout_.total);
  if (fd_ >= 0) close(fd_);
}

void Arena::reset_control() {
  auto* control = reinterpret_cast<Control*>(base_ + layout_.control_at);
  *control = Control{};
}

std::string Arena::locate(uintptr_t offset) const {
  const auto base = reinterpret_cast<uintptr_t>(base_);
  const uintptr_t address = base + offset;
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

std::string Arena::check_inputs() const {
  // Inputs are read-only in the child; compare anyway, in case it remapped them.
  for (const ArenaBuffer& b : buffers_) {
    if (b.output || b.bytes == 0 || !b.source || std::memcmp(b.data, b.source, b.bytes) == 0) continue;
    size_t e = 0;
    while (std::memcmp(b.data + e, static_cast<const std::byte*>(b.source) + e, 1) == 0) ++e;
    return fmt::format("changed input {} at byte {}", b.name, e);
  }
  return {};
}

ChildOutcome Arena::judge_return() const {
  const auto* control = reinterpret_cast<const Control*>(base_ + layout_.control_at);
  ChildOutcome outcome;
  if (std::string oob = check_canaries(); !oob.empty()) {
    outcome.kind = ChildOutcome::Kind::wrote_out_of_bounds;
    outcome.detail = oob;
    return outcome;
  }
  if (std::string changed = check_inputs(); !changed.empty()) {
    outcome.kind = ChildOutcome::Kind::wrote_input;
    outcome.detail = changed;
    return outcome;
  }
  outcome.result = control->result;
  outcome.measured_seconds = control->measured_seconds;
  if (control->reported) outcome.reported_seconds = control->reported_seconds;
  return outcome;
}

ChildOutcome Arena::judge_exit(int status) const {
  const auto* control = reinterpret_cast<const Control*>(base_ + layout_.control_at);
  ChildOutcome outcome;
  if (control->fault != 0 && WIFEXITED(status) && WEXITSTATUS(status) == kFaultExit) {
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
  outcome.kind = ChildOutcome::Kind::crashed;
  if (WIFSIGNALED(status)) {
    outcome.detail = fmt::format("crashed: killed by {}", signal_text(WTERMSIG(status)));
    return outcome;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == kChannelExit)
    outcome.detail = "closed or broke attncheck's control channel inside the call";
  else
    outcome.detail = fmt::format("exited with status {} inside the call (exit() or _exit() "
                                 "before returning)", code);
  return outcome;
}

ChildOutcome Arena::run(const std::function<int()>& call, int timeout_ms) {
  reset_control();
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t pid = fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) {
    install_fault_handlers();
    protect(base_, layout_);
    auto* control = reinterpret_cast<Control*>(base_ + layout_.control_at);
    control->result = call();
    control->returned = 1;
    std::fflush(nullptr);
    _exit(0);
  }
  const std::optional<int> status =
      wait_until(pid, Clock::now() + std::chrono::milliseconds(timeout_ms));
  ChildOutcome outcome;
  if (!status) {
    kill_and_reap(pid);
    outcome.kind = ChildOutcome::Kind::timed_out;
    outcome.detail = fmt::format("did not return within {} ms and was killed", timeout_ms);
    return outcome;
  }
  const auto* control = reinterpret_cast<const Control*>(base_ + layout_.control_at);
  if (control->returned && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) return judge_return();
  return judge_exit(*status);
}

bool Worker::fresh() const {
  std::lock_guard lock(mutex_);
  return pid_ < 0;
}

void Worker::start() {
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0)
    throw std::system_error(errno, std::generic_category(), "socketpair");
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(ends[0]);
    close(ends[1]);
    throw std::system_error(error, std::generic_category(), "fork");
  }
  if (pid == 0) {
    close(ends[0]);
    serve(ends[1], task_);
  }
  close(ends[1]);
  pid_ = pid;
  fd_ = ends[0];
}

void Worker::stop(bool graceful) {
  if (pid_ < 0) return;
  close(fd_);  // end of file: a worker between calls exits
  fd_ = -1;
  if (!graceful || !wait_until(pid_, Clock::now() + std::chrono::milliseconds(500))) kill_and_reap(pid_);
  pid_ = -1;
}

ChildOutcome Worker::ended(Arena& arena, int grace_ms, const std::string& how) {
  close(fd_);
  fd_ = -1;
  const std::optional<int> status = wait_until(pid_, Clock::now() + std::chrono::milliseconds(grace_ms));
  ChildOutcome outcome;
  if (status) {
    outcome = arena.judge_exit(*status);
  } else {
    kill_and_reap(pid_);
    outcome.kind = ChildOutcome::Kind::crashed;
    outcome.detail = fmt::format("{}; the worker was still running and was killed", how);
  }
  pid_ = -1;
  return outcome;
}

ChildOutcome Worker::call(Arena& arena, int timeout_ms) {
  std::lock_guard lock(mutex_);
  if (pid_ < 0) start();
  arena.reset_control();
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const uint64_t sequence = ++sequence_;

  Request request{kMagic, sequence, arena.layout()};
  alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int))] = {};
  iovec io{&request, sizeof request};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = space;
  message.msg_controllen = sizeof space;
  cmsghdr* c = CMSG_FIRSTHDR(&message);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  const int fd = arena.fd();
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t sent;
  while ((sent = sendmsg(fd_, &message, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (sent != static_cast<ssize_t>(sizeof request))  // it died or closed its end between calls
    return ended(arena, 500, "closed attncheck's control channel between calls");

  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      close(fd_);
      fd_ = -1;
      kill_and_reap(pid_);
      pid_ = -1;
      ChildOutcome outcome;
      outcome.kind = ChildOutcome::Kind::timed_out;
      outcome.detail = fmt::format("did not return within {} ms and was killed", timeout_ms);
      return outcome;
    }
    pollfd pfd{fd_, POLLIN, 0};
    const int n = poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (n == 0 || (n < 0 && errno == EINTR)) continue;
    char received[256];
    const ssize_t got = recv(fd_, received, sizeof received, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (got <= 0) return ended(arena, 500, "closed attncheck's control channel inside the call");
    Reply reply{};
    if (got == static_cast<ssize_t>(sizeof reply)) std::memcpy(&reply, received, sizeof reply);
    if (reply.magic != kMagic || reply.sequence != sequence) {
      stop(/*graceful=*/false);
      ChildOutcome outcome;
      outcome.kind = ChildOutcome::Kind::protocol;
      outcome.detail = fmt::format("wrote {} bytes to attncheck's control channel: \"{}\"", got,
                                   excerpt(std::string_view(received, static_cast<size_t>(got))));
      return outcome;
    }
    ChildOutcome outcome = arena.judge_return();
    // A worker that wrote where it must not may have corrupted itself too.
    if (outcome.kind != ChildOutcome::Kind::returned) stop(/*graceful=*/false);
    return outcome;
  }
}

}  // namespace attncheck::plugin_detail
