#include "config/schema_common.hpp"

#include "config/user_ids.hpp"

namespace daqiri::config {
namespace {

template <typename T>
std::optional<T> read_match_dim(YamlMap& map, std::string_view key,
                                Result<T> (*parse)(std::string_view)) {
  auto n = map.get(key);
  if (!n) return std::nullopt;
  auto text = n->to_string();
  if (!text) return std::nullopt;
  auto value = parse(*text);
  if (!value) {
    n->error(value.error().message);
    return std::nullopt;
  }
  return *value;
}

}  // namespace

core::FlowMatch read_flow_match(const YamlNode& node,
                                const std::function<void(YamlMap&, core::FlowMatch&)>& extra,
                                bool may_be_empty) {
  core::FlowMatch m;
  YamlMap map(node);
  m.udp_src = read_match_dim<core::PortRange>(map, "udp_src", core::parse_port_range);
  m.udp_dst = read_match_dim<core::PortRange>(map, "udp_dst", core::parse_port_range);
  m.ipv4_src = read_match_dim<core::Ipv4Prefix>(map, "ipv4_src", core::parse_ipv4_prefix);
  m.ipv4_dst = read_match_dim<core::Ipv4Prefix>(map, "ipv4_dst", core::parse_ipv4_prefix);
  m.tcp_dst = read_match_dim<core::PortRange>(map, "tcp_dst", core::parse_port_range);
  Located any_where;
  map.read_bool("any", m.any, any_where);
  if (extra) extra(map, m);
  map.finish();
  if (!may_be_empty && map.valid() && m.empty() && !node.diags().has_errors()) {
    node.error(
        "a match needs at least one of udp_src, udp_dst, ipv4_src, ipv4_dst, tcp_dst, or any: "
        "true");
  }
  return m;
}

std::optional<uid_t> read_user(const YamlNode& node) {
  auto s = node.to_string();
  if (!s) return std::nullopt;
  auto uid = user_id(*s);
  if (!uid) node.error("no user named \"" + *s + "\" on this machine");
  return uid;
}

std::optional<gid_t> read_group(const YamlNode& node) {
  auto s = node.to_string();
  if (!s) return std::nullopt;
  auto gid = group_id(*s);
  if (!gid) node.error("no group named \"" + *s + "\" on this machine");
  return gid;
}

}  // namespace daqiri::config
