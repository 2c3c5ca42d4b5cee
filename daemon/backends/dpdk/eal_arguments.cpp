#include "backends/dpdk/eal_arguments.hpp"

#include <sched.h>

#include <cstdio>

#include "config/dpdk_address.hpp"

namespace daqiri::backends::dpdk {

std::string file_prefix_for(const std::string& socket_path) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char ch : socket_path)
    h = (h ^ ch) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", h);
  return std::string("daqirid-") + hex;
}

int main_lcore(const config::Config& c) {
  if (c.dpdk.main_core >= 0) return c.dpdk.main_core;
  if (!c.daemon.control_cores.empty()) return c.daemon.control_cores.front();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) return cpu;
    }
  }
  return 0;
}

std::vector<std::string> eal_arguments(const config::Config& c, const std::string& file_prefix) {
  std::string core = std::to_string(main_lcore(c));
  std::vector<std::string> args = {"daqirid", "--file-prefix=" + file_prefix, "-l", core,
                                   "--main-lcore", core, "-m", std::to_string(c.dpdk.memory_mb),
                                   // No telemetry socket, no shared config: nothing on disk.
                                   "--no-telemetry"};
  if (c.dpdk.hugepages) {
    args.emplace_back("--in-memory");  // hugepages from memfds: no files left behind
  } else {
    args.emplace_back("--no-huge");
    args.emplace_back("--no-shconf");
  }
  bool pci = false;
  std::vector<std::string> vdevs;
  for (const auto& itf : c.interfaces) {
    if (itf.backend != config::Backend::kDpdk) continue;
    auto address = config::parse_dpdk_address(itf.address);
    if (!address) continue;  // the validator has refused it
    if (address->pci) {
      args.emplace_back("-a");
      args.push_back(address->name);
      pci = true;
    } else {
      vdevs.push_back(itf.address);
    }
  }
  if (!pci) {
    args.emplace_back("--no-pci");
    // Virtual devices use virtual addresses; external memory registration relies on it.
    args.emplace_back("--iova-mode=va");
  }
  for (const auto& v : vdevs) {
    args.emplace_back("--vdev");
    args.push_back(v);
  }
  for (const auto& extra : c.dpdk.eal_args)
    args.push_back(extra);
  return args;
}

}  // namespace daqiri::backends::dpdk
