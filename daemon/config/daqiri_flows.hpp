// A DAQIRI interface's `rx.flex_items` and `rx.flows`, read with DAQIRI's rules: a flow steers
// to a queue (`action`, or an `actions` list ending in one) after at most one VLAN pop or tunnel
// decap, and matches IPv4/UDP fields, a flex item's 32 bits, or an eCPRI header; one of those
// three classes per interface.
#pragma once

#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace daqiri::config {

// The flows under `flows` of interface `itf` (its RX queues read), appended to config.flows;
// `flex_items` is the interface's `rx.flex_items`, if any.
void read_daqiri_flows(const YamlNode& flows, const std::optional<YamlNode>& flex_items,
                       const InterfaceConfig& itf, Config& config);

}  // namespace daqiri::config
