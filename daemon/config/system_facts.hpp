// What the machine offers, as the config cross-checks need it. probe() reads the real
// machine; tests build their own.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace daqiri::config {

struct SystemFacts {
  std::set<int> usable_cpus;          // from sched_getaffinity
  uint64_t hugepage_size = 2u << 20;  // default size in bytes
  uint64_t hugepages_free = 0;        // free pages of that size
  uint64_t hugepages_total = 0;
  // Processes that map daqirid memory in hugepages ("pid 1234 (tap, uid 1000): 64 MiB"): a
  // daemon's clients keep theirs mapped after it is gone, until they exit. Asked only for a
  // hugepage shortfall's message (it reads every process's smaps); unset: none known.
  std::function<std::vector<std::string>()> hugepage_holders;
  // Backends and region kinds this build can serve.
  bool have_dpdk = false;
  bool have_rdma = false;
  bool have_cuda = false;
  bool have_xdp = false;

  static SystemFacts probe();
};

}  // namespace daqiri::config
