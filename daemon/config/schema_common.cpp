#include "config/schema_common.hpp"

#include <grp.h>
#include <pwd.h>

#include <vector>

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

std::optional<uint64_t> numeric(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(s);
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
  if (auto n = numeric(*s)) return static_cast<uid_t>(*n);
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwnam_r(s->c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    node.error("no user named \"" + *s + "\" on this machine");
    return std::nullopt;
  }
  return pw.pw_uid;
}

std::optional<gid_t> read_group(const YamlNode& node) {
  auto s = node.to_string();
  if (!s) return std::nullopt;
  if (auto n = numeric(*s)) return static_cast<gid_t>(*n);
  std::vector<char> buf(65536);
  group gr{};
  group* found = nullptr;
  if (getgrnam_r(s->c_str(), &gr, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    node.error("no group named \"" + *s + "\" on this machine");
    return std::nullopt;
  }
  return gr.gr_gid;
}

}  // namespace daqiri::config
