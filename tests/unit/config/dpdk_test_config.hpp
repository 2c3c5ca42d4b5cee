// A configuration of one DPDK interface for the unit tests of the DPDK side of configuration
// and of the DPDK backend, and the facts of a host that has what it needs.
#pragma once

#include <cstdint>
#include <string>

#include "config/system_facts.hpp"

namespace daqiri::config {

inline SystemFacts facts(uint64_t hugepages_free = 1024) {
  SystemFacts f;
  f.usable_cpus = {0, 1, 2, 3};
  f.hugepage_size = 2u << 20;
  f.hugepages_free = hugepages_free;
  f.hugepages_total = hugepages_free;
  f.have_dpdk = true;
  return f;
}

inline std::string dpdk_config(const std::string& address, uint32_t buf_size = 2048,
                               const std::string& flows = "", const std::string& dpdk = "") {
  return "memory_regions:\n  - {name: r, kind: host, buf_size: " + std::to_string(buf_size) +
         ", num_bufs: 4096}\n"
         "interfaces:\n"
         "  - name: p0\n"
         "    backend: dpdk\n"
         "    address: \"" +
         address +
         "\"\n"
         "    rx:\n"
         "      queues:\n"
         "        - {name: q0, regions: [r]}\n" +
         flows + dpdk;
}

}  // namespace daqiri::config
