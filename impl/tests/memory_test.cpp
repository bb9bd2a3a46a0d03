// The fused path's working memory is O((n_q + n_k)·d): it never holds an
// n_q × n_k score matrix, whatever the shape or thread count. Each call runs in
// a forked child, so that the peak it adds to the child's resident set is its
// own (the kernel's VmHWM, reset before the call through /proc/self/clear_refs).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "attncheck/attention.h"

using attncheck::Problem;

namespace {

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); -1 if absent.
int64_t status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;  // kB
  }
  return -1;
}

struct Footprint {
  int64_t before = -1;  // resident bytes with the tensors allocated, before the call
  int64_t added = -1;   // the call's peak resident bytes above that
  bool ok = false;      // the child computed a finite output
};

// Runs one call of the fused attention in a forked child and returns the
// resident memory the call added at its peak.
Footprint measure(const Problem& problem, int threads) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(fds[0]);
    Footprint f;
    const auto& s = problem.shape;
    std::vector<float> q(static_cast<size_t>(s.q_size())), k(static_cast<size_t>(s.k_size())),
        v(static_cast<size_t>(s.v_size())), out(static_cast<size_t>(s.out_size()), 0.0f);
    uint32_t state = 7;  // xorshift: values in [-1, 1), cheap enough for 10^8 of them
    for (auto* t : {&q, &k, &v}) {
      for (float& x : *t) {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        x = static_cast<float>(state >> 8) * 0x1p-23f - 1.0f;
      }
    }
    {
      std::ofstream clear("/proc/self/clear_refs");
      clear << "5";  // resets VmHWM to the present resident set
    }
    f.before = status_bytes("VmRSS");
    const int64_t peak_before = status_bytes("VmHWM");
    attncheck::AttentionOptions options;
    options.threads = threads;
    try {
      attncheck::attention(problem, q.data(), k.data(), v.data(), out.data(), options);
    } catch (...) {
      _exit(2);  // the child must not return into the test runner
    }
    // Growth of the peak over the call; the tensors were all touched before it.
    f.added = status_bytes("VmHWM") - std::max(f.before, peak_before);
    f.ok = true;
    for (float x : out) f.ok = f.ok && std::isfinite(x);
    const ssize_t written = write(fds[1], &f, sizeof f);
    _exit(written == static_cast<ssize_t>(sizeof f) ? 0 : 1);
  }
  close(fds[1]);
  Footprint f;
  const ssize_t got = read(fds[0], &f, sizeof f);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(got == static_cast<ssize_t>(sizeof f));
  REQUIRE(f.before > 0);  // /proc/self/status was read
  return f;
}

// What a path may hold besides 8 MiB a thread of kept scratch (tiles, packed
// panels, a streamed call's staged rows).
enum class Path {
  packs_slices,  // whole slices' Kᵀ packed: up to the tensors' size
  streams,       // panels packed one at a time: nothing that grows with n_k
  decodes,       // each split's partial results (m, l, o of every row, a split
                 // being 1024 keys): for n_q ≤ 64, under a sixteenth of K and V
};

// The peak the call adds must stay within the path's bound, and the bound must
// be a quarter of the n_q × n_k scores or less, so that the case tells the two
// apart.
void check_footprints(Path path, int64_t heads, int64_t n_q, int64_t n_k, int64_t d) {
  for (int threads : {1, 2}) {
    Problem problem;
    problem.shape = {1, heads, n_q, n_k, d, d};
    const auto& s = problem.shape;
    const int64_t tensors = 4 * (s.q_size() + s.k_size() + s.v_size() + s.out_size());
    const int64_t scores = 4 * heads * n_q * n_k;
    const int64_t allowance = path == Path::packs_slices ? tensors
                              : path == Path::decodes    ? 4 * (s.k_size() + s.v_size()) / 16
                                                         : 0;
    const int64_t bound = 8 * (int64_t{1} << 20) * threads + allowance;
    const Footprint f = measure(problem, threads);
    INFO(fmt::format("heads {}, n_q {}, n_k {}, d {}, {} threads: {} KiB added to {} MiB resident (bound {} MiB, "
                     "scores {} MiB)",
                     heads, n_q, n_k, d, threads, f.added >> 10, f.before >> 20, bound >> 20, scores >> 20));
    CHECK(f.ok);
    CHECK(f.added >= 0);
    CHECK(f.added <= bound);
    CHECK(bound * 4 <= scores);
  }
}

}  // namespace

TEST_CASE("a call's working memory grows with n_q + n_k, not with n_q · n_k", "[memory]" ATTNCHECK_NO_SANITIZE) {
  SECTION("square prefill") { check_footprints(Path::packs_slices, 2, 4096, 4096, 32); }
  SECTION("cross, more query rows than a streamed call takes") {
    check_footprints(Path::packs_slices, 1, 1024, 32768, 16);
  }
  SECTION("cross, streamed") { check_footprints(Path::streams, 1, 300, 262144, 16); }
  SECTION("decode") { check_footprints(Path::decodes, 8, 32, 262144, 16); }
}
