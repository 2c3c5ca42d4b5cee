// A flow's rte_flow rule on a port (hardware_rule_spec.hpp says what it asks of the NIC): its
// frames marked with the flow's id (MARK, where the PMD takes it) and sent to the flow's queue,
// or spread over its queues, a tag or tunnel stripped first where the flow names one. Installed
// only when rte_flow_validate accepts it; otherwise the flow is steered by the queue's poller
// alone. Unverified on hardware here: no PMD on these machines accepts rte_flow (docs/dpdk.md).
#pragma once

#include <rte_flow.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/encap.hpp"
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
  // A TX flow's egress rule (build_egress_rule): the NIC puts its headers around the frames it
  // matches. The PMD's reason when it refuses.
  static Result<std::unique_ptr<HardwareRule>> install_egress(uint16_t port,
                                                              const core::TxFlow& flow);
  ~HardwareRule();
  HardwareRule(const HardwareRule&) = delete;
  HardwareRule& operator=(const HardwareRule&) = delete;
  // The PMD took the MARK action: received frames carry the mark in hash.fdir.hi.
  [[nodiscard]] bool marked() const { return marked_; }
  // The NIC strips the flow's tag or tunnel: its marked frames land as the flow delivers them.
  [[nodiscard]] bool decapsulates() const { return decapsulates_; }

 private:
  HardwareRule(uint16_t port, rte_flow* flow, bool marked, bool decapsulates)
      : port_(port), flow_(flow), marked_(marked), decapsulates_(decapsulates) {}
  uint16_t port_;
  rte_flow* flow_;
  bool marked_;
  bool decapsulates_;
};

}  // namespace daqiri::backends::dpdk
