// A NIC port's own counters and its queues' (DPDK interfaces), as the backend reports them and
// the control API and metrics read them. Plain data, no DPDK headers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace daqiri::dataplane {

struct NicQueueStats {
  std::string name;
  bool rx = true;
  uint64_t packets = 0, bytes = 0;
  uint64_t unmatched = 0, copied = 0, no_buffer = 0, truncated = 0;  // RX
  uint64_t no_header = 0, oversize = 0;                              // TX
  uint32_t on_loan = 0;                                              // RX
  uint32_t mbufs_free = 0;                                           // RX
};

struct NicStats {
  std::string interface;
  std::string driver;
  std::string link;  // "up", "down"
  uint64_t rx_packets = 0, rx_bytes = 0, rx_missed = 0, rx_errors = 0, rx_nombuf = 0;
  uint64_t tx_packets = 0, tx_bytes = 0, tx_errors = 0;
  std::vector<std::pair<std::string, uint64_t>> xstats;
  std::vector<NicQueueStats> queues;
};

}  // namespace daqiri::dataplane
