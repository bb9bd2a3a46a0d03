// The client of the subprocess protocol (docs/protocol.md): one persistent
// child started with /bin/sh -c COMMAND, a handshake line, then per case a
// JSON header line and raw little-endian float32 payloads each way.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include "abi.h"
#include "exec_protocol.h"
#include "attn_plugin.h"
#include "attncheck/plugin.h"

namespace attncheck {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the protocol's payloads are little-endian float32, copied as they are");

using namespace plugin_detail;
using Clock = std::chrono::steady_clock;
using Kind = ImplementationFault::Kind;
using json = nlohmann::json;

constexpr size_t kMaxLine = 1 << 20;

class ExecImplementation final : public Implementation {
 public:
  ExecImplementation(std::string command, OutOfProcessOptions options)
      : command_(std::move(command)), options_(options) {
    try {
      start();
    } catch (const ImplementationFault& fault) {
      throw InvalidInput(fault.what());  // already names the command
    }
  }
  ~ExecImplementation() override { stop(/*graceful=*/true); }

  /// The --impl spec, so that a printed replay line works; the child's own
  /// name (from its handshake) appears in every finding.
  std::string name() const override { return "exec:" + command_; }
  std::string declared_name() const override { return name_; }
  Capabilities capabilities() const override { return capabilities_from_features(features_); }
  Precision precision() const override { return precision_; }
  std::optional<double> last_compute_seconds() const override { return last_compute_seconds_; }

  void forward(const Problem& p, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::span<float> out, std::span<float> weights,
               int threads) override {
    check_structure(p, q, k, v, out, weights);
    check_declared(p, features_, !weights.empty(), "exec " + name_);
    if (pid_ < 0) start();  // after a fault the child was stopped; start a fresh one
    last_compute_seconds_.reset();
    context_ = fmt::format("exec {} on {}", name_, canonical_name(p));
    const bool fresh = calls_served_ == 0;
    timeout_used_ = call_timeout_ms(p.shape, options_.timeout_ms,
                                    start_up_allowance_ms(fresh, first_call_ms_, options_.timeout_ms));
    const auto begin = Clock::now();
    deadline_ = begin + std::chrono::milliseconds(timeout_used_);

    const ExplicitMask mask = abi_mask(p);
    const Shape& s = p.shape;
    const uint64_t id = next_id_++;
    json header = {{"id", id},
                   {"batch", s.batch},
                   {"heads", s.heads},
                   {"n_q", s.n_q},
                   {"n_k", s.n_k},
                   {"d_k", s.d_k},
                   {"d_v", s.d_v},
                   {"scale", p.effective_scale()},
                   {"temperature", p.temperature},
                   {"mask_kind", mask_kind_name(mask_kind(p))},
                   {"mask_batch", p.mask ? mask.batch : 1},
                   {"mask_heads", p.mask ? mask.heads : 1},
                   {"key_lengths", p.key_lengths.empty() ? json(nullptr) : json(p.key_lengths)},
                   {"empty_row_policy", p.empty_rows == EmptyRowPolicy::zero ? "zero" : "reject"},
                   {"weights", !weights.empty()},
                   {"threads", std::max(threads, 1)}};
    send_all(header.dump() + "\n");
    send_all(std::string_view(reinterpret_cast<const char*>(q.data()), q.size_bytes()));
    send_all(std::string_view(reinterpret_cast<const char*>(k.data()), k.size_bytes()));
    send_all(std::string_view(reinterpret_cast<const char*>(v.data()), v.size_bytes()));
    if (p.mask)
      send_all(std::string_view(reinterpret_cast<const char*>(mask.allowed.data()), mask.allowed.size()));

    ReplyHeader reply;
    try {
      reply = decode_reply_header(read_line("the reply header"), id);
    } catch (const ProtocolError& e) {
      fail(Kind::protocol, e.what());
    }
    ++calls_served_;  // it answered: its start-up is behind it
    if (fresh && !first_call_ms_)
      first_call_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
    const std::string& status = reply.status;
    const std::string& message = reply.message;
    if (status == "invalid")
      throw InvalidInput(fmt::format("exec {}: {}", name_, message.empty() ? "input rejected" : message));
    // Problems outside the declared features are never sent (check_declared), so
    // "unsupported" declines a case beyond the child's precision class: judged
    // by the harness (accepted only when the case is out of the class's range).
    if (status == "unsupported")
      throw Unsupported(fmt::format("{}: answered \"unsupported\": {}", context_,
                                    message.empty() ? "no message" : message));
    if (status == "error")
      throw std::runtime_error(fmt::format("{}: internal error: {}", context_, message));
    // Read into scratch first: nothing reaches the caller's buffers from a failed call.
    std::string payload = read_bytes(out.size_bytes() + weights.size_bytes(), "the output payload");
    std::memcpy(out.data(), payload.data(), out.size_bytes());
    if (!weights.empty())
      std::memcpy(weights.data(), payload.data() + out.size_bytes(), weights.size_bytes());
    last_compute_seconds_ = reply.compute_seconds;
  }

 private:
  [[noreturn]] void fail(Kind kind, const std::string& detail, bool keep_child = false) {
    if (!keep_child) stop(/*graceful=*/false);
    throw ImplementationFault(kind, fmt::format("{}: {}", context_, detail));
  }

  void start() {
    context_ = fmt::format("exec {}", command_);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      throw std::system_error(errno, std::generic_category(), "socketpair");
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      close(sv[0]);
      close(sv[1]);
      throw std::system_error(errno, std::generic_category(), "fork");
    }
    if (pid == 0) {
      // The child's stdin and stdout are one end of the socket; stderr is ours.
      setpgid(0, 0);
      dup2(sv[1], 0);
      dup2(sv[1], 1);
      execl("/bin/sh", "sh", "-c", command_.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid, pid);
    close(sv[1]);
    pid_ = pid;
    fd_ = sv[0];
    buffer_.clear();
    calls_served_ = 0;
    deadline_ = Clock::now() + std::chrono::milliseconds(options_.startup_timeout_ms);
    timeout_used_ = options_.startup_timeout_ms;

    Handshake hello;
    try {
      hello = decode_handshake(read_line("the handshake line"));
    } catch (const ProtocolError& e) {
      fail(Kind::protocol, e.what());
    }
    // A restarted child must describe the same implementation.
    if (started_ && (hello.name != name_ || hello.features != features_))
      fail(Kind::protocol, "a restarted child sent a different handshake");
    name_ = hello.name;
    features_ = hello.features;
    precision_ = precision_from_abi(hello.precision, "exec " + command_);
    started_ = true;
  }

  void stop(bool graceful) {
    if (pid_ < 0) return;
    if (fd_ >= 0) close(fd_);  // end of input: a well-behaved child exits
    fd_ = -1;
    int status = 0;
    bool gone = false;
    for (int i = 0; graceful && i < 50 && !gone; ++i) {
      gone = waitpid(pid_, &status, WNOHANG) == pid_;
      if (!gone) usleep(10000);
    }
    if (!gone) {
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    pid_ = -1;
  }

  // How the child ended, after it closed its end; waits briefly for it.
  std::string child_end() {
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 100 && got == 0; ++i) {
      got = waitpid(pid_, &status, WNOHANG);
      if (got == 0) usleep(10000);
    }
    if (got != pid_) return "closed its output";
    pid_ = -1;
    if (WIFSIGNALED(status)) {
      const char* sig = strsignal(WTERMSIG(status));
      return fmt::format("was killed by signal {} ({})", WTERMSIG(status), sig ? sig : "unknown");
    }
    const int code = WEXITSTATUS(status);
    if (code > 128 && code < 128 + 65) {
      // /bin/sh reports a command killed by signal N as status 128 + N.
      const char* sig = strsignal(code - 128);
      return fmt::format("exited with status {} (its command was killed by signal {} ({}))", code,
                         code - 128, sig ? sig : "unknown");
    }
    return fmt::format("exited with status {}", code);
  }

  int wait_ready(short events, const std::string& what) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      if (left <= 0)
        fail(Kind::timed_out, fmt::format("no progress on {} within {} ms; the child was killed", what,
                                          timeout_used_));
      pollfd pfd{fd_, events, 0};
      const int n = poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
      if (n > 0) return pfd.revents;
      if (n < 0 && errno != EINTR) fail(Kind::protocol, fmt::format("poll: {}", std::strerror(errno)));
    }
  }

  // Reads what is available into buffer_; false at end of stream.
  bool receive(const std::string& what) {
    wait_ready(POLLIN, what);
    char chunk[65536];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    return false;
  }

  void send_all(std::string_view data) {
    while (!data.empty()) {
      const int revents = wait_ready(POLLOUT | POLLIN, "sending the case");
      if (revents & POLLIN) {
        // The child speaks before it has read the whole case: it died, or it is off-protocol.
        if (!receive("sending the case"))
          fail(Kind::crashed, fmt::format("the child {} while the case was being sent", child_end()));
        fail(Kind::protocol, fmt::format("the child wrote before reading the whole case: \"{}\"",
                                         excerpt(buffer_)));
      }
      const ssize_t n = send(fd_, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) data.remove_prefix(static_cast<size_t>(n));
      else if (n < 0 && errno != EAGAIN && errno != EINTR)
        fail(Kind::crashed, fmt::format("the child {} while the case was being sent ({})", child_end(),
                                        std::strerror(errno)));
    }
  }

  std::string read_line(const std::string& what) {
    size_t newline;
    while ((newline = buffer_.find('\n')) == std::string::npos) {
      if (buffer_.size() > kMaxLine)
        fail(Kind::protocol, fmt::format("{} is longer than {} bytes: \"{}\"", what, kMaxLine, excerpt(buffer_)));
      if (!receive(what)) {
        const std::string end = child_end();
        fail(Kind::crashed, buffer_.empty() ? fmt::format("the child {} before sending {}", end, what)
                                            : fmt::format("the child {} after a partial {}: \"{}\"",
                                                          end, what, excerpt(buffer_)));
      }
    }
    std::string line = buffer_.substr(0, newline);
    buffer_.erase(0, newline + 1);
    return line;
  }

  std::string read_bytes(size_t count, const std::string& what) {
    while (buffer_.size() < count) {
      if (!receive(what)) {
        const std::string end = child_end();
        fail(Kind::crashed, fmt::format("the child {} after {} of the {} bytes of {} (truncated)", end,
                                        buffer_.size(), count, what));
      }
    }
    std::string data = buffer_.substr(0, count);
    buffer_.erase(0, count);
    return data;
  }

  std::string command_;
  OutOfProcessOptions options_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
  std::string name_;
  uint32_t features_ = 0;
  Precision precision_ = Precision::fp32;
  bool started_ = false;
  uint64_t next_id_ = 1;
  uint64_t calls_served_ = 0;  // by the current child: its first call gets a start-up allowance
  std::optional<double> last_compute_seconds_;
  std::optional<double> first_call_ms_;  // of the run's first child (start_up_allowance_ms)
  std::string context_;
  Clock::time_point deadline_;
  int timeout_used_ = 0;
};

}  // namespace

std::unique_ptr<Implementation> start_exec(const std::string& command,
                                           const OutOfProcessOptions& options) {
  if (command.empty()) throw InvalidInput("exec: the command is empty (use exec:'COMMAND')");
  if (options.timeout_ms <= 0 || options.startup_timeout_ms <= 0)
    throw InvalidInput(fmt::format("exec:{}: timeouts must be > 0", command));
  return std::make_unique<ExecImplementation>(command, options);
}

}  // namespace attncheck
