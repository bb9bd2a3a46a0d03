// attncheck bench: Google Benchmark families of the fused path and its peers.
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>

#include "attncheck/attention.h"
#include "attncheck/bench.h"
#include "budget.h"
#include "commands.h"
#include "parse_number.h"

namespace attncheck::cli {
namespace {

// Every option is read as text and parsed here, so that a bad value is an
// InvalidInput naming the option (exit 2), like every other bad input.
struct BenchArguments {
  std::vector<std::string> impls;
  std::string n = "64,128,256,512,1024,2048,4096";
  std::string n_q, n_k;  ///< cross shapes; with them, --n runs only when given
  std::string d = "64";
  std::string mask = "none";
  std::string batch = "1";
  std::string heads = "1";
  std::string threads = "1";
  std::string repetitions = "3";
  std::string min_time = "0.5";
  std::string tensor_offset = "0";
  std::string cpu;  ///< empty: the CPU that reads fastest
  std::string json;
  bool interleave = false;
  bool paired_floors = false;
  std::string max_bytes = kDefaultMaxBytes;
};

int64_t parse_positive(const std::string& text, const std::string& option) {
  const auto list = parse_positive_list(text, option);
  if (list.size() != 1)
    throw InvalidInput(fmt::format("option {}: '{}' must be one positive integer", option, text));
  return list.front();
}

double parse_seconds(const std::string& text, const std::string& option) {
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !(value > 0) || !std::isfinite(value))
    throw InvalidInput(fmt::format("option {}: '{}' is not a positive number of seconds", option, text));
  return value;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    words.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return words;
    start = comma + 1;
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArguments>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Benchmark the fused attention against its peers (Google Benchmark)");
  cmd->add_option("--impl", args->impls,
                  fmt::format("Implementation to run, repeatable: fused, naive-eigen, naive-openblas, "
                              "reference-double (n <= 512 only), read-floor (no attention: reads the bytes the "
                              "call must move, once, with its threads: the memory floor of the shape, measured "
                              "in the same run), fma-floor (no attention: the call's useful flops as register-only "
                              "FMAs on its threads: the compute floor, measured in the same run), or any verify "
                              "--impl name such as "
                              "plugin:PATH and exec:SPEC (their own compute time is recorded when they "
                              "report it), or fused:METHOD (fused with one decode scoring method forced "
                              "on the decode path: n_q <= {}, or <= {} against n_k >= {}; see verify "
                              "--list); default fused",
                              kDecodeMaxQueryRows, kDecodeWideMaxQueryRows, kDecodeWideMinKeys));
  CLI::Option* n_option =
      cmd->add_option("--n", args->n, "Sequence lengths n = n_q = n_k, comma-separated")
          ->capture_default_str();
  cmd->add_option("--n-q", args->n_q,
                  "Query lengths of cross/decode shapes, comma-separated (with --n-k: every n_q "
                  "against every n_k; causal is then bottom-right aligned; --n runs too only if given)");
  cmd->add_option("--n-k", args->n_k, "Key lengths of cross/decode shapes, comma-separated");
  cmd->add_option("--d", args->d, "Head dimensions d = d_k = d_v, comma-separated")
      ->capture_default_str();
  cmd->add_option("--mask", args->mask, "none or causal (or both: none,causal)")
      ->capture_default_str();
  cmd->add_option("--batch", args->batch, "Batch size")->capture_default_str();
  cmd->add_option("--heads", args->heads, "Heads")->capture_default_str();
  cmd->add_option("--threads", args->threads, "Threads per call, comma-separated")
      ->capture_default_str();
  cmd->add_option("--repetitions", args->repetitions, "Repetitions of each benchmark (medians are reported)")
      ->capture_default_str();
  cmd->add_option("--min-time", args->min_time, "Minimum seconds per repetition")
      ->capture_default_str();
  cmd->add_option("--tensor-offset", args->tensor_offset,
                  "Bytes past a 64-byte boundary at which Q, K, V and the output start: 0 as framework "
                  "allocators place tensors, 16 as a large malloc'd buffer starts (a multiple of 4 below 64)")
      ->capture_default_str();
  cmd->add_option("--cpu", args->cpu,
                  "CPU on which every 1-thread benchmark and the 1-thread probes run (default: the one that "
                  "reads fastest in a 1-thread probe of each; a virtual machine's CPUs may differ)");
  cmd->add_option("--json", args->json, "Write Google Benchmark's JSON to this file");
  cmd->add_flag("--interleave", args->interleave,
                "Run all repetitions in random interleaved order (fairer on a shared machine)");
  cmd->add_flag("--paired-floors", args->paired_floors,
                "Time the read and FMA floors call by call beside each implementation, on its shape, threads "
                "and CPU, and report its time over each floor and over the slower (the roofline) per repetition");
  cmd->add_option("--max-bytes", args->max_bytes, "Refuse sizes whose buffers would need more memory (K, M, G, T)")->capture_default_str();
  cmd->callback([args, n_option] {
    BenchOptions options;
    if (!args->impls.empty()) options.impls = args->impls;
    const bool cross = !args->n_q.empty() || !args->n_k.empty();
    if (!cross || n_option->count() > 0) options.n = parse_positive_list(args->n, "--n");
    else options.n.clear();
    if (!args->n_q.empty()) options.n_q = parse_positive_list(args->n_q, "--n-q");
    if (!args->n_k.empty()) options.n_k = parse_positive_list(args->n_k, "--n-k");
    options.d = parse_positive_list(args->d, "--d");
    options.masks = split_words(args->mask);
    options.batch = parse_positive(args->batch, "--batch");
    options.heads = parse_positive(args->heads, "--heads");
    options.threads = parse_positive_list(args->threads, "--threads");
    options.repetitions = parse_positive(args->repetitions, "--repetitions");
    options.min_time = parse_seconds(args->min_time, "--min-time");
    options.tensor_offset = parse_number<int64_t>(args->tensor_offset, "--tensor-offset");
    if (!args->cpu.empty()) {
      const auto cpu = parse_number<int64_t>(args->cpu, "--cpu");
      if (cpu < 0 || cpu > 1'000'000) throw InvalidInput(fmt::format("option --cpu: {} is not a CPU number", cpu));
      options.cpu = static_cast<int>(cpu);
    }
    options.json_path = args->json;
    options.interleave = args->interleave;
    options.paired_floors = args->paired_floors;
    const int64_t max_bytes = parse_byte_count(args->max_bytes);  // peers hold an n×n float score matrix
    for (int64_t d : options.d) {
      for (int64_t n : options.n) check_memory_budget({options.batch, options.heads, n, n, d, d}, false, 4.0, max_bytes, "bench --n " + std::to_string(n));
      for (int64_t nq : options.n_q)
        for (int64_t nk : options.n_k)
          check_memory_budget({options.batch, options.heads, nq, nk, d, d}, false, 4.0, max_bytes,
                              fmt::format("bench --n-q {} --n-k {}", nq, nk));
    }
    run_benchmarks(options);
  });
}

}  // namespace attncheck::cli
