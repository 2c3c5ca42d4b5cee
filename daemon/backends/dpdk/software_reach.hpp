// Whether a flow steered in software (no rte_flow rule) can see any frame at all: its queue's
// poller sees only what the NIC puts on that queue. Free of DPDK headers so the unit tests can
// check it.
#pragma once

#include <cstdint>

namespace daqiri::backends::dpdk {

enum class SoftwareReach {
  kReaches,        // a virtual device (it picks its queues itself), or a NIC's first queue
  kIsolated,       // rte_flow_isolate is on: frames without a rule stay with the kernel
  kNotFirstQueue,  // a NIC without RSS (daqirid configures none) puts them on queue 0 only
};

inline SoftwareReach software_reach(bool isolated, bool pci, uint16_t queue) {
  if (isolated) return SoftwareReach::kIsolated;
  if (pci && queue != 0) return SoftwareReach::kNotFirstQueue;
  return SoftwareReach::kReaches;
}

// Whether the frames on a queue whose one flow is this one are all the flow's, so that the
// poller need not read them to steer them: a catch-all takes every frame; a flow the NIC steers
// (its rte_flow rule was accepted) gets only what the rule matched where no frame reaches the
// queue but through rules (`reach` not kReaches).
inline bool takes_every_frame(bool catch_all, bool nic_steered, SoftwareReach reach) {
  return catch_all || (nic_steered && reach != SoftwareReach::kReaches);
}

}  // namespace daqiri::backends::dpdk
