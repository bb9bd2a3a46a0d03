// Which CPU a thread runs on. The CPUs of one machine need not be alike: on
// a virtual machine one may share its core, its cache or its path to memory
// with other guests. A 1-thread benchmark and the 1-thread probes it is
// judged against must therefore run on the same CPU.
#pragma once

#include <string>
#include <vector>

namespace attncheck {

/// The CPUs this process may run on (its affinity mask), in increasing
/// order; empty where the system does not say.
std::vector<int> allowed_cpus();

/// The one CPU the calling thread may run on, or -1 when it may run on
/// several (or the system does not say).
int confined_cpu();

/// "0-3,6": a list of CPUs as the kernel writes one.
std::string cpu_list(const std::vector<int>& cpus);

/// While alive, the calling thread runs on `cpu` alone; its previous CPU set
/// comes back when this is destroyed. cpu < 0 changes nothing. Threads the
/// calling thread starts meanwhile inherit the single CPU, so only code that
/// runs on this thread alone belongs in its scope. Throws std::system_error
/// if the system refuses (a CPU outside the process's mask).
class OnCpu {
 public:
  explicit OnCpu(int cpu);
  ~OnCpu();
  OnCpu(const OnCpu&) = delete;
  OnCpu& operator=(const OnCpu&) = delete;

 private:
  std::vector<unsigned char> previous_;  // the thread's cpu_set_t before, empty if unchanged
};

}  // namespace attncheck
