#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attncheck/bench.h"

using attncheck::Causal;
using attncheck::Problem;
using attncheck::useful_flops;

namespace {
Problem make(int64_t batch, int64_t heads, int64_t n_q, int64_t n_k, int64_t d_k, int64_t d_v,
             Causal causal = Causal::none) {
  Problem p;
  p.shape = {batch, heads, n_q, n_k, d_k, d_v};
  p.causal = causal;
  return p;
}
}  // namespace

TEST_CASE("useful flops without a mask are 4·n_q·n_k·d per batch element and head", "[flops]") {
  CHECK(useful_flops(make(1, 1, 64, 64, 16, 16)) == 4.0 * 64 * 64 * 16);
  CHECK(useful_flops(make(2, 3, 5, 7, 8, 8)) == 6 * 4.0 * 5 * 7 * 8);
}

TEST_CASE("useful flops count d_k for QKᵀ and d_v for AV", "[flops]") {
  CHECK(useful_flops(make(1, 1, 3, 4, 8, 2)) == 3 * 4 * 2.0 * (8 + 2));
}

TEST_CASE("causal useful flops count only the allowed pairs", "[flops]") {
  // Square, either alignment: rows allow 1, 2, ..., n keys.
  const double n = 10, d = 4;
  const double triangle = n * (n + 1) / 2;
  CHECK(useful_flops(make(1, 1, 10, 10, 4, 4, Causal::top_left)) == triangle * 4 * d);
  CHECK(useful_flops(make(1, 1, 10, 10, 4, 4, Causal::bottom_right)) == triangle * 4 * d);
  CHECK(useful_flops(make(2, 2, 10, 10, 4, 4, Causal::top_left)) == 4 * triangle * 4 * d);
}

TEST_CASE("causal useful flops of cross shapes follow the alignment", "[flops]") {
  // n_q = 3, n_k = 5. top-left: rows allow 1, 2, 3 keys; bottom-right: 3, 4, 5.
  CHECK(useful_flops(make(1, 1, 3, 5, 1, 1, Causal::top_left)) == (1 + 2 + 3) * 4.0);
  CHECK(useful_flops(make(1, 1, 3, 5, 1, 1, Causal::bottom_right)) == (3 + 4 + 5) * 4.0);
  // n_q = 5, n_k = 3. top-left: 1, 2, 3, 3, 3; bottom-right: j <= i - 2 gives 0, 0, 1, 2, 3.
  CHECK(useful_flops(make(1, 1, 5, 3, 1, 1, Causal::top_left)) == (1 + 2 + 3 + 3 + 3) * 4.0);
  CHECK(useful_flops(make(1, 1, 5, 3, 1, 1, Causal::bottom_right)) == (0 + 0 + 1 + 2 + 3) * 4.0);
}

TEST_CASE("useful flops honour key lengths and explicit masks", "[flops]") {
  Problem p = make(2, 1, 2, 4, 1, 1);
  p.key_lengths = {1, 3};
  CHECK(useful_flops(p) == (2 * 1 + 2 * 3) * 4.0);
  Problem m = make(1, 1, 2, 2, 1, 1);
  m.mask = attncheck::ExplicitMask{1, 1, {1, 0, 0, 1}};
  CHECK(useful_flops(m) == 2 * 4.0);
}

TEST_CASE("benchmark names are <impl>/n:<n>/d:<d>/mask:<mask>/threads:<t>", "[names]") {
  CHECK(attncheck::bench_name("fused", 4096, 64, "causal", 2) ==
        "fused/n:4096/d:64/mask:causal/threads:2");
}

TEST_CASE("lists of sizes parse, and malformed lists are rejected naming the option", "[options]") {
  CHECK(attncheck::parse_positive_list("64,128", "--n") == std::vector<int64_t>{64, 128});
  CHECK(attncheck::parse_positive_list("7", "--n") == std::vector<int64_t>{7});
  for (const char* bad : {"", "64,", ",64", "64,,128", "0", "-64", "abc", "64,x", "1e3", "99999999999999"}) {
    INFO(bad);
    CHECK_THROWS_WITH(attncheck::parse_positive_list(bad, "--n"), Catch::Contains("option --n"));
  }
}

TEST_CASE("bench options are checked before anything runs", "[options]") {
  attncheck::BenchOptions o;
  o.impls = {"naive-eigen"};
  CHECK_NOTHROW(attncheck::check_bench_options(o));
  o.impls = {"naive-eigen", "nope"};
  CHECK_THROWS_WITH(attncheck::check_bench_options(o), Catch::Contains("--impl") && Catch::Contains("nope"));
  o.impls = {"naive-eigen"};
  o.masks = {"diagonal"};
  CHECK_THROWS_WITH(attncheck::check_bench_options(o), Catch::Contains("--mask"));
  o.masks = {"none"};
  o.json_path = "/nonexistent-dir/out.json";
  CHECK_THROWS_WITH(attncheck::check_bench_options(o), Catch::Contains("--json"));
  o.json_path.assign(1, '/');  // a directory (assign: GCC 12 -Wrestrict false positive on = "/")
  CHECK_THROWS_WITH(attncheck::check_bench_options(o), Catch::Contains("--json"));
  o.json_path.clear();
  for (const int64_t offset : {-4, 2, 64}) {
    o.tensor_offset = offset;
    CHECK_THROWS_WITH(attncheck::check_bench_options(o), Catch::Contains("--tensor-offset"));
  }
  o.tensor_offset = 60;
  CHECK_NOTHROW(attncheck::check_bench_options(o));
}

TEST_CASE("bytes moved are Q and O once plus K and V once up to the last key read", "[bytes]") {
  using attncheck::moved_bytes;
  // 2 batch, 3 heads, n_q 4, n_k 100, d_k 8, d_v 16: Q 2·3·4·8, O 2·3·4·16, K 2·3·100·8, V 2·3·100·16.
  CHECK(moved_bytes(make(2, 3, 4, 100, 8, 16)) == 4.0 * (192 + 384 + 4800 + 9600));
  // Bottom-right causal reads every key (the last row reads all); top-left only the first n_q.
  CHECK(moved_bytes(make(1, 1, 4, 100, 8, 8, Causal::bottom_right)) == 4.0 * (32 + 32 + 1600));
  CHECK(moved_bytes(make(1, 1, 4, 100, 8, 8, Causal::top_left)) == 4.0 * (32 + 32 + 4 * 16));
  Problem padded = make(2, 1, 1, 100, 8, 8);
  padded.key_lengths = {10, 30};
  CHECK(moved_bytes(padded) == 4.0 * (16 + 16 + 40 * 16));
}

TEST_CASE("cross-shape names are <impl>/n_q:<q>/n_k:<k>/d:<d>/mask:<mask>/threads:<t>", "[names]") {
  CHECK(attncheck::bench_name("fused", 1, 16384, 128, "none", 2) ==
        "fused/n_q:1/n_k:16384/d:128/mask:none/threads:2");
}

TEST_CASE("cross shapes: n_q × n_k, causal bottom-right aligned, both lists or neither", "[options]") {
  attncheck::BenchOptions o;
  o.impls = {"fused"};
  o.heads = 8;
  const Problem p = attncheck::bench_problem(o, 4, 1024, 128, "causal");
  CHECK(p.shape.n_q == 4);
  CHECK(p.shape.n_k == 1024);
  CHECK(p.shape.heads == 8);
  CHECK(p.shape.d_v == 128);
  CHECK(p.causal == Causal::bottom_right);
  CHECK(attncheck::bench_problem(o, 64, 64, "causal").causal == Causal::top_left);
  o.n.clear();
  CHECK_THROWS_WITH(attncheck::check_bench_options(o), Catch::Contains("--n"));
  o.n_q = {1, 4};
  CHECK_THROWS_WITH(attncheck::check_bench_options(o), Catch::Contains("--n-k"));
  o.n_k = {1024};
  CHECK_NOTHROW(attncheck::check_bench_options(o));
  o.n_q.clear();
  CHECK_THROWS_WITH(attncheck::check_bench_options(o), Catch::Contains("--n-q"));
}

TEST_CASE("benchmark tensors start the asked number of bytes past a 64-byte boundary, zeroed", "[tensors]") {
  for (const int64_t offset : {0, 4, 16, 60}) {
    for (const int64_t size : {1, 17, 4096}) {
      INFO("offset " << offset << ", size " << size);
      attncheck::BenchTensor t(size, offset);
      CHECK(reinterpret_cast<uintptr_t>(t.data()) % 64 == static_cast<uintptr_t>(offset));
      CHECK(std::all_of(t.data(), t.data() + size, [](float x) { return x == 0.0f; }));
      t.data()[size - 1] = 1.0f;  // the last element is inside the allocation (ASan checks it)
    }
  }
}

TEST_CASE("the FMA floor does a call's useful flops on any thread count and writes only out[0]", "[floor]") {
  Problem causal = make(2, 3, 40, 200, 16, 8, Causal::bottom_right);
  Problem short_keys = make(2, 1, 64, 64, 32, 32);
  short_keys.key_lengths = {10, 64};
  for (const Problem& p : {make(1, 2, 64, 64, 16, 16), causal, short_keys}) {
    const std::vector<float> q(static_cast<size_t>(p.shape.q_size()), 1.0f);
    const std::vector<float> k(static_cast<size_t>(p.shape.k_size()), 1.0f);
    const std::vector<float> v(static_cast<size_t>(p.shape.v_size()), 1.0f);
    for (int threads : {1, 2, 3}) {
      INFO("threads " << threads << ", flops " << useful_flops(p));
      std::vector<float> out(static_cast<size_t>(p.shape.out_size()), 12345.0f);
      attncheck::fma_floor(p, q.data(), k.data(), v.data(), out.data(), threads);
      // Each share is rounded to whole chain iterations: at most 12 chains × 16 lanes × 2 flops off.
      CHECK(out[0] == Approx(useful_flops(p)).margin(384.0 * threads));
      CHECK(std::all_of(out.begin() + 1, out.end(), [](float x) { return x == 0.0f; }));
    }
  }
}

TEST_CASE("the FMA floor rejects bad options and null tensors, naming them, and writes nothing", "[floor]") {
  Problem p = make(1, 1, 4, 6, 3, 3);
  const std::vector<float> q(12, 1.0f), k(18, 1.0f), v(18, 1.0f);
  std::vector<float> out(12, 12345.0f);
  Problem cold = p;
  cold.temperature = 0.0;
  CHECK_THROWS_WITH(attncheck::fma_floor(cold, q.data(), k.data(), v.data(), out.data()),
                    Catch::Contains("temperature"));
  Problem long_keys = p;
  long_keys.key_lengths = {99};
  CHECK_THROWS_WITH(attncheck::fma_floor(long_keys, q.data(), k.data(), v.data(), out.data()),
                    Catch::Contains("key_lengths"));
  CHECK_THROWS_WITH(attncheck::fma_floor(p, q.data(), nullptr, v.data(), out.data()), Catch::Contains("K: null"));
  CHECK_THROWS_AS(attncheck::fma_floor(p, q.data(), k.data(), v.data(), nullptr), attncheck::InvalidInput);
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 12345.0f; }));
}

TEST_CASE("the summary after a bench gives each shape's time over the floors of the same shape", "[floor]") {
  const std::map<std::string, double> seconds = {
      {"fused/n_q:1/n_k:4096/d:128/mask:none/threads:1", 2.0e-3},
      {"read-floor/n_q:1/n_k:4096/d:128/mask:none/threads:1", 1.6e-3},
      {"fma-floor/n_q:1/n_k:4096/d:128/mask:none/threads:1", 0.1e-3},
      {"plugin:/lib/n:2/x.so/n:256/d:64/mask:none/threads:2", 3.0e-3},
      {"fma-floor/n:256/d:64/mask:none/threads:2", 2.0e-3},
      {"fused/n:256/d:64/mask:none/threads:1", 1.0e-3},  // no floor on 1 thread: no line
      {"fused/n:256/d:64/mask:none/threads:2", 2.5e-3},
  };
  const std::vector<std::string> lines = attncheck::floor_summary(seconds);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "fused/n:256/d:64/mask:none/threads:2: × FMA floor 1.25");
  CHECK(lines[1] == "fused/n_q:1/n_k:4096/d:128/mask:none/threads:1: × read floor 1.25 × FMA floor 20.00 "
                    "× slower floor 1.25");
  // A plugin path with slashes and "/n:" in it: the shape is taken from the right.
  CHECK(lines[2] == "plugin:/lib/n:2/x.so/n:256/d:64/mask:none/threads:2: × FMA floor 1.50");
  CHECK(attncheck::floor_summary({{"fused/n:256/d:64/mask:none/threads:1", 1.0}}).empty());
}

TEST_CASE("the summary after a bench gives each shape's thread scaling beside the floors' own", "[floor]") {
  const std::map<std::string, double> seconds = {
      {"fused/n:1024/d:64/mask:none/threads:1", 2.0e-3},
      {"fused/n:1024/d:64/mask:none/threads:2", 1.0e-3},
      {"fma-floor/n:1024/d:64/mask:none/threads:1", 1.6e-3},
      {"fma-floor/n:1024/d:64/mask:none/threads:2", 1.0e-3},
      {"fused/n_q:1/n_k:4096/d:128/mask:none/threads:1", 3.0e-3},
      {"fused/n_q:1/n_k:4096/d:128/mask:none/threads:2", 2.0e-3},
      {"read-floor/n_q:1/n_k:4096/d:128/mask:none/threads:1", 2.5e-3},
      {"read-floor/n_q:1/n_k:4096/d:128/mask:none/threads:2", 2.0e-3},
      {"fma-floor/n_q:1/n_k:4096/d:128/mask:none/threads:1", 0.2e-3},
      {"fma-floor/n_q:1/n_k:4096/d:128/mask:none/threads:2", 0.1e-3},
      {"plugin:/lib/n:2/x.so/n:256/d:64/mask:none/threads:1", 3.0e-3},
      {"plugin:/lib/n:2/x.so/n:256/d:64/mask:none/threads:2", 2.0e-3},  // no floors: its speed-up alone
      {"fused/n:512/d:64/mask:none/threads:2", 1.0e-3},                // no 1-thread row: no line
  };
  const std::vector<std::string> lines = attncheck::thread_scaling_summary(seconds);
  REQUIRE(lines.size() == 3);
  // 2.0 / 1.0 against the FMA floor's 1.6 / 1.0.
  CHECK(lines[0] == "fused/n:1024/d:64/mask:none/threads:2: 2.00x the 1-thread speed, fma-floor 1.60x; "
                    "over the roofline's 1.25");
  // The roofline is the slower floor at each count: the read floor's 2.5 / 2.0, not the FMA floor's 2.0.
  CHECK(lines[1] == "fused/n_q:1/n_k:4096/d:128/mask:none/threads:2: 1.50x the 1-thread speed, read-floor 1.25x, "
                    "fma-floor 2.00x; over the roofline's 1.20");
  CHECK(lines[2] == "plugin:/lib/n:2/x.so/n:256/d:64/mask:none/threads:2: 1.50x the 1-thread speed");
  CHECK(attncheck::thread_scaling_summary({{"fused/n:256/d:64/mask:none/threads:1", 1.0}}).empty());
}

TEST_CASE("with paired floors the thread scaling takes the floors timed beside each run, not the floors' rows",
          "[floor]") {
  const std::map<std::string, double> seconds = {
      {"fused/n:1024/d:64/mask:none/threads:1", 2.0e-3},
      {"fused/n:1024/d:64/mask:none/threads:2", 1.0e-3},
      {"fma-floor/n:1024/d:64/mask:none/threads:1", 1.6e-3},  // the rows' speed-up, 1.6, is not taken
      {"fma-floor/n:1024/d:64/mask:none/threads:2", 1.0e-3},
  };
  std::map<std::string, attncheck::PairedFloors> paired;
  paired["fused/n:1024/d:64/mask:none/threads:1"] = {2.0, 1.1, 1.1, 1.0e-3, 1.8e-3};
  paired["fused/n:1024/d:64/mask:none/threads:2"] = {1.25, 1.1, 1.1, 0.8e-3, 0.9e-3};
  const std::vector<std::string> lines = attncheck::thread_scaling_summary(seconds, paired);
  REQUIRE(lines.size() == 1);
  // read 1.0 / 0.8, FMA 1.8 / 0.9; the roofline the slower floor at each count, FMA's: 2.0.
  CHECK(lines[0] == "fused/n:1024/d:64/mask:none/threads:2: 2.00x the 1-thread speed, read-floor 1.25x, "
                    "fma-floor 2.00x; over the roofline's 1.00");
  // Paired on one count only: the floors' rows.
  paired.erase("fused/n:1024/d:64/mask:none/threads:1");
  CHECK(attncheck::thread_scaling_summary(seconds, paired)[0] ==
        "fused/n:1024/d:64/mask:none/threads:2: 2.00x the 1-thread speed, fma-floor 1.60x; over the roofline's 1.25");
  CHECK(attncheck::paired_floor_summary({{"fused/n:64/d:16/mask:none/threads:1", {1.5, 3.0, 1.5, 1e-3, 5e-4}}}) ==
        std::vector<std::string>{"fused/n:64/d:16/mask:none/threads:1: × read floor 1.50 × FMA floor 3.00 × slower "
                                 "floor 1.50"});
}
