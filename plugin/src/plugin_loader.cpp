// The loader of C plugins (attn_plugin.h): dlopen in this process, forward
// calls in a persistent worker child over shared memory (child_call.h).
#include <dlfcn.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "abi.h"
#include "attn_plugin.h"
#include "attncheck/plugin.h"
#include "child_call.h"

namespace attncheck {
namespace {

using namespace plugin_detail;

std::mutex g_timeout_mutex;
int g_default_timeout_ms = 0;  // 0: not set

constexpr size_t kErrorBytes = 1024;

// The arena's buffers, in this order.
enum Buffer { kProblem, kQ, kK, kV, kMask, kKeyLengths, kOut, kWeights, kError, kThreads, kBufferCount };

// The optional entry point through which a plugin reports its compute time.
using ComputeSeconds = double (*)(void);
// The optional entry point through which a plugin takes the caller's thread count.
using SetThreads = void (*)(int);

class PluginImplementation final : public Implementation {
 public:
  PluginImplementation(std::string path, void* handle, const attn_plugin* info,
                       OutOfProcessOptions options)
      : path_(std::move(path)),
        handle_(handle),
        info_(*info),
        name_(info->name),
        precision_(precision_from_abi(info->precision, "plugin " + path_)),
        options_(options),
        compute_seconds_(reinterpret_cast<ComputeSeconds>(dlsym(handle, ATTN_PLUGIN_COMPUTE_SECONDS_SYMBOL))),
        set_threads_(reinterpret_cast<SetThreads>(dlsym(handle, ATTN_PLUGIN_SET_THREADS_SYMBOL))),
        worker_(worker_task()) {}
  ~PluginImplementation() override { dlclose(handle_); }

  /// The --impl spec, so that a printed replay line works; the plugin's own
  /// name appears in every finding.
  std::string name() const override { return "plugin:" + path_; }
  std::string declared_name() const override { return name_; }
  /// threads: the plugin exports attn_plugin_set_threads.
  Capabilities capabilities() const override {
    Capabilities c = capabilities_from_features(info_.features);
    c.threads = set_threads_ != nullptr;
    return c;
  }
  Precision precision() const override { return precision_; }
  std::optional<double> last_compute_seconds() const override { return last_compute_seconds_; }

  void forward(const Problem& p, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::span<float> out, std::span<float> weights,
               int threads) override {
    check_structure(p, q, k, v, out, weights);
    check_declared(p, info_.features, !weights.empty(), "plugin " + name_);
    const ExplicitMask mask = abi_mask(p);
    const Shape& s = p.shape;

    attn_problem problem{};
    problem.abi_version = ATTN_PLUGIN_ABI_VERSION;
    problem.batch = s.batch;
    problem.heads = s.heads;
    problem.n_q = s.n_q;
    problem.n_k = s.n_k;
    problem.d_k = s.d_k;
    problem.d_v = s.d_v;
    problem.scale = p.effective_scale();
    problem.temperature = p.temperature;
    problem.mask_kind = mask_kind(p);
    problem.mask_batch = p.mask ? mask.batch : 1;
    problem.mask_heads = p.mask ? mask.heads : 1;
    problem.empty_row_policy =
        p.empty_rows == EmptyRowPolicy::zero ? ATTN_EMPTY_ROW_ZERO : ATTN_EMPTY_ROW_REJECT;

    std::vector<ArenaBuffer> buffers(kBufferCount);
    buffers[kProblem] = {"problem", sizeof problem, false, false, nullptr};
    buffers[kQ] = {"Q", q.size_bytes(), false, false, q.data()};
    buffers[kK] = {"K", k.size_bytes(), false, false, k.data()};
    buffers[kV] = {"V", v.size_bytes(), false, false, v.data()};
    buffers[kMask] = {"mask", mask.allowed.size(), false, false, mask.allowed.data()};
    buffers[kKeyLengths] = {"key_lengths", p.key_lengths.size() * sizeof(int64_t), false, false,
                            p.key_lengths.data()};
    buffers[kOut] = {"out", out.size_bytes(), true, true, nullptr};
    buffers[kWeights] = {"weights", weights.size_bytes(), true, true, nullptr};
    buffers[kError] = {"error", kErrorBytes, true, false, nullptr};
    const int32_t threads_hint = std::max(threads, 1);
    buffers[kThreads] = {"threads", sizeof threads_hint, false, false, &threads_hint};
    Arena arena(std::move(buffers));
    // The worker points problem.mask and problem.key_lengths into its own
    // mapping of the arena (WorkerTask::prepare), so the problem differs
    // afterwards; it is read-only during the call like every input.
    arena.fill(kProblem, &problem, /*compare_after=*/false);

    last_compute_seconds_.reset();
    const bool fresh = worker_.fresh();
    const int timeout_ms = call_timeout_ms(
        s, options_.timeout_ms, start_up_allowance_ms(fresh, first_call_ms_, options_.timeout_ms));
    const auto begin = std::chrono::steady_clock::now();
    const ChildOutcome outcome = worker_.call(arena, timeout_ms);
    if (fresh && !first_call_ms_ && outcome.kind == ChildOutcome::Kind::returned)
      first_call_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    auto* aerror = reinterpret_cast<char*>(arena.data(kError));

    const std::string who = fmt::format("plugin {} on {}", name_, canonical_name(p));
    using K = ImplementationFault::Kind;
    switch (outcome.kind) {
      case ChildOutcome::Kind::returned: break;
      case ChildOutcome::Kind::timed_out:
        throw ImplementationFault(K::timed_out, fmt::format("{}: forward {}", who, outcome.detail));
      case ChildOutcome::Kind::crashed:
      case ChildOutcome::Kind::read_out_of_bounds:
        throw ImplementationFault(K::crashed, fmt::format("{}: forward {}", who, outcome.detail));
      case ChildOutcome::Kind::wrote_input:
        throw ImplementationFault(K::wrote_input, fmt::format("{}: forward {}", who, outcome.detail));
      case ChildOutcome::Kind::wrote_out_of_bounds:
        throw ImplementationFault(K::wrote_out_of_bounds,
                                  fmt::format("{}: forward {}", who, outcome.detail));
      case ChildOutcome::Kind::protocol:
        throw ImplementationFault(K::protocol, fmt::format("{}: forward {}", who, outcome.detail));
    }

    const double compute_seconds = outcome.reported_seconds.value_or(outcome.measured_seconds);
    if (!std::isfinite(compute_seconds) || compute_seconds < 0)
      throw ImplementationFault(K::protocol,
                                fmt::format("{}: {} returned {}; it must be finite and >= 0", who,
                                            ATTN_PLUGIN_COMPUTE_SECONDS_SYMBOL, compute_seconds));

    std::string message(aerror, strnlen(aerror, kErrorBytes));
    switch (outcome.result) {
      case ATTN_OK: break;
      case ATTN_ERR_INVALID:
        throw InvalidInput(fmt::format("plugin {}: {}", name_, message.empty() ? "input rejected" : message));
      case ATTN_ERR_UNSUPPORTED:
        // Problems outside the declared features never reach the plugin
        // (check_declared), so this declines a case beyond its precision
        // class: the harness accepts it only when the case is out of the
        // class's range, and reports it as a failure otherwise.
        throw Unsupported(fmt::format("{}: returned ATTN_ERR_UNSUPPORTED: {}", who,
                                      message.empty() ? "no message" : message));
      case ATTN_ERR_INTERNAL:
        throw std::runtime_error(fmt::format("{}: internal error: {}", who, message));
      default:
        throw ImplementationFault(K::protocol,
                                  fmt::format("{}: returned unknown code {}", who, outcome.result));
    }

    const auto* result = reinterpret_cast<const float*>(arena.data(kOut));
    check_written(who, "out", result, out.size());
    std::memcpy(out.data(), result, out.size_bytes());
    if (!weights.empty()) {
      const auto* w = reinterpret_cast<const float*>(arena.data(kWeights));
      check_written(who, "weights", w, weights.size());
      std::memcpy(weights.data(), w, weights.size_bytes());
    }
    last_compute_seconds_ = compute_seconds;
  }

 private:
  static void check_written(const std::string& who, const char* tensor, const float* data,
                            size_t count) {
    size_t unwritten = 0, first = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!is_poison(data[i])) continue;
      if (unwritten++ == 0) first = i;
    }
    if (unwritten)
      throw ImplementationFault(
          ImplementationFault::Kind::left_output_unwritten,
          fmt::format("{}: returned ATTN_OK but left {} of {} elements of {} unwritten (first at "
                      "element {})", who, unwritten, count, tensor, first));
  }

  // What the worker child does with each arena: point the problem into it,
  // call forward, and ask the plugin for its compute time if it reports one.
  WorkerTask worker_task() const {
    WorkerTask task;
    task.prepare = [](std::byte* base, const ArenaLayout& l) {
      auto* problem = reinterpret_cast<attn_problem*>(base + l.offset[kProblem]);
      problem->mask = problem->mask_kind == ATTN_MASK_EXPLICIT
                          ? reinterpret_cast<const uint8_t*>(base + l.offset[kMask])
                          : nullptr;
      problem->key_lengths =
          l.bytes[kKeyLengths] ? reinterpret_cast<const int64_t*>(base + l.offset[kKeyLengths]) : nullptr;
    };
    task.call = [forward = info_.forward, compute_seconds = compute_seconds_, set_threads = set_threads_](
                    std::byte* base, const ArenaLayout& l, std::optional<double>& reported) {
      const auto at = [&](Buffer b) { return base + l.offset[b]; };
      if (set_threads) {
        int32_t threads = 1;
        std::memcpy(&threads, at(kThreads), sizeof threads);
        set_threads(threads);
      }
      const int rc = forward(reinterpret_cast<const attn_problem*>(at(kProblem)),
                             reinterpret_cast<const float*>(at(kQ)), reinterpret_cast<const float*>(at(kK)),
                             reinterpret_cast<const float*>(at(kV)), reinterpret_cast<float*>(at(kOut)),
                             l.bytes[kWeights] ? reinterpret_cast<float*>(at(kWeights)) : nullptr,
                             reinterpret_cast<char*>(at(kError)), kErrorBytes);
      if (rc == ATTN_OK && compute_seconds) reported = compute_seconds();
      return rc;
    };
    return task;
  }

  std::string path_;
  void* handle_;
  attn_plugin info_;
  std::string name_;
  Precision precision_;
  OutOfProcessOptions options_;
  ComputeSeconds compute_seconds_;
  SetThreads set_threads_;
  std::optional<double> last_compute_seconds_;
  std::optional<double> first_call_ms_;  // of the run's first worker (start_up_allowance_ms)
  Worker worker_;
};

}  // namespace

int default_timeout_ms() {
  if (const char* env = std::getenv("ATTNCHECK_TIMEOUT_MS")) {
    char* end = nullptr;
    const long value = std::strtol(env, &end, 10);
    if (end && *end == '\0' && value > 0 && value <= 86400000) return static_cast<int>(value);
  }
  std::lock_guard lock(g_timeout_mutex);
  return g_default_timeout_ms > 0 ? g_default_timeout_ms : 10000;
}

void set_default_timeout_ms(int timeout_ms) {
  if (timeout_ms <= 0)
    throw InvalidInput(fmt::format("option --timeout-ms is {}; it must be > 0", timeout_ms));
  std::lock_guard lock(g_timeout_mutex);
  g_default_timeout_ms = timeout_ms;
}

OutOfProcessOptions default_out_of_process_options() {
  OutOfProcessOptions options;
  options.timeout_ms = default_timeout_ms();
  return options;
}

std::unique_ptr<Implementation> load_plugin(const std::string& path,
                                            const OutOfProcessOptions& options) {
  const std::string who = fmt::format("plugin {}", path);
  if (path.empty()) throw InvalidInput("plugin: the path is empty (use plugin:PATH)");
  if (access(path.c_str(), R_OK) != 0)
    throw InvalidInput(fmt::format("{}: no such readable file", who));
  // A bare file name would make dlopen search the library path instead.
  const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  // Load it in a child first: a plugin whose loading or attn_plugin_init
  // crashes or hangs is refused instead of taking attncheck down.
  {
    Arena probe({});
    const ChildOutcome outcome = probe.run(
        [&] {
          void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
          if (!h) return 0;  // the error is reported below, from this process
          auto init = reinterpret_cast<const attn_plugin* (*)()>(dlsym(h, "attn_plugin_init"));
          if (init) init();
          return 0;
        },
        options.timeout_ms > 0 ? options.timeout_ms : 10000);
    if (outcome.kind == ChildOutcome::Kind::timed_out)
      throw InvalidInput(fmt::format("{}: loading it or attn_plugin_init {}", who, outcome.detail));
    if (outcome.kind != ChildOutcome::Kind::returned)
      throw InvalidInput(fmt::format("{}: loading it or attn_plugin_init failed: {}", who, outcome.detail));
  }
  dlerror();
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* error = dlerror();
    throw InvalidInput(fmt::format("{}: cannot load: {}", who, error ? error : "unknown error"));
  }
  using Init = const attn_plugin* (*)();
  auto init = reinterpret_cast<Init>(dlsym(handle, "attn_plugin_init"));
  if (!init) {
    dlclose(handle);
    throw InvalidInput(fmt::format("{}: does not export attn_plugin_init", who));
  }
  const attn_plugin* info = init();
  const auto refuse = [&](const std::string& why) {
    dlclose(handle);
    throw InvalidInput(fmt::format("{}: {}", who, why));
  };
  if (!info) refuse("attn_plugin_init returned NULL");
  if (info->abi_version != ATTN_PLUGIN_ABI_VERSION)
    refuse(fmt::format("built against plugin ABI version {}, but this attncheck speaks version {}; "
                       "rebuild the plugin against this attn_plugin.h",
                       info->abi_version, ATTN_PLUGIN_ABI_VERSION));
  if (!info->name || !*info->name) refuse("attn_plugin.name is empty");
  if (!info->forward) refuse("attn_plugin.forward is NULL");
  if (info->features >> 12) refuse(fmt::format("unknown feature bits 0x{:x}", info->features >> 12 << 12));
  if (options.timeout_ms <= 0)
    refuse(fmt::format("timeout is {} ms; it must be > 0", options.timeout_ms));
  try {
    return std::make_unique<PluginImplementation>(path, handle, info, options);
  } catch (...) {
    dlclose(handle);
    throw;
  }
}

}  // namespace attncheck
