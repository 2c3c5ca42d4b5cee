#include "backends/dpdk/hardware_rule_spec.hpp"

#include <netinet/in.h>
#include <rte_byteorder.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>

#include <cstring>
#include <optional>

#include "core/decap.hpp"

namespace daqiri::backends::dpdk {
namespace {

using core::Decap;

struct PortFields {
  rte_be16_t spec = 0, last = 0, mask = 0;
};

PortFields port_fields(const std::optional<core::PortRange>& r) {
  PortFields f;
  if (!r) return f;
  f.spec = rte_cpu_to_be_16(r->first);
  // A single port has no range: DPDK reads last == 0 as "spec only".
  f.last = r->last == r->first ? 0 : rte_cpu_to_be_16(r->last);
  f.mask = 0xffff;
  return f;
}

void put_mac(rte_ether_addr& to, const core::MacAddress& mac) {
  std::memcpy(to.addr_bytes, mac.data(), mac.size());
}

void put_u24(uint8_t* to, uint32_t v) {
  to[0] = static_cast<uint8_t>(v >> 16);
  to[1] = static_cast<uint8_t>(v >> 8);
  to[2] = static_cast<uint8_t>(v);
}

class Pattern {
 public:
  explicit Pattern(HardwareRuleSpec& s) : s_(s) {}
  void add(rte_flow_item_type type, const void* spec = nullptr, const void* mask = nullptr,
           const void* last = nullptr) {
    rte_flow_item& item = s_.pattern.at(n_++);
    item.type = type;
    item.spec = spec;
    item.mask = mask;
    item.last = last;
  }

 private:
  HardwareRuleSpec& s_;
  size_t n_ = 0;
};

// The tunnel's outer Ethernet and IPv4 headers, exactly as the flow names them.
void outer_headers(HardwareRuleSpec& s, const Decap& d, Pattern& p) {
  put_mac(s.outer_eth_spec.hdr.dst_addr, d.outer_eth_dst);
  put_mac(s.outer_eth_spec.hdr.src_addr, d.outer_eth_src);
  s.outer_eth_spec.hdr.ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  std::memset(&s.outer_eth_mask.hdr, 0xff, sizeof s.outer_eth_mask.hdr);
  p.add(RTE_FLOW_ITEM_TYPE_ETH, &s.outer_eth_spec, &s.outer_eth_mask);
  s.outer_ip_spec.hdr.src_addr = rte_cpu_to_be_32(d.outer_ipv4_src);
  s.outer_ip_spec.hdr.dst_addr = rte_cpu_to_be_32(d.outer_ipv4_dst);
  s.outer_ip_mask.hdr.src_addr = 0xffffffff;
  s.outer_ip_mask.hdr.dst_addr = 0xffffffff;
  p.add(RTE_FLOW_ITEM_TYPE_IPV4, &s.outer_ip_spec, &s.outer_ip_mask);
}

// A header template of the bytes RAW_DECAP takes off: outer Ethernet, IPv4 (no options) and a
// GRE header without optional words.
size_t gre_outer_template(HardwareRuleSpec& s, const Decap& d) {
  uint8_t* b = s.decap_bytes.data();
  std::memcpy(b, d.outer_eth_dst.data(), 6);
  std::memcpy(b + 6, d.outer_eth_src.data(), 6);
  b[12] = 0x08;  // IPv4
  b[13] = 0x00;
  uint8_t* ip = b + core::kEthernetHeader;
  ip[0] = 0x45;
  ip[8] = 64;
  ip[9] = IPPROTO_GRE;
  for (int i = 0; i < 4; ++i) {
    ip[12 + i] = static_cast<uint8_t>(d.outer_ipv4_src >> (24 - 8 * i));
    ip[16 + i] = static_cast<uint8_t>(d.outer_ipv4_dst >> (24 - 8 * i));
  }
  uint8_t* gre = ip + 20;
  gre[2] = static_cast<uint8_t>(d.gre_protocol >> 8);
  gre[3] = static_cast<uint8_t>(d.gre_protocol);
  return core::kEthernetHeader + 20 + 4;
}

// The tag or tunnel, in pattern and actions; whether an inner Ethernet header follows.
Result<bool> strip(HardwareRuleSpec& s, const Decap& d, bool inner_fields, Pattern& p,
                   std::array<rte_flow_action, 2>& act) {
  switch (d.kind) {
    case Decap::Kind::kVlan:
      p.add(RTE_FLOW_ITEM_TYPE_ETH);
      p.add(RTE_FLOW_ITEM_TYPE_VLAN);  // any tag, as the poller pops any
      act[0].type = RTE_FLOW_ACTION_TYPE_OF_POP_VLAN;
      return false;
    case Decap::Kind::kVxlan:
      outer_headers(s, d, p);
      s.outer_udp_spec.hdr.dst_port = rte_cpu_to_be_16(d.outer_udp_dst);
      s.outer_udp_mask.hdr.dst_port = 0xffff;
      if (d.outer_udp_src != 0) {
        s.outer_udp_spec.hdr.src_port = rte_cpu_to_be_16(d.outer_udp_src);
        s.outer_udp_mask.hdr.src_port = 0xffff;
      }
      p.add(RTE_FLOW_ITEM_TYPE_UDP, &s.outer_udp_spec, &s.outer_udp_mask);
      put_u24(s.vxlan_spec.vni, d.vni);
      put_u24(s.vxlan_mask.vni, 0xffffff);
      p.add(RTE_FLOW_ITEM_TYPE_VXLAN, &s.vxlan_spec, &s.vxlan_mask);
      act[0].type = RTE_FLOW_ACTION_TYPE_VXLAN_DECAP;
      return true;
    case Decap::Kind::kNvgre:
      outer_headers(s, d, p);
      s.nvgre_spec.c_k_s_rsvd0_ver = rte_cpu_to_be_16(0x2000);
      s.nvgre_spec.protocol = rte_cpu_to_be_16(Decap::kTransparentEthernet);
      put_u24(s.nvgre_spec.tni, d.tni);
      s.nvgre_spec.flow_id = d.flow_id;
      std::memset(&s.nvgre_mask, 0xff, sizeof s.nvgre_mask);
      p.add(RTE_FLOW_ITEM_TYPE_NVGRE, &s.nvgre_spec, &s.nvgre_mask);
      act[0].type = RTE_FLOW_ACTION_TYPE_NVGRE_DECAP;
      return true;
    case Decap::Kind::kGre: {
      const bool l2 = d.gre_protocol == Decap::kTransparentEthernet;
      if (!l2 && d.gre_protocol != RTE_ETHER_TYPE_IPV4 && inner_fields) {
        return fail(ErrorCode::kFailedPrecondition,
                    "a GRE tunnel of another protocol than IPv4 or Ethernet has no inner IPv4 "
                    "fields to match: the poller matches it");
      }
      outer_headers(s, d, p);
      // Without checksum, key or sequence words (the poller takes those): the bytes RAW_DECAP
      // strips are then always the same.
      s.gre_mask.c_rsvd0_ver = rte_cpu_to_be_16(0xf007);
      s.gre_spec.protocol = rte_cpu_to_be_16(d.gre_protocol);
      s.gre_mask.protocol = 0xffff;
      p.add(RTE_FLOW_ITEM_TYPE_GRE, &s.gre_spec, &s.gre_mask);
      s.raw_decap.data = s.decap_bytes.data();
      s.raw_decap.size = gre_outer_template(s, d);
      act[0].type = RTE_FLOW_ACTION_TYPE_RAW_DECAP;
      act[0].conf = &s.raw_decap;
      if (!l2) {
        // An L3 tunnel's packet gets the outer frame's MAC addresses and the carried type.
        std::memcpy(s.encap_bytes.data(), d.outer_eth_dst.data(), 6);
        std::memcpy(s.encap_bytes.data() + 6, d.outer_eth_src.data(), 6);
        s.encap_bytes[12] = static_cast<uint8_t>(d.gre_protocol >> 8);
        s.encap_bytes[13] = static_cast<uint8_t>(d.gre_protocol);
        s.raw_encap.data = s.encap_bytes.data();
        s.raw_encap.size = s.encap_bytes.size();
        act[1].type = RTE_FLOW_ACTION_TYPE_RAW_ENCAP;
        act[1].conf = &s.raw_encap;
      }
      return l2;
    }
  }
  return false;
}

// eCPRI over Ethernet: the type, and the PC_ID / RTC_ID (the same two bytes in every message
// type that has one), as the poller reads them.
void ecpri_items(HardwareRuleSpec& s, const core::EcpriMatch& e, Pattern& p) {
  s.eth_spec.hdr.ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ECPRI);
  s.eth_mask.hdr.ether_type = 0xffff;
  p.add(RTE_FLOW_ITEM_TYPE_ETH, &s.eth_spec, &s.eth_mask);
  if (e.msg_type) {
    s.ecpri_spec.hdr.common.type = *e.msg_type;
    s.ecpri_mask.hdr.common.type = 0xff;
    // The bit fields are the host's view of the header word: to the wire's order.
    s.ecpri_spec.hdr.common.u32 = rte_cpu_to_be_32(s.ecpri_spec.hdr.common.u32);
    s.ecpri_mask.hdr.common.u32 = rte_cpu_to_be_32(s.ecpri_mask.hdr.common.u32);
  }
  if (e.id) {
    s.ecpri_spec.hdr.type0.pc_id = rte_cpu_to_be_16(*e.id);
    s.ecpri_mask.hdr.type0.pc_id = 0xffff;
  }
  p.add(RTE_FLOW_ITEM_TYPE_ECPRI, &s.ecpri_spec, &s.ecpri_mask);
}

// The IPv4 and UDP/TCP fields of the (inner) packet.
void packet_items(HardwareRuleSpec& s, const core::FlowMatch& match, Pattern& p) {
  if (match.ipv4_src) {
    s.ip_spec.hdr.src_addr = rte_cpu_to_be_32(match.ipv4_src->address);
    s.ip_mask.hdr.src_addr = rte_cpu_to_be_32(match.ipv4_src->mask());
  }
  if (match.ipv4_dst) {
    s.ip_spec.hdr.dst_addr = rte_cpu_to_be_32(match.ipv4_dst->address);
    s.ip_mask.hdr.dst_addr = rte_cpu_to_be_32(match.ipv4_dst->mask());
  }
  if (match.ipv4_length) {
    s.ip_spec.hdr.total_length = rte_cpu_to_be_16(*match.ipv4_length);
    s.ip_mask.hdr.total_length = 0xffff;
  }
  p.add(RTE_FLOW_ITEM_TYPE_IPV4, &s.ip_spec, &s.ip_mask);
  PortFields us = port_fields(match.udp_src);
  PortFields ud = port_fields(match.udp_dst);
  if (match.udp_src || match.udp_dst) {
    s.udp_spec.hdr.src_port = us.spec;
    s.udp_last.hdr.src_port = us.last;
    s.udp_mask.hdr.src_port = us.mask;
    s.udp_spec.hdr.dst_port = ud.spec;
    s.udp_last.hdr.dst_port = ud.last;
    s.udp_mask.hdr.dst_port = ud.mask;
    bool ranges = us.last != 0 || ud.last != 0;
    if (ranges) {  // a range item needs last >= spec in every masked field
      if (us.last == 0) s.udp_last.hdr.src_port = us.spec;
      if (ud.last == 0) s.udp_last.hdr.dst_port = ud.spec;
    }
    p.add(RTE_FLOW_ITEM_TYPE_UDP, &s.udp_spec, &s.udp_mask, ranges ? &s.udp_last : nullptr);
  } else if (match.tcp_dst) {
    PortFields td = port_fields(match.tcp_dst);
    s.tcp_spec.hdr.dst_port = td.spec;
    s.tcp_last.hdr.dst_port = td.last;
    s.tcp_mask.hdr.dst_port = td.mask;
    p.add(RTE_FLOW_ITEM_TYPE_TCP, &s.tcp_spec, &s.tcp_mask, td.last != 0 ? &s.tcp_last : nullptr);
  }
}

// eth / ipv4 / udp to the item's port / the item's 32 bits, which the matcher reads in the
// host's little-endian order (FlexMatch::matches): their bytes as they are in the frame.
void flex_items(HardwareRuleSpec& s, const core::FlexMatch& f, rte_flow_item_flex_handle* handle,
                Pattern& p) {
  s.attr.group = kFlexGroup;
  p.add(RTE_FLOW_ITEM_TYPE_ETH);
  p.add(RTE_FLOW_ITEM_TYPE_IPV4);
  s.udp_spec.hdr.dst_port = rte_cpu_to_be_16(f.udp_dst_port);
  s.udp_mask.hdr.dst_port = 0xffff;
  p.add(RTE_FLOW_ITEM_TYPE_UDP, &s.udp_spec, &s.udp_mask);
  for (size_t i = 0; i < 4; ++i) {
    s.flex_value.at(i) = static_cast<uint8_t>(f.value >> (8 * i));
    s.flex_bits.at(i) = static_cast<uint8_t>(f.mask >> (8 * i));
  }
  s.flex_spec = {handle, static_cast<uint32_t>(s.flex_value.size()), s.flex_value.data()};
  s.flex_mask = {handle, static_cast<uint32_t>(s.flex_bits.size()), s.flex_bits.data()};
  p.add(RTE_FLOW_ITEM_TYPE_FLEX, &s.flex_spec, &s.flex_mask);
}

bool has_inner_fields(const core::FlowMatch& m) {
  return m.udp_src || m.udp_dst || m.ipv4_src || m.ipv4_dst || m.tcp_dst || m.ipv4_length;
}

// A tunnel's outer headers as an encap action's definition: eth / ipv4 / (udp / vxlan | nvgre).
void encap_definition(HardwareRuleSpec& s, const core::Encap& e, uint8_t protocol) {
  const Decap& t = e.tunnel;
  put_mac(s.outer_eth_spec.hdr.dst_addr, t.outer_eth_dst);
  put_mac(s.outer_eth_spec.hdr.src_addr, t.outer_eth_src);
  s.outer_eth_spec.hdr.ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  s.outer_ip_spec.hdr.version_ihl = RTE_IPV4_VHL_DEF;
  s.outer_ip_spec.hdr.type_of_service = e.tos;
  s.outer_ip_spec.hdr.time_to_live = e.ttl;
  s.outer_ip_spec.hdr.next_proto_id = protocol;
  s.outer_ip_spec.hdr.src_addr = rte_cpu_to_be_32(t.outer_ipv4_src);
  s.outer_ip_spec.hdr.dst_addr = rte_cpu_to_be_32(t.outer_ipv4_dst);
  size_t n = 0;
  auto item = [&](rte_flow_item_type type, const void* spec) {
    s.encap_items.at(n).type = type;
    s.encap_items.at(n++).spec = spec;
  };
  item(RTE_FLOW_ITEM_TYPE_ETH, &s.outer_eth_spec);
  item(RTE_FLOW_ITEM_TYPE_IPV4, &s.outer_ip_spec);
  if (protocol == IPPROTO_UDP) {
    s.outer_udp_spec.hdr.src_port = rte_cpu_to_be_16(t.outer_udp_src);
    s.outer_udp_spec.hdr.dst_port = rte_cpu_to_be_16(t.outer_udp_dst);
    item(RTE_FLOW_ITEM_TYPE_UDP, &s.outer_udp_spec);
    s.vxlan_spec.flags = 0x08;  // I: the VNI is valid
    put_u24(s.vxlan_spec.vni, t.vni);
    item(RTE_FLOW_ITEM_TYPE_VXLAN, &s.vxlan_spec);
  } else {
    s.nvgre_spec.c_k_s_rsvd0_ver = rte_cpu_to_be_16(0x2000);
    s.nvgre_spec.protocol = rte_cpu_to_be_16(Decap::kTransparentEthernet);
    put_u24(s.nvgre_spec.tni, t.tni);
    s.nvgre_spec.flow_id = t.flow_id;
    item(RTE_FLOW_ITEM_TYPE_NVGRE, &s.nvgre_spec);
  }
  item(RTE_FLOW_ITEM_TYPE_END, nullptr);
}

}  // namespace

Result<std::unique_ptr<HardwareRuleSpec>> build_egress_rule(const core::TxFlow& flow) {
  const core::Encap& e = flow.encap;
  switch (e.kind) {
    case Decap::Kind::kVlan:
      if (e.dei != 0) {
        return fail(ErrorCode::kFailedPrecondition,
                    "no rte_flow action sets a tag's DEI bit: the poller pushes the tag");
      }
      break;
    case Decap::Kind::kVxlan:
      if (e.tunnel.outer_udp_src == 0) {
        return fail(ErrorCode::kFailedPrecondition,
                    "the VXLAN source port comes from each inner flow: the poller encapsulates");
      }
      break;
    case Decap::Kind::kNvgre:
      break;
    case Decap::Kind::kGre:
      return fail(ErrorCode::kFailedPrecondition,
                  "GRE has no encap action of its own: the poller encapsulates");
  }
  auto s = std::make_unique<HardwareRuleSpec>();
  s->attr.egress = 1;
  Pattern p(*s);
  p.add(RTE_FLOW_ITEM_TYPE_ETH);
  if (!flow.match.empty()) packet_items(*s, flow.match, p);  // no match: every frame, IP or not
  p.add(RTE_FLOW_ITEM_TYPE_END);
  size_t n = 0;
  auto action = [&](rte_flow_action_type type, const void* conf) {
    s->actions.at(n).type = type;
    s->actions.at(n++).conf = conf;
  };
  switch (e.kind) {
    case Decap::Kind::kVlan:
      s->push_vlan.ethertype = rte_cpu_to_be_16(e.tpid);
      s->set_vid.vlan_vid = rte_cpu_to_be_16(e.vlan_id);
      s->set_pcp.vlan_pcp = e.pcp;
      action(RTE_FLOW_ACTION_TYPE_OF_PUSH_VLAN, &s->push_vlan);
      action(RTE_FLOW_ACTION_TYPE_OF_SET_VLAN_VID, &s->set_vid);
      action(RTE_FLOW_ACTION_TYPE_OF_SET_VLAN_PCP, &s->set_pcp);
      break;
    case Decap::Kind::kVxlan:
      encap_definition(*s, e, IPPROTO_UDP);
      s->vxlan_encap.definition = s->encap_items.data();
      action(RTE_FLOW_ACTION_TYPE_VXLAN_ENCAP, &s->vxlan_encap);
      break;
    case Decap::Kind::kNvgre:
      encap_definition(*s, e, IPPROTO_GRE);
      s->nvgre_encap.definition = s->encap_items.data();
      action(RTE_FLOW_ACTION_TYPE_NVGRE_ENCAP, &s->nvgre_encap);
      break;
    case Decap::Kind::kGre:
      break;
  }
  action(RTE_FLOW_ACTION_TYPE_END, nullptr);
  return s;
}

std::unique_ptr<FlexItemSpec> build_flex_item(const core::FlexMatch& flex) {
  auto s = std::make_unique<FlexItemSpec>();
  s->conf.tunnel = FLEX_TUNNEL_MODE_SINGLE;
  s->conf.next_header.field_mode = FIELD_MODE_FIXED;
  s->conf.next_header.field_base = kFlexHeaderBits;
  s->sample.field_mode = FIELD_MODE_FIXED;
  s->sample.field_size = 32;
  s->sample.field_base = int32_t{flex.offset} * 8;
  s->conf.sample_data = &s->sample;
  s->conf.nb_samples = 1;
  s->udp_spec.hdr.dst_port = rte_cpu_to_be_16(flex.udp_dst_port);
  s->udp_mask.hdr.dst_port = 0xffff;
  s->input.item.type = RTE_FLOW_ITEM_TYPE_UDP;
  s->input.item.spec = &s->udp_spec;
  s->input.item.mask = &s->udp_mask;
  s->conf.input_link = &s->input;
  s->conf.nb_inputs = 1;
  return s;
}

std::unique_ptr<HardwareRuleSpec> build_jump_rule(uint32_t group) {
  auto s = std::make_unique<HardwareRuleSpec>();
  s->attr.ingress = 1;
  s->attr.priority = 1;
  Pattern p(*s);
  p.add(RTE_FLOW_ITEM_TYPE_ETH);
  p.add(RTE_FLOW_ITEM_TYPE_END);
  s->jump.group = group;
  s->actions.at(0).type = RTE_FLOW_ACTION_TYPE_JUMP;
  s->actions.at(0).conf = &s->jump;
  s->actions.at(1).type = RTE_FLOW_ACTION_TYPE_END;
  return s;
}

Result<std::unique_ptr<HardwareRuleSpec>> build_hardware_rule(const core::FlowMatch& match,
                                                              std::span<const uint16_t> queues,
                                                              uint32_t mark,
                                                              rte_flow_item_flex_handle* flex) {
  if (queues.empty()) return fail(ErrorCode::kInvalidArgument, "a rule needs a queue");
  if (match.any)
    return fail(ErrorCode::kFailedPrecondition, "a catch-all has no rule: it takes the rest");
  if (match.flex && flex == nullptr) {
    return fail(ErrorCode::kFailedPrecondition,
                "a flex item needs the NIC's flex parser: the poller matches it");
  }
  if (match.ecpri && queues.size() > 1) {
    return fail(ErrorCode::kFailedPrecondition,
                "eCPRI frames have no IPv4/UDP tuple to spread: the poller spreads them");
  }
  auto s = std::make_unique<HardwareRuleSpec>();
  s->attr.ingress = 1;
  Pattern p(*s);
  std::array<rte_flow_action, 2> strip_actions{};
  strip_actions[0].type = RTE_FLOW_ACTION_TYPE_VOID;
  strip_actions[1].type = RTE_FLOW_ACTION_TYPE_VOID;
  bool tunnel = false;
  if (match.flex) {
    flex_items(*s, *match.flex, flex, p);
  } else if (match.ecpri) {
    ecpri_items(*s, *match.ecpri, p);
  } else {
    bool inner_ethernet = true;
    if (match.decap) {
      auto inner = strip(*s, *match.decap, has_inner_fields(match), p, strip_actions);
      if (!inner) return std::unexpected(inner.error());
      inner_ethernet = *inner;
      s->decapsulates = true;
      tunnel = match.decap->kind != Decap::Kind::kVlan;
    }
    if (inner_ethernet) p.add(RTE_FLOW_ITEM_TYPE_ETH);
    // A stripping flow without inner fields takes every frame inside, IP or not.
    if (has_inner_fields(match)) packet_items(*s, match, p);
  }
  p.add(RTE_FLOW_ITEM_TYPE_END);

  s->marking.id = mark;
  s->queues.assign(queues.begin(), queues.end());
  s->to_queue.index = queues.front();
  // A copy: DPDK's struct takes a non-const key (rte_flow copies what it keeps).
  s->key = core::kRssKey;
  s->spread.func = RTE_ETH_HASH_FUNCTION_TOEPLITZ;
  s->spread.level = tunnel ? 2 : 0;  // a tunnel's inner tuple, as the poller hashes it
  s->spread.types = RTE_ETH_RSS_NONFRAG_IPV4_UDP;
  s->spread.key_len = static_cast<uint32_t>(s->key.size());
  s->spread.key = s->key.data();
  s->spread.queue_num = static_cast<uint32_t>(s->queues.size());
  s->spread.queue = s->queues.data();
  size_t n = 0;
  auto action = [&](rte_flow_action_type type, const void* conf) {
    s->actions.at(n).type = type;
    s->actions.at(n++).conf = conf;
  };
  action(RTE_FLOW_ACTION_TYPE_MARK, &s->marking);
  for (const rte_flow_action& a : strip_actions) {
    if (a.type != RTE_FLOW_ACTION_TYPE_VOID) action(a.type, a.conf);
  }
  if (queues.size() == 1) {
    action(RTE_FLOW_ACTION_TYPE_QUEUE, &s->to_queue);
  } else {
    action(RTE_FLOW_ACTION_TYPE_RSS, &s->spread);
  }
  action(RTE_FLOW_ACTION_TYPE_END, nullptr);
  return s;
}

}  // namespace daqiri::backends::dpdk
