// A DAQIRI interface's `socket_config` and `roce_config` (stream_type: socket): its role and its
// endpoints as URIs (udp://, tcp://, roce://, rdma:// the legacy alias of roce://) or the legacy
// local_ip/local_port/remote_ip/remote_port fields, read with DAQIRI's rules.
#pragma once

#include <optional>

#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace daqiri::config {

enum class SocketTransport { kUdp, kTcp, kRoce };

struct DaqiriSocketConfig {
  bool server = true;
  SocketTransport transport = SocketTransport::kUdp;
  std::optional<core::Endpoint> local;   // port 0: a RoCE client's port, chosen by RDMA CM
  std::optional<core::Endpoint> remote;  // TCP/UDP clients only
};

// `engine_transport`: the transport a top-level `engine` implies (ibverbs: RoCE), which legacy
// fields need because they carry no scheme. Errors go to the node's diagnostics; nullopt then.
std::optional<DaqiriSocketConfig> read_daqiri_socket_config(
    const YamlNode& node, std::optional<SocketTransport> engine_transport);

// `roce_config`: {transport_mode: RC | UC}.
std::optional<RdmaConfig::Transport> read_daqiri_roce_config(const YamlNode& node);

}  // namespace daqiri::config
