#include "config/system_facts.hpp"

#include <sched.h>

#include <fstream>
#include <string>

#include "build_info.hpp"

namespace daqiri::config {
namespace {

uint64_t read_number(const std::string& path) {
  std::ifstream in(path);
  uint64_t v = 0;
  in >> v;
  return in ? v : 0;
}

}  // namespace

SystemFacts SystemFacts::probe() {
  SystemFacts f;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) f.usable_cpus.insert(c);
    }
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  while (meminfo >> key >> value) {
    if (key == "Hugepagesize:") f.hugepage_size = value * 1024;
    meminfo.ignore(256, '\n');
  }
  std::string dir =
      "/sys/kernel/mm/hugepages/hugepages-" + std::to_string(f.hugepage_size / 1024) + "kB/";
  f.hugepages_free = read_number(dir + "free_hugepages");
  f.hugepages_total = read_number(dir + "nr_hugepages");
  f.have_dpdk = build::kHaveDpdk;
  f.have_rdma = build::kHaveRdma;
  f.have_cuda = build::kHaveCuda;
  return f;
}

}  // namespace daqiri::config
