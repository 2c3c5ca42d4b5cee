// The EAL command line daqirid derives from its configuration: one main lcore, memory mode,
// a file prefix of its own (so several daemons and DPDK programs share a host), the PCI
// allow-list built from the interfaces (or --no-pci), and the virtual devices. Free of DPDK
// headers so the unit tests can check it.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace daqiri::backends::dpdk {

// "daqirid-" and a hash of the control socket path: distinct for every daemon instance on a
// host (their sockets differ), stable across restarts of one.
std::string file_prefix_for(const std::string& socket_path);

// The main lcore: dpdk.main_core, else the first control core, else the first usable CPU.
int main_lcore(const config::Config& c);

std::vector<std::string> eal_arguments(const config::Config& c, const std::string& file_prefix);

}  // namespace daqiri::backends::dpdk
