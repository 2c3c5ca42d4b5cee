#include "backends/dpdk/hardware_steering.hpp"

#include <rte_byteorder.h>
#include <rte_ethdev.h>

#include <array>

#include "core/rss_hash.hpp"

namespace daqiri::backends::dpdk {
namespace {

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

}  // namespace

Result<std::unique_ptr<HardwareRule>> HardwareRule::install(uint16_t port,
                                                            const core::FlowMatch& match,
                                                            std::span<const uint16_t> queues,
                                                            uint32_t mark) {
  if (queues.empty()) return fail(ErrorCode::kInvalidArgument, "a rule needs a queue");
  if (match.any)
    return fail(ErrorCode::kFailedPrecondition, "a catch-all has no rule: it takes the rest");
  // The NIC would steer these frames undecapsulated, or would need a flex parser or eCPRI
  // item this rule does not build: the poller matches them, on its own reading.
  if (match.raw_ethernet())
    return fail(ErrorCode::kFailedPrecondition, "decap, eCPRI and flex matches are the poller's");
  rte_flow_attr attr{};
  attr.ingress = 1;

  rte_flow_item_ipv4 ip_spec{}, ip_mask{};
  if (match.ipv4_src) {
    ip_spec.hdr.src_addr = rte_cpu_to_be_32(match.ipv4_src->address);
    ip_mask.hdr.src_addr = rte_cpu_to_be_32(match.ipv4_src->mask());
  }
  if (match.ipv4_dst) {
    ip_spec.hdr.dst_addr = rte_cpu_to_be_32(match.ipv4_dst->address);
    ip_mask.hdr.dst_addr = rte_cpu_to_be_32(match.ipv4_dst->mask());
  }
  if (match.ipv4_length) {
    ip_spec.hdr.total_length = rte_cpu_to_be_16(*match.ipv4_length);
    ip_mask.hdr.total_length = 0xffff;
  }
  rte_flow_item_udp udp_spec{}, udp_last{}, udp_mask{};
  PortFields us = port_fields(match.udp_src);
  PortFields ud = port_fields(match.udp_dst);
  udp_spec.hdr.src_port = us.spec;
  udp_last.hdr.src_port = us.last;
  udp_mask.hdr.src_port = us.mask;
  udp_spec.hdr.dst_port = ud.spec;
  udp_last.hdr.dst_port = ud.last;
  udp_mask.hdr.dst_port = ud.mask;
  rte_flow_item_tcp tcp_spec{}, tcp_last{}, tcp_mask{};
  PortFields td = port_fields(match.tcp_dst);
  tcp_spec.hdr.dst_port = td.spec;
  tcp_last.hdr.dst_port = td.last;
  tcp_mask.hdr.dst_port = td.mask;
  bool udp_ranges = us.last != 0 || ud.last != 0;
  bool tcp_ranges = td.last != 0;
  if (udp_ranges) {  // a range item needs last >= spec in every masked field
    if (us.last == 0) udp_last.hdr.src_port = us.spec;
    if (ud.last == 0) udp_last.hdr.dst_port = ud.spec;
  }

  std::array<rte_flow_item, 4> pattern{};
  pattern[0].type = RTE_FLOW_ITEM_TYPE_ETH;
  pattern[1].type = RTE_FLOW_ITEM_TYPE_IPV4;
  pattern[1].spec = &ip_spec;
  pattern[1].mask = &ip_mask;
  size_t n = 2;
  if (match.udp_src || match.udp_dst) {
    pattern[n].type = RTE_FLOW_ITEM_TYPE_UDP;
    pattern[n].spec = &udp_spec;
    pattern[n].last = udp_ranges ? &udp_last : nullptr;
    pattern[n].mask = &udp_mask;
    ++n;
  } else if (match.tcp_dst) {
    pattern[n].type = RTE_FLOW_ITEM_TYPE_TCP;
    pattern[n].spec = &tcp_spec;
    pattern[n].last = tcp_ranges ? &tcp_last : nullptr;
    pattern[n].mask = &tcp_mask;
    ++n;
  }
  pattern[n].type = RTE_FLOW_ITEM_TYPE_END;

  rte_flow_action_queue to_queue{};
  to_queue.index = queues.front();
  // A copy: DPDK's struct takes a non-const key (rte_flow copies what it keeps).
  std::array<uint8_t, core::kRssKey.size()> key = core::kRssKey;
  rte_flow_action_rss spread{};
  spread.func = RTE_ETH_HASH_FUNCTION_TOEPLITZ;
  spread.level = 0;  // the outermost headers: decapsulating flows never get a rule
  spread.types = RTE_ETH_RSS_NONFRAG_IPV4_UDP;
  spread.key_len = static_cast<uint32_t>(key.size());
  spread.key = key.data();
  spread.queue_num = static_cast<uint32_t>(queues.size());
  spread.queue = queues.data();
  rte_flow_action_mark marking{};
  marking.id = mark;
  std::array<rte_flow_action, 3> actions{};
  actions[0].type = RTE_FLOW_ACTION_TYPE_MARK;
  actions[0].conf = &marking;
  if (queues.size() == 1) {
    actions[1].type = RTE_FLOW_ACTION_TYPE_QUEUE;
    actions[1].conf = &to_queue;
  } else {
    actions[1].type = RTE_FLOW_ACTION_TYPE_RSS;
    actions[1].conf = &spread;
  }
  actions[2].type = RTE_FLOW_ACTION_TYPE_END;

  // With the mark first; a PMD that steers but cannot mark gets the queue action alone.
  rte_flow_error error{};
  bool marked = rte_flow_validate(port, &attr, pattern.data(), actions.data(), &error) == 0;
  const rte_flow_action* chosen = marked ? actions.data() : actions.data() + 1;
  if (!marked && rte_flow_validate(port, &attr, pattern.data(), chosen, &error) != 0) {
    return fail(ErrorCode::kFailedPrecondition,
                std::string("rte_flow_validate: ") +
                    (error.message != nullptr ? error.message : "refused"));
  }
  rte_flow* flow = rte_flow_create(port, &attr, pattern.data(), chosen, &error);
  if (flow == nullptr) {
    return fail(ErrorCode::kInternal, std::string("rte_flow_create: ") +
                                          (error.message != nullptr ? error.message : "failed"));
  }
  return std::unique_ptr<HardwareRule>(new HardwareRule(port, flow, marked));
}

HardwareRule::~HardwareRule() {
  rte_flow_error error{};
  rte_flow_destroy(port_, flow_, &error);
}

}  // namespace daqiri::backends::dpdk
