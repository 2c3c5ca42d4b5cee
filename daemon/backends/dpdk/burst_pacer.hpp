// A paced queue's bursts on a NIC that schedules sends (RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP),
// as DAQIRI paces: the first frame of each burst carries the time it may leave, and the NIC
// sends the rest right behind it; the next burst may start once this one's bytes took their
// time at the cap. The division's remainder is carried, so the long-run rate is the cap
// exactly, and an idle spell earns no credit (a late burst starts now). Host nanoseconds; the
// queue turns them into the NIC's ticks. Free of DPDK headers so the unit tests can check it.
#pragma once

#include <cstdint>

namespace daqiri::backends::dpdk {

class BurstPacer {
 public:
  explicit BurstPacer(uint64_t mbps = 0) : mbps_(mbps) {}
  [[nodiscard]] bool pacing() const { return mbps_ != 0; }
  // When a burst of `bytes` (frames, Ethernet header to payload end) submitted at `now_ns`
  // may leave.
  uint64_t start(uint64_t now_ns, uint64_t bytes) {
    if (next_ns_ < now_ns) {
      next_ns_ = now_ns;
      remainder_ = 0;
    }
    uint64_t at = next_ns_;
    // ns = bytes * 8 bits / (mbps * 1e6 bits/s) * 1e9 ns/s = 8000 * bytes / mbps.
    uint64_t numer = 8000 * bytes + remainder_;
    next_ns_ += numer / mbps_;
    remainder_ = numer % mbps_;
    return at;
  }

 private:
  uint64_t mbps_;
  uint64_t next_ns_ = 0;
  uint64_t remainder_ = 0;
};

}  // namespace daqiri::backends::dpdk
