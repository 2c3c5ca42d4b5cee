// A flow's match as an rte_flow rule (eth / ipv4 src,dst,length / udp or tcp src,dst, port ranges
// through `last`) whose actions mark matching packets with the flow's id (MARK, where the PMD
// takes it) and send them to the flow's queue, or spread them over its queues (RSS: Toeplitz
// over the IPv4/UDP 4-tuple with core::kRssKey, so the NIC picks the queue the daemon's own
// rss_hash would). Installed only when rte_flow_validate accepts it; otherwise the flow is
// steered by the queue's poller alone.
// Unverified on hardware here: no PMD on these machines accepts rte_flow (see docs/dpdk.md).
#pragma once

#include <rte_flow.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/flow_match.hpp"
#include "daqiri/common/result.hpp"

namespace daqiri::backends::dpdk {

class HardwareRule {
 public:
  // The rule, or the PMD's reason for refusing it. One queue: the QUEUE action; several: RSS
  // over them, in their order (the NIC's indirection table repeats the list).
  static Result<std::unique_ptr<HardwareRule>> install(uint16_t port, const core::FlowMatch& match,
                                                       std::span<const uint16_t> queues,
                                                       uint32_t mark);
  ~HardwareRule();
  HardwareRule(const HardwareRule&) = delete;
  HardwareRule& operator=(const HardwareRule&) = delete;
  // The PMD took the MARK action: received frames carry the mark in hash.fdir.hi.
  [[nodiscard]] bool marked() const { return marked_; }

 private:
  HardwareRule(uint16_t port, rte_flow* flow, bool marked)
      : port_(port), flow_(flow), marked_(marked) {}
  uint16_t port_;
  rte_flow* flow_;
  bool marked_;
};

}  // namespace daqiri::backends::dpdk
