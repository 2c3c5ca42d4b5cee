// Pieces both schemas read the same way.
#pragma once

#include <sys/types.h>

#include <optional>

#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace daqiri::config {

// A flow's `match:` map: udp_src, udp_dst (port or "first-last"), ipv4_src, ipv4_dst, tcp_dst,
// any. `extra` lets a schema read keys of its own into the match. Unless `may_be_empty`, a
// match that names nothing is an error.
core::FlowMatch read_flow_match(const YamlNode& node,
                                const std::function<void(YamlMap&, core::FlowMatch&)>& extra = {},
                                bool may_be_empty = false);
// A user by name or number; reports names that do not resolve.
std::optional<uid_t> read_user(const YamlNode& node);
std::optional<gid_t> read_group(const YamlNode& node);

// Log level names, shared so both schemas spell them alike.
inline const std::vector<std::pair<std::string_view, LogLevel>>& log_level_names() {
  static const std::vector<std::pair<std::string_view, LogLevel>> names = {
      {"trace", LogLevel::kTrace},       {"debug", LogLevel::kDebug},  {"info", LogLevel::kInfo},
      {"warn", LogLevel::kWarn},         {"warning", LogLevel::kWarn}, {"error", LogLevel::kError},
      {"critical", LogLevel::kCritical}, {"off", LogLevel::kOff}};
  return names;
}

}  // namespace daqiri::config
