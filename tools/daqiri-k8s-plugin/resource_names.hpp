// How daqiri-k8s-plugin names what it advertises to the kubelet: an extended resource per flow
// (DOMAIN/flow-NAME) and per TX queue (DOMAIN/tx-INTERFACE-QUEUE): a DNS domain, then a
// qualified name of at most 63 characters, letters, digits, '-', '_' and '.', starting and
// ending with a letter or digit; and per resource `capacity` devices (DEVICE-0 ...
// DEVICE-(capacity-1), after its CDI device), each one pod container's hold on it.
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

// The resource of a TX queue, or none when its names cannot be part of one.
inline std::optional<std::string> tx_resource_of(std::string_view domain,
                                                 std::string_view interface,
                                                 std::string_view queue) {
  std::string name = "tx-" + std::string(interface) + "-" + std::string(queue);
  if (!is_qualified_name(name)) return std::nullopt;
  return std::string(domain) + "/" + name;
}

// Device `i` of a resource whose CDI device is `device`; the CDI device a device id belongs to
// is the part before its last '-'.
inline std::string device_id(std::string_view device, uint32_t i) {
  return std::string(device) + "-" + std::to_string(i);
}

inline bool is_device_of(std::string_view id, std::string_view device, uint32_t capacity) {
  if (id.size() <= device.size() + 1 || id.substr(0, device.size()) != device ||
      id[device.size()] != '-')
    return false;
  std::string_view n = id.substr(device.size() + 1);
  if (n.size() > 9 || n.find_first_not_of("0123456789") != std::string_view::npos) return false;
  return std::stoul(std::string(n)) < capacity;
}

}  // namespace daqiri::k8s
