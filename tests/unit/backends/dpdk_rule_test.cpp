// What a NIC is asked for, for each kind of flow: the rte_flow pattern and actions built from a
// flow's match (no port: the PMDs here accept no rte_flow, so this is as far as they are
// checked). Built with DPDK's flags, apart from unit_tests.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rte_ecpri.h>
#include <rte_flow.h>

#include <array>
#include <vector>

#include "backends/dpdk/hardware_rule_spec.hpp"
#include "core/decap.hpp"

namespace daqiri::backends::dpdk {
namespace {

using core::Decap;

// The types of a pattern's items or of a rule's actions, up to and with the END.
template <typename Entry, size_t N, typename Type>
std::vector<Type> types_until(const std::array<Entry, N>& list, Type end) {
  std::vector<Type> out;
  for (const Entry& e : list) {
    out.push_back(static_cast<Type>(e.type));
    if (e.type == end) break;
  }
  return out;
}

std::vector<rte_flow_item_type> items(const HardwareRuleSpec& s) {
  return types_until(s.pattern, RTE_FLOW_ITEM_TYPE_END);
}

std::vector<rte_flow_action_type> actions(const HardwareRuleSpec& s) {
  return types_until(s.actions, RTE_FLOW_ACTION_TYPE_END);
}

template <typename T>
const T& spec_of(const HardwareRuleSpec& s, size_t i) {
  return *static_cast<const T*>(s.pattern.at(i).spec);
}

core::FlowMatch udp_to(uint16_t port) {
  core::FlowMatch m;
  m.udp_dst = core::PortRange{port, port};
  return m;
}

Decap tunnel(Decap::Kind kind) {
  Decap d;
  d.kind = kind;
  d.outer_eth_src = {2, 0, 0, 0, 0, 1};
  d.outer_eth_dst = {2, 0, 0, 0, 0, 2};
  d.outer_ipv4_src = 0xc0000201;  // 192.0.2.1
  d.outer_ipv4_dst = 0xc0000202;
  return d;
}

constexpr uint16_t kQueue[] = {3};

TEST(HardwareRule, APlainFlowIsItsFieldsToItsQueueMarked) {
  core::FlowMatch m = udp_to(5000);
  m.udp_src = core::PortRange{7000, 7003};
  auto s = build_hardware_rule(m, kQueue, 42);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(items(**s), (std::vector{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_IPV4,
                                     RTE_FLOW_ITEM_TYPE_UDP, RTE_FLOW_ITEM_TYPE_END}));
  EXPECT_EQ(actions(**s), (std::vector{RTE_FLOW_ACTION_TYPE_MARK, RTE_FLOW_ACTION_TYPE_QUEUE,
                                       RTE_FLOW_ACTION_TYPE_END}));
  EXPECT_FALSE((*s)->decapsulates);
  EXPECT_EQ((*s)->marking.id, 42u);
  EXPECT_EQ((*s)->to_queue.index, 3u);
  const auto& udp = spec_of<rte_flow_item_udp>(**s, 2);
  EXPECT_EQ(rte_be_to_cpu_16(udp.hdr.dst_port), 5000);
  EXPECT_EQ(rte_be_to_cpu_16(udp.hdr.src_port), 7000);
  ASSERT_NE((*s)->pattern[2].last, nullptr);  // the source range
  EXPECT_EQ(
      rte_be_to_cpu_16(static_cast<const rte_flow_item_udp*>((*s)->pattern[2].last)->hdr.src_port),
      7003);
}

// VXLAN: the outer headers exactly, the VNI, then the inner packet's fields; the NIC strips the
// tunnel, and spreads over several queues by the inner tuple.
TEST(HardwareRule, AVxlanFlowIsDecapsulatedInTheNicAndSpreadByItsInnerTuple) {
  core::FlowMatch m = udp_to(4096);
  Decap d = tunnel(Decap::Kind::kVxlan);
  d.vni = 0x123456;
  m.decap = d;
  const uint16_t queues[] = {0, 1, 2, 3};
  auto s = build_hardware_rule(m, queues, 7);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(items(**s),
            (std::vector{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_IPV4, RTE_FLOW_ITEM_TYPE_UDP,
                         RTE_FLOW_ITEM_TYPE_VXLAN, RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_IPV4,
                         RTE_FLOW_ITEM_TYPE_UDP, RTE_FLOW_ITEM_TYPE_END}));
  EXPECT_EQ(actions(**s), (std::vector{RTE_FLOW_ACTION_TYPE_MARK, RTE_FLOW_ACTION_TYPE_VXLAN_DECAP,
                                       RTE_FLOW_ACTION_TYPE_RSS, RTE_FLOW_ACTION_TYPE_END}));
  EXPECT_TRUE((*s)->decapsulates);
  const auto& eth = spec_of<rte_flow_item_eth>(**s, 0);
  EXPECT_EQ(eth.hdr.dst_addr.addr_bytes[5], 2);
  EXPECT_EQ(eth.hdr.src_addr.addr_bytes[5], 1);
  EXPECT_EQ(rte_be_to_cpu_32(spec_of<rte_flow_item_ipv4>(**s, 1).hdr.src_addr), 0xc0000201u);
  EXPECT_EQ(rte_be_to_cpu_16(spec_of<rte_flow_item_udp>(**s, 2).hdr.dst_port), 4789);
  const auto& vxlan = spec_of<rte_flow_item_vxlan>(**s, 3);
  EXPECT_EQ(vxlan.vni[0], 0x12);
  EXPECT_EQ(vxlan.vni[2], 0x56);
  EXPECT_EQ(rte_be_to_cpu_16(spec_of<rte_flow_item_udp>(**s, 6).hdr.dst_port), 4096);
  EXPECT_EQ((*s)->spread.level, 2u);  // the inner headers
  EXPECT_EQ((*s)->spread.queue_num, 4u);
  EXPECT_EQ((*s)->spread.queue[3], 3);
}

TEST(HardwareRule, NvgreAndVlanAreStrippedByTheirOwnActions) {
  core::FlowMatch m = udp_to(4096);
  Decap d = tunnel(Decap::Kind::kNvgre);
  d.tni = 0xabcdef;
  d.flow_id = 9;
  m.decap = d;
  auto s = build_hardware_rule(m, kQueue, 1);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(items(**s),
            (std::vector{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_IPV4, RTE_FLOW_ITEM_TYPE_NVGRE,
                         RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_IPV4, RTE_FLOW_ITEM_TYPE_UDP,
                         RTE_FLOW_ITEM_TYPE_END}));
  EXPECT_EQ(actions(**s)[1], RTE_FLOW_ACTION_TYPE_NVGRE_DECAP);
  const auto& nvgre = spec_of<rte_flow_item_nvgre>(**s, 2);
  EXPECT_EQ(rte_be_to_cpu_16(nvgre.protocol), 0x6558);
  EXPECT_EQ(nvgre.tni[0], 0xab);
  EXPECT_EQ(nvgre.flow_id, 9);

  Decap vlan;
  vlan.kind = Decap::Kind::kVlan;
  m.decap = vlan;
  s = build_hardware_rule(m, kQueue, 1);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(items(**s),
            (std::vector{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_VLAN, RTE_FLOW_ITEM_TYPE_IPV4,
                         RTE_FLOW_ITEM_TYPE_UDP, RTE_FLOW_ITEM_TYPE_END}));
  EXPECT_EQ(actions(**s), (std::vector{RTE_FLOW_ACTION_TYPE_MARK, RTE_FLOW_ACTION_TYPE_OF_POP_VLAN,
                                       RTE_FLOW_ACTION_TYPE_QUEUE, RTE_FLOW_ACTION_TYPE_END}));
  EXPECT_EQ((*s)->spread.level, 0u);
}

// GRE: plain GRE headers only (the poller takes those with optional words); an Ethernet tunnel
// loses 38 bytes, an IPv4 one gets the outer MAC addresses and its type back in front.
TEST(HardwareRule, GreStripsTheOuterHeadersAndRebuildsTheFrameOfAnL3Tunnel) {
  core::FlowMatch m = udp_to(4096);
  Decap d = tunnel(Decap::Kind::kGre);
  d.gre_protocol = 0x0800;
  m.decap = d;
  auto s = build_hardware_rule(m, kQueue, 1);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(items(**s),
            (std::vector{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_IPV4, RTE_FLOW_ITEM_TYPE_GRE,
                         RTE_FLOW_ITEM_TYPE_IPV4, RTE_FLOW_ITEM_TYPE_UDP, RTE_FLOW_ITEM_TYPE_END}));
  EXPECT_EQ(actions(**s), (std::vector{RTE_FLOW_ACTION_TYPE_MARK, RTE_FLOW_ACTION_TYPE_RAW_DECAP,
                                       RTE_FLOW_ACTION_TYPE_RAW_ENCAP, RTE_FLOW_ACTION_TYPE_QUEUE,
                                       RTE_FLOW_ACTION_TYPE_END}));
  const auto& gre_mask = *static_cast<const rte_flow_item_gre*>((*s)->pattern[2].mask);
  EXPECT_EQ(rte_be_to_cpu_16(gre_mask.c_rsvd0_ver), 0xf007);
  EXPECT_EQ((*s)->raw_decap.size, 38u);
  EXPECT_EQ((*s)->decap_bytes[14 + 9], 47);  // the template's IPv4 protocol: GRE
  ASSERT_EQ((*s)->raw_encap.size, 14u);
  EXPECT_EQ((*s)->encap_bytes[5], 2);  // the outer destination MAC first
  EXPECT_EQ((*s)->encap_bytes[12], 0x08);

  d.gre_protocol = Decap::kTransparentEthernet;
  m.decap = d;
  s = build_hardware_rule(m, kQueue, 1);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(items(**s)[3], RTE_FLOW_ITEM_TYPE_ETH);
  EXPECT_EQ(actions(**s), (std::vector{RTE_FLOW_ACTION_TYPE_MARK, RTE_FLOW_ACTION_TYPE_RAW_DECAP,
                                       RTE_FLOW_ACTION_TYPE_QUEUE, RTE_FLOW_ACTION_TYPE_END}));

  d.gre_protocol = 0x86dd;  // IPv6 inside: no IPv4 fields to match there
  m.decap = d;
  EXPECT_FALSE(build_hardware_rule(m, kQueue, 1));
  m.udp_dst.reset();  // every packet inside, whatever it is
  s = build_hardware_rule(m, kQueue, 1);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(items(**s), (std::vector{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_IPV4,
                                     RTE_FLOW_ITEM_TYPE_GRE, RTE_FLOW_ITEM_TYPE_END}));
}

TEST(HardwareRule, EcpriMatchesItsTypeAndIdOnTheWire) {
  core::FlowMatch m;
  m.ecpri = core::EcpriMatch{2, 0x0102};
  auto s = build_hardware_rule(m, kQueue, 1);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(items(**s), (std::vector{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_ECPRI,
                                     RTE_FLOW_ITEM_TYPE_END}));
  EXPECT_EQ(rte_be_to_cpu_16(spec_of<rte_flow_item_eth>(**s, 0).hdr.ether_type), 0xaefe);
  const auto& e = spec_of<rte_flow_item_ecpri>(**s, 1);
  // The header's second byte on the wire is the message type.
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(&e.hdr.common.u32)[1], 2);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(&e.hdr.type0.pc_id)[0], 0x01);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(&e.hdr.type0.pc_id)[1], 0x02);
  EXPECT_FALSE((*s)->decapsulates);

  const uint16_t two[] = {0, 1};
  auto spread = build_hardware_rule(m, two, 1);
  ASSERT_FALSE(spread);
  EXPECT_EQ(spread.error().message,
            "eCPRI frames have no IPv4/UDP tuple to spread: the poller spreads them");
}

TEST(HardwareRule, CatchAllsAndFlexItemsWithoutAFlexParserAreThePollers) {
  core::FlowMatch any;
  any.any = true;
  EXPECT_EQ(build_hardware_rule(any, kQueue, 1).error().message,
            "a catch-all has no rule: it takes the rest");
  core::FlowMatch flex;
  flex.flex = core::FlexMatch{};
  EXPECT_EQ(build_hardware_rule(flex, kQueue, 1).error().message,
            "a flex item needs the NIC's flex parser: the poller matches it");
}

// DAQIRI's flex item on mlx5: the parser samples 32 bits at the item's offset into the 32-byte
// header after UDP datagrams to its port; the rule (in the flex group, which group 0 jumps to
// for what its own rules leave) matches those bits as they are in the frame, where the poller
// reads them as a little-endian word.
TEST(HardwareRule, AFlexItemIsTheParsersSampleOfTheItemsDatagrams) {
  core::FlexMatch f{7, 4791, 12, 0x11223344, 0xffff00ff};
  auto item = build_flex_item(f);
  EXPECT_EQ(item->conf.tunnel, FLEX_TUNNEL_MODE_SINGLE);
  EXPECT_EQ(item->conf.next_header.field_mode, FIELD_MODE_FIXED);
  EXPECT_EQ(item->conf.next_header.field_base, 256);
  ASSERT_EQ(item->conf.nb_samples, 1u);
  EXPECT_EQ(item->conf.sample_data->field_mode, FIELD_MODE_FIXED);
  EXPECT_EQ(item->conf.sample_data->field_size, 32u);
  EXPECT_EQ(item->conf.sample_data->field_base, 96);
  ASSERT_EQ(item->conf.nb_inputs, 1u);
  EXPECT_EQ(item->conf.input_link->item.type, RTE_FLOW_ITEM_TYPE_UDP);
  const auto* udp = static_cast<const rte_flow_item_udp*>(item->conf.input_link->item.spec);
  EXPECT_EQ(rte_be_to_cpu_16(udp->hdr.dst_port), 4791);
  EXPECT_EQ(item->conf.nb_outputs, 0u);

  core::FlowMatch m;
  m.flex = f;
  auto* handle = reinterpret_cast<rte_flow_item_flex_handle*>(&m);  // any address: opaque
  auto s = build_hardware_rule(m, kQueue, 9, handle);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ((*s)->attr.group, kFlexGroup);
  EXPECT_EQ(items(**s),
            (std::vector{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_IPV4, RTE_FLOW_ITEM_TYPE_UDP,
                         RTE_FLOW_ITEM_TYPE_FLEX, RTE_FLOW_ITEM_TYPE_END}));
  EXPECT_EQ(actions(**s), (std::vector{RTE_FLOW_ACTION_TYPE_MARK, RTE_FLOW_ACTION_TYPE_QUEUE,
                                       RTE_FLOW_ACTION_TYPE_END}));
  EXPECT_EQ(rte_be_to_cpu_16(spec_of<rte_flow_item_udp>(**s, 2).hdr.dst_port), 4791);
  const auto& flex = spec_of<rte_flow_item_flex>(**s, 3);
  const auto& mask = *static_cast<const rte_flow_item_flex*>((*s)->pattern[3].mask);
  EXPECT_EQ(flex.handle, handle);
  EXPECT_EQ(mask.handle, handle);
  ASSERT_EQ(flex.length, 4u);
  ASSERT_EQ(mask.length, 4u);
  EXPECT_EQ(std::vector<uint8_t>(flex.pattern, flex.pattern + 4),
            (std::vector<uint8_t>{0x44, 0x33, 0x22, 0x11}));
  EXPECT_EQ(std::vector<uint8_t>(mask.pattern, mask.pattern + 4),
            (std::vector<uint8_t>{0xff, 0x00, 0xff, 0xff}));

  auto jump = build_jump_rule(kFlexGroup);
  EXPECT_EQ(jump->attr.group, 0u);
  EXPECT_EQ(jump->attr.priority, 1u);  // after group 0's own rules
  EXPECT_EQ(items(*jump), (std::vector{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_END}));
  EXPECT_EQ(actions(*jump), (std::vector{RTE_FLOW_ACTION_TYPE_JUMP, RTE_FLOW_ACTION_TYPE_END}));
  EXPECT_EQ(jump->jump.group, kFlexGroup);
}

core::TxFlow tx_flow(Decap::Kind kind) {
  core::TxFlow f;
  f.name = "out";
  f.match = udp_to(6000);
  f.encap.kind = kind;
  f.encap.tunnel = tunnel(kind);
  f.encap.tunnel.outer_udp_src = 49152;
  f.encap.tunnel.vni = 100;
  f.encap.ttl = 32;
  return f;
}

// TX flows: the NIC pushes the tag, or puts the tunnel named around the frame, on the egress
// of the frames the flow matches.
TEST(HardwareRule, TxFlowsPushTagsAndEncapsulateOnEgress) {
  core::TxFlow vlan = tx_flow(Decap::Kind::kVlan);
  vlan.encap.vlan_id = 5;
  vlan.encap.pcp = 3;
  auto s = build_egress_rule(vlan);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ((*s)->attr.egress, 1u);
  EXPECT_EQ((*s)->attr.ingress, 0u);
  EXPECT_EQ(items(**s), (std::vector{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_IPV4,
                                     RTE_FLOW_ITEM_TYPE_UDP, RTE_FLOW_ITEM_TYPE_END}));
  EXPECT_EQ(actions(**s),
            (std::vector{RTE_FLOW_ACTION_TYPE_OF_PUSH_VLAN, RTE_FLOW_ACTION_TYPE_OF_SET_VLAN_VID,
                         RTE_FLOW_ACTION_TYPE_OF_SET_VLAN_PCP, RTE_FLOW_ACTION_TYPE_END}));
  EXPECT_EQ(rte_be_to_cpu_16((*s)->push_vlan.ethertype), 0x8100);
  EXPECT_EQ(rte_be_to_cpu_16((*s)->set_vid.vlan_vid), 5);
  EXPECT_EQ((*s)->set_pcp.vlan_pcp, 3);

  auto vxlan = build_egress_rule(tx_flow(Decap::Kind::kVxlan));
  ASSERT_TRUE(vxlan) << vxlan.error().message;
  EXPECT_EQ(actions(**vxlan),
            (std::vector{RTE_FLOW_ACTION_TYPE_VXLAN_ENCAP, RTE_FLOW_ACTION_TYPE_END}));
  const rte_flow_item* def = (*vxlan)->vxlan_encap.definition;
  std::vector<rte_flow_item_type> outer;
  for (; def->type != RTE_FLOW_ITEM_TYPE_END; ++def)
    outer.push_back(def->type);
  EXPECT_EQ(outer, (std::vector{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_IPV4,
                                RTE_FLOW_ITEM_TYPE_UDP, RTE_FLOW_ITEM_TYPE_VXLAN}));
  const auto& ip = *static_cast<const rte_flow_item_ipv4*>((*vxlan)->encap_items[1].spec);
  EXPECT_EQ(ip.hdr.time_to_live, 32);
  EXPECT_EQ(ip.hdr.next_proto_id, IPPROTO_UDP);
  EXPECT_EQ(rte_be_to_cpu_32(ip.hdr.dst_addr), 0xc0000202u);
  const auto& udp = *static_cast<const rte_flow_item_udp*>((*vxlan)->encap_items[2].spec);
  EXPECT_EQ(rte_be_to_cpu_16(udp.hdr.src_port), 49152);
  EXPECT_EQ(rte_be_to_cpu_16(udp.hdr.dst_port), 4789);
  EXPECT_EQ(static_cast<const rte_flow_item_vxlan*>((*vxlan)->encap_items[3].spec)->vni[2], 100);

  core::TxFlow every = vlan;  // no match: every frame the interface sends, IP or not
  every.match = {};
  auto all = build_egress_rule(every);
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(items(**all), (std::vector{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_END}));

  auto nvgre = build_egress_rule(tx_flow(Decap::Kind::kNvgre));
  ASSERT_TRUE(nvgre) << nvgre.error().message;
  EXPECT_EQ(actions(**nvgre)[0], RTE_FLOW_ACTION_TYPE_NVGRE_ENCAP);
  EXPECT_EQ((*nvgre)->nvgre_encap.definition[2].type, RTE_FLOW_ITEM_TYPE_NVGRE);
}

TEST(HardwareRule, TxFlowsTheNicCannotWriteExactlyStayThePollers) {
  core::TxFlow dei = tx_flow(Decap::Kind::kVlan);
  dei.encap.dei = 1;
  EXPECT_EQ(build_egress_rule(dei).error().message,
            "no rte_flow action sets a tag's DEI bit: the poller pushes the tag");
  core::TxFlow entropy = tx_flow(Decap::Kind::kVxlan);
  entropy.encap.tunnel.outer_udp_src = 0;
  EXPECT_EQ(build_egress_rule(entropy).error().message,
            "the VXLAN source port comes from each inner flow: the poller encapsulates");
  EXPECT_EQ(build_egress_rule(tx_flow(Decap::Kind::kGre)).error().message,
            "GRE has no encap action of its own: the poller encapsulates");
}

}  // namespace
}  // namespace daqiri::backends::dpdk
