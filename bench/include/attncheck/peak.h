// A probe of the machine's peak fp32 FMA throughput: the physical limit that
// the benchmarks' %-of-peak column divides by.
#pragma once

#include <string>

namespace attncheck {

/// Peak fp32 FMA throughput in GFLOP/s (one FMA = 2 flops) with `threads`
/// threads running at once, best of several short runs (about 200 ms in all).
/// Each thread runs many independent chains of FMAs on the widest vectors the
/// CPU supports (Highway dynamic dispatch), so neither latency nor the
/// compiler's reshaping of a scalar loop hides the limit.
double measure_peak_fma_gflops(int threads = 1);

/// The Highway target the probe dispatches to on this CPU (e.g. "AVX3").
std::string peak_probe_target();

}  // namespace attncheck
