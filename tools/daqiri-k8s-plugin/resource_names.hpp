// How daqiri-k8s-plugin names what it advertises to the kubelet: an extended resource per flow
// (DOMAIN/flow-NAME: a DNS domain, then a qualified name of at most 63 characters, letters,
// digits, '-', '_' and '.', starting and ending with a letter or digit), and per resource
// `capacity` devices (NAME-0 ... NAME-(capacity-1)), each one pod container's hold on the flow.
// Pure functions, for the unit tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace daqiri::k8s {

inline bool is_qualified_name(std::string_view n) {
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (n.empty() || n.size() > 63 || !alnum(n.front()) || !alnum(n.back())) return false;
  for (char c : n) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// The resource of flow `flow`, or none when its name cannot be part of one (flow names may hold
// spaces and ':').
inline std::optional<std::string> resource_of(std::string_view domain, std::string_view flow) {
  std::string name = "flow-" + std::string(flow);
  if (!is_qualified_name(name)) return std::nullopt;
  return std::string(domain) + "/" + name;
}

// Device `i` of a flow's resource; the flow a device id belongs to is the part before its last
// '-'.
inline std::string device_id(std::string_view flow, uint32_t i) {
  return std::string(flow) + "-" + std::to_string(i);
}

inline bool is_device_of(std::string_view id, std::string_view flow, uint32_t capacity) {
  if (id.size() <= flow.size() + 1 || id.substr(0, flow.size()) != flow || id[flow.size()] != '-')
    return false;
  std::string_view n = id.substr(flow.size() + 1);
  if (n.size() > 9 || n.find_first_not_of("0123456789") != std::string_view::npos) return false;
  return std::stoul(std::string(n)) < capacity;
}

}  // namespace daqiri::k8s
