// A client's send times (CLOCK_REALTIME nanoseconds, DAQIRI_TX_AT) in a NIC's clock, for its send
// scheduling (RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP): the two clocks are read together now and
// then (the TX poller does, every kResync), and a time is the NIC's reading then plus the host
// time since, in the NIC's ticks. Free of DPDK headers so the unit tests can check it.
#pragma once

#include <cstdint>

namespace daqiri::backends::dpdk {

class SendClock {
 public:
  static constexpr uint64_t kResync = 100'000'000;  // ns: drift between readings stays small

  explicit SendClock(uint64_t ticks_per_second = 1'000'000'000) : tps_(ticks_per_second) {}
  // One reading of both clocks, taken together.
  void sync(uint64_t host_ns, uint64_t nic_ticks) {
    host_ns_ = host_ns;
    nic_ticks_ = nic_ticks;
    synced_ = true;
  }
  [[nodiscard]] bool stale(uint64_t host_ns) const {
    return !synced_ || host_ns - host_ns_ >= kResync;
  }
  // The NIC tick at which host time `at_ns` comes; a time before the last reading, that
  // reading's (the NIC sends it at once).
  [[nodiscard]] uint64_t nic_ticks(uint64_t at_ns) const {
    if (at_ns <= host_ns_) return nic_ticks_;
    auto ahead = static_cast<unsigned __int128>(at_ns - host_ns_) * tps_ / 1'000'000'000u;
    return nic_ticks_ + static_cast<uint64_t>(ahead);
  }

 private:
  uint64_t tps_;
  uint64_t host_ns_ = 0;
  uint64_t nic_ticks_ = 0;
  bool synced_ = false;
};

// Ticks a second from two readings of the NIC's clock `host_ns` apart; a clock within 0.1 % of
// a nanosecond a tick (a real-time one) counts nanoseconds.
inline uint64_t ticks_per_second(uint64_t nic_ticks, uint64_t host_ns) {
  if (host_ns == 0) return 1'000'000'000;
  auto tps =
      static_cast<uint64_t>(static_cast<unsigned __int128>(nic_ticks) * 1'000'000'000u / host_ns);
  return tps > 999'000'000 && tps < 1'001'000'000 ? 1'000'000'000 : tps;
}

}  // namespace daqiri::backends::dpdk
