#include "config/daqiri_flows.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "config/schema_common.hpp"

namespace daqiri::config {
namespace {

// A flex item: where its 32 bits are sampled.
struct FlexItem {
  uint16_t udp_dst_port = 0;
  uint8_t offset = 0;
};
using FlexItems = std::map<uint32_t, FlexItem>;

FlexItems read_flex_items(const YamlNode& node) {
  FlexItems items;
  for (const auto& n : node.items()) {
    YamlMap m(n);
    Located where;
    where.self = n.origin();
    std::string name;
    uint32_t id = 0, port = 0, offset = 0;
    m.read_string("name", name, where, true);
    bool ok = m.read_uint("id", id, 0, 65535, where, true);
    ok = m.read_uint("udp_dst_port", port, 1, 65535, where, true) && ok;
    ok = m.read_uint("offset", offset, 0, 28, where, true) && ok;
    m.finish();
    if (!ok) continue;
    if (offset % 4 != 0) {
      n.diags().error(where.at("offset"),
                      "a flex item's offset is a multiple of 4 bytes after the UDP header");
      continue;
    }
    if (!items.emplace(id, FlexItem{static_cast<uint16_t>(port), static_cast<uint8_t>(offset)})
             .second) {
      n.diags().error(where.at("id"),
                      "flex item id " + std::to_string(id) + " is given twice on this interface");
    }
  }
  return items;
}

// "02:00:00:00:00:01": six pairs of hex digits.
std::optional<core::MacAddress> parse_mac(std::string_view text) {
  core::MacAddress mac{};
  if (text.size() != 17) return std::nullopt;
  for (size_t i = 0; i < mac.size(); ++i) {
    const char* at = text.data() + i * 3;
    if (i + 1 < mac.size() && at[2] != ':') return std::nullopt;
    unsigned value = 0;
    auto [end, ec] = std::from_chars(at, at + 2, value, 16);
    if (ec != std::errc() || end != at + 2) return std::nullopt;
    mac[i] = static_cast<uint8_t>(value);
  }
  return mac;
}

std::optional<core::MacAddress> read_mac(YamlMap& map, std::string_view key) {
  auto n = map.require(key);
  if (!n) return std::nullopt;
  auto text = n->to_string();
  if (!text) return std::nullopt;
  auto mac = parse_mac(*text);
  if (!mac) n->error("expected a MAC address like 02:00:00:00:00:01, got \"" + *text + "\"");
  return mac;
}

std::optional<uint32_t> read_ipv4(YamlMap& map, std::string_view key) {
  auto n = map.require(key);
  if (!n) return std::nullopt;
  auto text = n->to_string();
  if (!text) return std::nullopt;
  in_addr a{};
  if (inet_pton(AF_INET, text->c_str(), &a) != 1) {
    n->error("expected an IPv4 address like 192.0.2.1, got \"" + *text + "\"");
    return std::nullopt;
  }
  return ntohl(a.s_addr);
}

// A tunnel_decap action's tunnel: its fields in a `tunnel:` map, or on the action itself with
// the type as `tunnel_type` (both as DAQIRI reads them).
// `ttl` and `tos` (where given) take what an encapsulation writes.
std::optional<core::Decap> read_tunnel(YamlMap& action, uint8_t* ttl = nullptr,
                                       uint8_t* tos = nullptr) {
  std::optional<YamlNode> nested = action.get("tunnel");
  std::optional<YamlMap> own;
  if (nested) own.emplace(*nested);
  YamlMap& t = own ? *own : action;
  auto type = t.require(own ? "type" : "tunnel_type");
  core::Decap d;
  std::optional<size_t> kind;
  if (type) kind = type->to_choice({"vxlan", "gre", "nvgre"});
  if (kind) {
    d.kind = *kind == 0   ? core::Decap::Kind::kVxlan
             : *kind == 1 ? core::Decap::Kind::kGre
                          : core::Decap::Kind::kNvgre;
  }
  auto eth_src = read_mac(t, "outer_eth_src");
  auto eth_dst = read_mac(t, "outer_eth_dst");
  auto ip_src = read_ipv4(t, "outer_ipv4_src");
  auto ip_dst = read_ipv4(t, "outer_ipv4_dst");
  // What an encapsulation writes; a decap's match leaves them free, as DAQIRI's rule does.
  Located where;
  uint32_t ttl_value = 64, tos_value = 0;
  t.read_uint("outer_ipv4_ttl", ttl_value, 0, 255, where);
  t.read_uint("outer_ipv4_tos", tos_value, 0, 255, where);
  if (ttl != nullptr) *ttl = static_cast<uint8_t>(ttl_value);
  if (tos != nullptr) *tos = static_cast<uint8_t>(tos_value);
  // Each tunnel's own fields; another's is a mistake worth saying, not an error.
  auto field = [&](std::string_view key, core::Decap::Kind owner, uint32_t& out, uint32_t max) {
    auto n = t.get(key);
    if (!n) return;
    if (kind && d.kind != owner) {
      n->warning(std::string(key) + " is " + core::decap_kind_name(owner) + "'s; ignored for " +
                 core::decap_kind_name(d.kind));
      return;
    }
    if (auto v = n->to_uint(0, max)) out = static_cast<uint32_t>(*v);
  };
  uint32_t udp_src = 0, udp_dst = core::Decap::kVxlanPort, gre = d.gre_protocol, flow_id = 0;
  field("outer_udp_src", core::Decap::Kind::kVxlan, udp_src, 65535);
  field("outer_udp_dst", core::Decap::Kind::kVxlan, udp_dst, 65535);
  field("vni", core::Decap::Kind::kVxlan, d.vni, 0xffffff);
  field("gre_protocol", core::Decap::Kind::kGre, gre, 65535);
  field("tni", core::Decap::Kind::kNvgre, d.tni, 0xffffff);
  field("flow_id", core::Decap::Kind::kNvgre, flow_id, 255);
  if (own) own->finish();
  if (!kind || !eth_src || !eth_dst || !ip_src || !ip_dst) return std::nullopt;
  d.outer_eth_src = *eth_src;
  d.outer_eth_dst = *eth_dst;
  d.outer_ipv4_src = *ip_src;
  d.outer_ipv4_dst = *ip_dst;
  d.outer_udp_src = static_cast<uint16_t>(udp_src);
  d.outer_udp_dst = static_cast<uint16_t>(udp_dst);
  d.gre_protocol = static_cast<uint16_t>(gre);
  d.flow_id = static_cast<uint8_t>(flow_id);
  return d;
}

// What a flow's actions say: its queue (or the queues RSS spreads it over) and what is
// stripped first.
struct Steering {
  std::string queue;
  std::vector<std::string> rss_queues;
  std::optional<core::Decap> decap;
};

// `type: queue` with `id`, or `ids` (one, or several for RSS across queues): the ids, in order.
std::vector<uint32_t> read_queue_action(YamlMap& a, const YamlNode& node) {
  auto id = a.get("id");
  auto ids = a.get("ids");
  if (id && ids) {
    node.error("a queue action takes id or ids, not both");
    return {};
  }
  if (id) {
    auto v = id->to_uint(0, 65535);
    return v ? std::vector<uint32_t>{static_cast<uint32_t>(*v)} : std::vector<uint32_t>{};
  }
  if (!ids) {
    node.error("a queue action needs id or ids");
    return {};
  }
  std::vector<uint32_t> out;
  for (const auto& item : ids->items()) {
    auto v = item.to_uint(0, 65535);
    if (!v) return {};
    if (std::find(out.begin(), out.end(), *v) != out.end()) {
      item.error("queue id " + std::to_string(*v) + " is listed twice");
      return {};
    }
    out.push_back(static_cast<uint32_t>(*v));
  }
  if (out.empty()) ids->error("ids lists at least one queue");
  return out;
}

// One action of a flow; whether it was a queue.
bool read_action(const YamlNode& node, const InterfaceConfig& itf, Steering& s) {
  YamlMap a(node);
  auto type = a.require("type");
  std::optional<size_t> kind;
  if (type)
    kind = type->to_choice({"queue", "vlan_pop", "tunnel_decap", "vlan_push", "tunnel_encap"});
  if (kind && (*kind == 1 || *kind == 2) && s.decap) {
    node.error("a flow strips one VLAN tag or one tunnel: a second " + type->raw().Scalar() +
               " is not taken");
  }
  if (kind && *kind == 0) {
    std::vector<std::string> names;
    for (uint32_t id : read_queue_action(a, node)) {
      auto q = std::find_if(itf.rx_queues.begin(), itf.rx_queues.end(),
                            [id](const QueueConfig& c) { return c.id == id; });
      if (q == itf.rx_queues.end()) {
        node.error("no RX queue with id " + std::to_string(id) + " on interface " + itf.name);
        names.clear();
        break;
      }
      names.push_back(q->name);
    }
    if (!names.empty()) s.queue = names.front();
    if (names.size() > 1) s.rss_queues = std::move(names);
  } else if (kind && *kind == 1) {
    (void)a.get("vlan");  // vlan_push's fields, meaningless to a pop (DAQIRI reads none)
    s.decap = core::Decap{};
  } else if (kind && *kind == 2) {
    s.decap = read_tunnel(a);
  } else if (kind) {  // its fields are a TX flow's: not worth a line each
    type->error(type->raw().Scalar() +
                " transforms outgoing frames: it belongs in tx.flows, not rx.flows");
    return false;
  }
  a.finish();
  return kind == 0u;
}

// DAQIRI's match keys on top of the common ones: ipv4_len, flex_item_id + val + mask, ecpri.
void read_daqiri_match(YamlMap& m, core::FlowMatch& match, const FlexItems& flex_items) {
  if (auto n = m.get("ipv4_len")) {
    if (auto v = n->to_uint(1, 65535)) match.ipv4_length = static_cast<uint16_t>(*v);
  }
  auto item = m.get("flex_item_id");
  auto val = m.get("val");
  auto mask = m.get("mask");
  if (item) {
    core::FlexMatch flex;
    auto id = item->to_uint(0, 65535);
    if (!val || !mask) item->error("a flex-item match gives val and mask too");
    auto v = val ? val->to_uint(0, UINT32_MAX) : std::nullopt;
    auto k = mask ? mask->to_uint(0, UINT32_MAX) : std::nullopt;
    auto found = id ? flex_items.find(static_cast<uint32_t>(*id)) : flex_items.end();
    if (id && found == flex_items.end()) {
      item->error("no flex item with id " + std::to_string(*id) +
                  " under this interface's "
                  "rx.flex_items");
    }
    if (id && v && k && found != flex_items.end()) {
      flex.item_id = static_cast<uint16_t>(*id);
      flex.udp_dst_port = found->second.udp_dst_port;
      flex.offset = found->second.offset;
      flex.value = static_cast<uint32_t>(*v);
      flex.mask = static_cast<uint32_t>(*k);
      match.flex = flex;
    }
  } else if (val || mask) {
    (val ? *val : *mask).error("val and mask go with a flex_item_id");
  }
  if (auto e = m.get("ecpri")) {
    YamlMap em(*e);
    core::EcpriMatch ecpri;
    if (auto t = em.get("msg_type")) {
      if (auto v = t->to_uint(0, 255)) ecpri.msg_type = static_cast<uint8_t>(*v);
    }
    auto pc = em.get("pc_id");
    auto rtc = em.get("rtc_id");
    if (pc && rtc) rtc->error("pc_id and rtc_id name the same field: give one");
    if (auto id = pc ? pc : rtc) {
      if (auto v = id->to_uint(0, 65535)) ecpri.id = static_cast<uint16_t>(*v);
      if (!em.node().raw()["msg_type"]) {
        id->error("matching the eCPRI message id needs a msg_type, which says where it is");
      }
    }
    em.finish();
    match.ecpri = ecpri;
  }
}

enum class FlowClass { kIpv4Udp, kFlexItem, kEcpri };

FlowClass flow_class(const core::FlowMatch& m) {
  return m.ecpri ? FlowClass::kEcpri : m.flex ? FlowClass::kFlexItem : FlowClass::kIpv4Udp;
}

const char* class_name(FlowClass c) {
  switch (c) {
    case FlowClass::kIpv4Udp:
      return "IPv4/UDP";
    case FlowClass::kFlexItem:
      return "flex-item";
    case FlowClass::kEcpri:
      return "eCPRI";
  }
  return "?";
}

// DAQIRI's rules on what a match may combine.
void check_match(const YamlNode& node, const core::FlowMatch& m) {
  bool ip = m.udp_src || m.udp_dst || m.ipv4_src || m.ipv4_dst || m.ipv4_length || m.tcp_dst;
  if (m.ecpri && (ip || m.flex))
    node.error("an eCPRI match cannot be combined with UDP/IP or flex-item matching");
  if (m.flex && ip) node.error("a flex-item match cannot be combined with UDP/IP matching");
  if (m.flex && m.decap) node.error("flex-item flows cannot pop VLAN tags or decapsulate tunnels");
  if (m.ecpri && m.decap) node.error("an eCPRI flow cannot pop VLAN tags or decapsulate tunnels");
}

// A TX flow's one action: vlan_push (its fields in a `vlan:` map or on the action) or
// tunnel_encap.
std::optional<core::Encap> read_tx_action(const YamlNode& node) {
  YamlMap a(node);
  auto type = a.require("type");
  std::optional<size_t> kind;
  if (type)
    kind = type->to_choice({"vlan_push", "tunnel_encap", "queue", "vlan_pop", "tunnel_decap"});
  if (kind && *kind >= 2) {
    type->error(type->raw().Scalar() + " is an RX flow's: a TX flow pushes a tag or encapsulates");
    return std::nullopt;
  }
  core::Encap e;
  bool ok = kind.has_value();
  if (kind == 0u) {
    std::optional<YamlNode> nested = a.get("vlan");
    std::optional<YamlMap> own;
    if (nested) own.emplace(*nested);
    YamlMap& v = own ? *own : a;
    Located where;
    uint32_t id = 0, pcp = 0, dei = 0, tpid = e.tpid;
    ok = v.read_uint("vlan_id", id, 0, 4095, where, true) && ok;
    v.read_uint("pcp", pcp, 0, 7, where);
    v.read_uint("dei", dei, 0, 1, where);
    v.read_uint("ethertype", tpid, 0, 65535, where);
    if (own) own->finish();
    e.vlan_id = static_cast<uint16_t>(id);
    e.pcp = static_cast<uint8_t>(pcp);
    e.dei = static_cast<uint8_t>(dei);
    e.tpid = static_cast<uint16_t>(tpid);
  } else if (kind == 1u) {
    auto t = read_tunnel(a, &e.ttl, &e.tos);
    ok = t.has_value();
    if (t) {
      e.kind = t->kind;
      e.tunnel = *t;
    }
  }
  a.finish();
  return ok ? std::optional<core::Encap>(e) : std::nullopt;
}

}  // namespace

void read_daqiri_tx_flows(const YamlNode& node, InterfaceConfig& itf) {
  for (const auto& f : node.items()) {
    core::TxFlow flow;
    YamlMap map(f);
    Located where;
    map.read_string("name", flow.name, where, true);
    uint32_t id = 0;
    map.read_uint("id", id, 0, (1u << 24) - 1, where);  // DAQIRI's handle; nothing here
    std::optional<core::Encap> encap;
    if (auto actions = map.require("actions")) {
      auto list = actions->items();
      if (list.size() != 1 && actions->is_sequence()) {
        actions->error("a TX flow here takes one action: a vlan_push or a tunnel_encap");
      }
      if (!list.empty()) encap = read_tx_action(list.front());
    }
    if (auto m = map.get("match")) flow.match = read_flow_match(*m, {}, true);
    map.finish();
    if (!encap) continue;
    flow.encap = *encap;
    if (flow.match.empty()) flow.match.any = true;  // every frame sent
    for (const auto& other : itf.tx_flows) {
      if (other.match.overlaps(flow.match)) {
        f.error("TX flow " + flow.name + " matches frames TX flow " + other.name +
                " matches too: which headers they get would be ambiguous");
      }
    }
    itf.tx_flows.push_back(std::move(flow));
  }
}

void read_daqiri_flows(const YamlNode& node, const std::optional<YamlNode>& flex_node,
                       const InterfaceConfig& itf, Config& config) {
  FlexItems flex_items = flex_node ? read_flex_items(*flex_node) : FlexItems{};
  std::optional<std::pair<FlowClass, std::string>> first_class;
  for (const auto& f : node.items()) {
    FlowConfig flow;
    flow.where.self = f.origin();
    flow.interface = itf.name;
    YamlMap map(f);
    map.read_string("name", flow.name, flow.where, true);
    uint32_t id = 0;
    if (map.read_uint("id", id, 0, (1u << 24) - 1, flow.where)) flow.id = id;
    Steering steering;
    auto action = map.get("action");
    auto actions = map.get("actions");
    if (action && actions) {
      f.error("a flow has action or actions, not both");
    } else if (action) {
      if (!read_action(*action, itf, steering) && !f.diags().has_errors())
        action->error("a flow's action is type: queue");
    } else if (actions) {
      auto list = actions->items();
      if (list.empty() && actions->is_sequence()) actions->error("actions lists at least one");
      size_t queues = 0;
      bool last_is_queue = false;
      for (const auto& item : list) {
        last_is_queue = read_action(item, itf, steering);
        queues += last_is_queue ? 1 : 0;
      }
      if (!list.empty() && !last_is_queue) {
        list.back().error("an RX flow's actions end with type: queue");
      } else if (queues > 1) {
        actions->error("an RX flow has one queue action, its last");
      }
    } else {
      f.error("a flow needs action (or actions) with its queue");
    }
    flow.queue = steering.queue;
    flow.rss_queues = steering.rss_queues;
    if (!flow.rss_queues.empty()) {
      flow.where.record("queues", action ? action->origin() : actions->origin());
    }
    if (auto m = map.get("match")) {
      flow.match = read_flow_match(
          *m,
          [&](YamlMap& mm, core::FlowMatch& match) { read_daqiri_match(mm, match, flex_items); },
          true);
      flow.where.record("match", m->origin());
    }
    flow.match.decap = steering.decap;
    check_match(f, flow.match);
    // No match at all: DAQIRI's rule is the Ethernet item alone, every frame.
    if (flow.match.empty()) flow.match.any = true;
    map.finish();
    FlowClass c = flow_class(flow.match);
    if (!first_class) {
      first_class.emplace(c, flow.name);
    } else if (first_class->first != c) {
      f.error(std::string("flow ") + flow.name + " matches " + class_name(c) + " but flow " +
              first_class->second + " of interface " + itf.name + " matches " +
              class_name(first_class->first) + ": one class of flow per interface, as in DAQIRI");
    }
    config.flows.push_back(std::move(flow));
  }
}

}  // namespace daqiri::config
