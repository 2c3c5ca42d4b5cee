// What a dpdk interface's `address` names: a PCI device ("0000:3b:00.0" or "3b:00.0") or a
// DPDK virtual device ("net_pcap0,rx_pcap=in.pcap"), whose name is what precedes the first
// comma. Shared by the config checks and the backend so both read it the same way.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace daqiri::config {

struct DpdkAddress {
  bool pci = false;
  std::string name;  // the PCI address as given, or the vdev name ("net_pcap0")
  std::string args;  // vdev: the devargs after the name's comma; PCI: empty
};

std::optional<DpdkAddress> parse_dpdk_address(std::string_view text);

}  // namespace daqiri::config
