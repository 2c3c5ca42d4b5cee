// A flow's match as an rte_flow pattern and actions, before any port sees it (so the unit tests
// can read what a NIC would be asked for). The plain rule: eth / ipv4 src,dst,length / udp or
// tcp src,dst (port ranges through `last`). A VLAN tag or a VXLAN, NVGRE or GRE tunnel: the
// outer headers as the flow names them, then the inner packet's fields, and the action that
// strips them in the NIC (OF_POP_VLAN, VXLAN_DECAP, NVGRE_DECAP, or RAW_DECAP, with RAW_ENCAP of
// the outer MAC addresses and the carried type for a GRE tunnel of an L3 protocol), so frames
// land as the poller would deliver them. eCPRI: eth type 0xAEFE / ecpri (type, PC_ID or
// RTC_ID). A flex item, as DAQIRI asks mlx5's flex parser: eth / ipv4 / udp dst port / flex
// (the 32 bits the item samples, value and mask), in group kFlexGroup, which a rule of group 0
// that takes every frame no other rule there takes jumps to.
// The actions: MARK with the flow's id, then QUEUE, or RSS (Toeplitz over the IPv4/UDP 4-tuple
// with core::kRssKey, the inner tuple for tunnels) over several queues.
#pragma once

#include <rte_flow.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/encap.hpp"
#include "core/flow_match.hpp"
#include "core/rss_hash.hpp"
#include "daqiri/common/result.hpp"

namespace daqiri::backends::dpdk {

// Items and actions point into this object: it stays where it was made.
struct HardwareRuleSpec {
  HardwareRuleSpec() = default;
  HardwareRuleSpec(const HardwareRuleSpec&) = delete;
  HardwareRuleSpec& operator=(const HardwareRuleSpec&) = delete;

  rte_flow_attr attr{};
  std::array<rte_flow_item, 10> pattern{};
  // MARK first: `actions.data() + 1` is the rule without it, for a PMD that steers but cannot
  // mark (never for one that strips headers: its frames must be told apart).
  std::array<rte_flow_action, 6> actions{};
  // The NIC strips a tag or tunnel: the frames it marks arrive as the flow delivers them.
  bool decapsulates = false;

  // What the items and actions point to.
  rte_flow_item_eth outer_eth_spec{}, outer_eth_mask{};
  rte_flow_item_vlan vlan_spec{}, vlan_mask{};
  rte_flow_item_ipv4 outer_ip_spec{}, outer_ip_mask{};
  rte_flow_item_udp outer_udp_spec{}, outer_udp_mask{};
  rte_flow_item_vxlan vxlan_spec{}, vxlan_mask{};
  rte_flow_item_nvgre nvgre_spec{}, nvgre_mask{};
  rte_flow_item_gre gre_spec{}, gre_mask{};
  rte_flow_item_eth eth_spec{}, eth_mask{};
  rte_flow_item_ipv4 ip_spec{}, ip_mask{};
  rte_flow_item_udp udp_spec{}, udp_last{}, udp_mask{};
  rte_flow_item_tcp tcp_spec{}, tcp_last{}, tcp_mask{};
  rte_flow_item_ecpri ecpri_spec{}, ecpri_mask{};
  rte_flow_item_flex flex_spec{}, flex_mask{};
  std::array<uint8_t, 4> flex_value{}, flex_bits{};
  rte_flow_action_jump jump{};
  rte_flow_action_mark marking{};
  rte_flow_action_queue to_queue{};
  rte_flow_action_rss spread{};
  std::array<uint8_t, core::kRssKey.size()> key{};
  std::vector<uint16_t> queues;
  rte_flow_action_raw_decap raw_decap{};
  rte_flow_action_raw_encap raw_encap{};
  std::array<uint8_t, 64> decap_bytes{};
  std::array<uint8_t, 14> encap_bytes{};
  // Egress: what a TX flow puts in front.
  rte_flow_action_of_push_vlan push_vlan{};
  rte_flow_action_of_set_vlan_vid set_vid{};
  rte_flow_action_of_set_vlan_pcp set_pcp{};
  std::array<rte_flow_item, 5> encap_items{};
  rte_flow_action_vxlan_encap vxlan_encap{};
  rte_flow_action_nvgre_encap nvgre_encap{};
};

// The group flex item rules go in: mlx5 matches flex items outside the root table only.
inline constexpr uint32_t kFlexGroup = 1;

// A flex item as the NIC's flex parser is told it (rte_flow_flex_item_create): a 32-byte header
// after UDP datagrams to the item's port, sampled 32 bits at its offset. Fields point into it.
struct FlexItemSpec {
  FlexItemSpec() = default;
  FlexItemSpec(const FlexItemSpec&) = delete;
  FlexItemSpec& operator=(const FlexItemSpec&) = delete;
  rte_flow_item_flex_conf conf{};
  rte_flow_item_flex_field sample{};
  rte_flow_item_flex_link input{};
  rte_flow_item_udp udp_spec{}, udp_mask{};
};
// The bytes of the header the item covers (DAQIRI's), its offset within them in bits.
inline constexpr int32_t kFlexHeaderBits = 32 * 8;
std::unique_ptr<FlexItemSpec> build_flex_item(const core::FlexMatch& flex);

// The rule for `match` onto `queues` (one: QUEUE; several: RSS, in their order), marked `mark`.
// A flex match needs `flex`, the port's handle of its item (from build_flex_item's conf).
// Refused: a catch-all (it takes what no rule does), and a flex match without a handle.
Result<std::unique_ptr<HardwareRuleSpec>> build_hardware_rule(
    const core::FlowMatch& match, std::span<const uint16_t> queues, uint32_t mark,
    rte_flow_item_flex_handle* flex = nullptr);

// Group 0's rule that sends every frame no other rule there takes (priority 1, after theirs)
// on to `group`.
std::unique_ptr<HardwareRuleSpec> build_jump_rule(uint32_t group);

// The egress rule of a TX flow: eth / ipv4 / udp or tcp as its match, and the NIC pushes its tag
// (OF_PUSH_VLAN, OF_SET_VLAN_VID, OF_SET_VLAN_PCP) or puts its VXLAN or NVGRE tunnel around the
// frame (VXLAN_ENCAP, NVGRE_ENCAP with the outer headers as the flow names them). Refused, so
// that the poller encapsulates: a tag with DEI set (no action sets it), a VXLAN tunnel without a
// source port (the poller takes it from each inner flow), and GRE (no encap action of its own).
Result<std::unique_ptr<HardwareRuleSpec>> build_egress_rule(const core::TxFlow& flow);

}  // namespace daqiri::backends::dpdk
