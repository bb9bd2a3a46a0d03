// A probe of the machine's peak fp32 FMA throughput: the physical limit that
// the benchmarks' %-of-peak column divides by.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace attncheck {

/// Peak fp32 FMA throughput in GFLOP/s (one FMA = 2 flops) with `threads`
/// threads running at once, best of several short runs (about 200 ms in all).
/// Each thread runs many independent chains of FMAs on the widest vectors the
/// CPU supports (Highway dynamic dispatch), so neither latency nor the
/// compiler's reshaping of a scalar loop hides the limit. With one thread and
/// one_thread_cpu >= 0, the probe runs on that CPU (OnCpu, cpu.h).
double measure_peak_fma_gflops(int threads = 1, int one_thread_cpu = -1);

/// The Highway target the probe dispatches to on this CPU (e.g. "AVX3").
std::string peak_probe_target();

/// Runs the probe's FMA chains on the calling thread for `flops` flops,
/// rounded to whole iterations (12 chains × lanes × 2 flops each), and
/// returns the flops done.
double fma_chains(double flops);

}  // namespace attncheck

namespace attncheck {

/// Read bandwidth of main memory in GB/s (1e9 bytes per second) with
/// `threads` threads: each sums its share of a buffer far larger than the
/// last-level cache (read_bandwidth_buffer_bytes()) with wide vector loads;
/// best of 5 runs (wall time from a common start). The roof of memory-bound
/// (decode) shapes, as the FMA peak is that of prefill.
double measure_read_bandwidth_gbps(int threads = 1);
/// The same for each thread count, on one buffer (mapped once); the 1-thread
/// runs on CPU one_thread_cpu if it is >= 0 (the others wherever the system
/// puts their threads).
std::vector<double> measure_read_bandwidth_gbps(const std::vector<int>& thread_counts, int one_thread_cpu = -1);
/// The 1-thread read bandwidth on each of `cpus` in turn, on one buffer.
std::vector<double> measure_read_bandwidth_by_cpu(const std::vector<int>& cpus);

/// Bytes of the buffer the bandwidth probe streams: 256 MiB, or
/// ATTNCHECK_BANDWIDTH_MIB mebibytes (64 .. 65536) from the environment.
size_t read_bandwidth_buffer_bytes();

/// Σ x[0 .. count) with the bandwidth probe's loop (eight vector chains,
/// run-time dispatch): any pointer and count.
double sum_floats(const float* x, size_t count);

}  // namespace attncheck
