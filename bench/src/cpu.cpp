#include "attncheck/cpu.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include <fmt/format.h>

namespace attncheck {

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

int confined_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0 || CPU_COUNT(&set) != 1) return -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) return cpu;
  return -1;
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ',';
    text += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return text;
}

OnCpu::OnCpu(int cpu) {
  if (cpu < 0) return;
  if (cpu >= CPU_SETSIZE) throw std::system_error(EINVAL, std::generic_category(), fmt::format("CPU {}", cpu));
  cpu_set_t before;
  CPU_ZERO(&before);
  int error = pthread_getaffinity_np(pthread_self(), sizeof(before), &before);
  if (error != 0) throw std::system_error(error, std::generic_category(), "pthread_getaffinity_np");
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  error = pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
  if (error != 0) throw std::system_error(error, std::generic_category(), fmt::format("running on CPU {}", cpu));
  previous_.resize(sizeof(before));
  std::memcpy(previous_.data(), &before, sizeof(before));
}

OnCpu::~OnCpu() {
  if (previous_.empty()) return;
  cpu_set_t before;
  std::memcpy(&before, previous_.data(), sizeof(before));
  pthread_setaffinity_np(pthread_self(), sizeof(before), &before);  // nothing to do if refused
}

}  // namespace attncheck
