// A DAQIRI interface's `rx.flex_items`, `rx.flows` and `tx.flows`, read with DAQIRI's rules: an
// RX flow steers to a queue (`action`, or an `actions` list ending in one) after at most one VLAN
// pop or tunnel decap, and matches IPv4/UDP fields, a flex item's 32 bits, or an eCPRI header;
// one of those three classes per interface. A TX flow pushes a tag or encapsulates.
#pragma once

#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace daqiri::config {

// The flows under `flows` of interface `itf` (its RX queues read), appended to config.flows;
// `flex_items` is the interface's `rx.flex_items`, if any.
void read_daqiri_flows(const YamlNode& flows, const std::optional<YamlNode>& flex_items,
                       const InterfaceConfig& itf, Config& config);
// `tx.flows`: each a match on the frames clients send and one vlan_push or tunnel_encap,
// into itf.tx_flows.
void read_daqiri_tx_flows(const YamlNode& flows, InterfaceConfig& itf);

}  // namespace daqiri::config
