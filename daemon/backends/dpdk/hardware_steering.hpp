// A flow's rte_flow rule on a port (hardware_rule_spec.hpp says what it asks of the NIC): its
// frames marked with the flow's id (MARK, where the PMD takes it) and sent to the flow's queue,
// or spread over its queues, a tag or tunnel stripped first where the flow names one. Installed
// only when rte_flow_validate accepts it; otherwise the flow is steered by the queue's poller
// alone. Unverified on hardware here: no PMD on these machines accepts rte_flow (docs/dpdk.md).
#pragma once

#include <rte_flow.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "core/encap.hpp"
#include "core/flow_match.hpp"
#include "daqiri/common/result.hpp"

namespace daqiri::backends::dpdk {

struct HardwareRuleSpec;

class HardwareRule {
 public:
  // The rule, or the PMD's reason for refusing it. One queue: the QUEUE action; several: RSS
  // over them, in their order (the NIC's indirection table repeats the list).
  static Result<std::unique_ptr<HardwareRule>> install(uint16_t port, const core::FlowMatch& match,
                                                       std::span<const uint16_t> queues,
                                                       uint32_t mark,
                                                       rte_flow_item_flex_handle* flex = nullptr);
  // Group 0's rule that sends what no rule there takes on to `group` (build_jump_rule).
  static Result<std::unique_ptr<HardwareRule>> install_jump(uint16_t port, uint32_t group);
  // A flex match (build_hardware_rule) needs `flex`, its item's handle on the port.
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
  // A rule without MARK: as specified, or the PMD's reason.
  static Result<std::unique_ptr<HardwareRule>> install_unmarked(uint16_t port,
                                                                const HardwareRuleSpec& s);
  HardwareRule(uint16_t port, rte_flow* flow, bool marked, bool decapsulates)
      : port_(port), flow_(flow), marked_(marked), decapsulates_(decapsulates) {}
  uint16_t port_;
  rte_flow* flow_;
  bool marked_;
  bool decapsulates_;
};

// A port's flex items in its NIC's flex parser (rte_flow_flex_item_create, as
// build_flex_item describes them), each made when a flow first matches it, and group 0's jump
// to kFlexGroup where their rules go, once the first of those rules is in. Released when the
// port closes, after the rules that use them. Only mlx5 offers a flex parser; other PMDs
// refuse, and the poller matches flex items.
class FlexItems {
 public:
  explicit FlexItems(uint16_t port) : port_(port) {}
  ~FlexItems();
  FlexItems(const FlexItems&) = delete;
  FlexItems& operator=(const FlexItems&) = delete;
  // The handle of `flex`'s item, made on first use; the PMD's reason when it has none.
  Result<rte_flow_item_flex_handle*> handle(const core::FlexMatch& flex);
  // Group 0's jump to kFlexGroup, after a flex rule went in there (before it, frames would jump
  // to a group that takes none); the PMD's reason when it refuses.
  Result<> route();

 private:
  uint16_t port_;
  std::unique_ptr<HardwareRule> jump_;
  std::map<uint16_t, rte_flow_item_flex_handle*> items_;  // by the interface's item id
};

}  // namespace daqiri::backends::dpdk
