// The daemon's configuration as plain data, after parsing and before validation.
// Both accepted schemas (ours and DAQIRI's) produce this; docs/configuration.md is the
// reference for every key.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostics.hpp"
#include "core/encap.hpp"
#include "core/flow_match.hpp"
#include "core/flow_table.hpp"
#include "reorder/reorder_batcher.hpp"

namespace daqiri::config {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };
enum class RegionKind { kHost, kHuge, kPinned, kDevice };
enum class Backend { kSocket, kDpdk, kRdma, kXdp };
// What a TX queue lets clients send: checked or raw frames (dataplane/tx_frame_policy.hpp), or
// messages on the TCP connections of a socket interface's flows.
enum class TxPolicy { kChecked, kRaw, kTcp };

const char* to_string(LogLevel level);
const char* to_string(RegionKind kind);
const char* to_string(Backend backend);

struct AccessList {
  std::vector<uid_t> uids;
  std::vector<gid_t> gids;
};

struct AccessPolicyConfig {
  AccessList admins;            // may mutate; uid 0 is always an admin
  AccessList clients;           // may read and attach
  bool default_clients = true;  // no clients list given: members of group "daqiri" if it exists
};

struct TcpListenerConfig {
  std::string address;  // host:port
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // set: clients must present a certificate signed by it
  bool admin = false;          // TCP callers get the admin role (needs client_ca_file)
  bool anonymous = false;      // role: anonymous: callers without a certificate, as clients
  Located where;
};

// What one user (uid) may hold at once, so that no user can take the daemon's fds and memory
// from the others.
struct ClientLimitsConfig {
  uint32_t sessions_per_user = 64;
  uint32_t attachments_per_user = 128;
  uint32_t control_connections_per_user = 64;
  // TCP (TLS) control connections one peer address may hold, and all peers together.
  uint32_t tcp_connections_per_peer = 16;
  uint32_t tcp_connections_total = 256;
  // Memory attachments make the daemon take (rings, TX pools; GPU rings on the GPU), MiB.
  uint32_t memory_mb_per_user = 1024;
  uint32_t memory_mb_total = 4096;
  uint32_t gpu_memory_mb_per_user = 4096;
  uint32_t gpu_memory_mb_total = 16384;
};

struct DaemonConfig {
  std::string socket_path = "/run/daqiri/daqiri.sock";
  std::optional<std::string> socket_group;         // unset: "daqiri" if that group exists
  std::string metrics_address = "127.0.0.1:9464";  // empty: metrics off
  LogLevel log_level = LogLevel::kInfo;
  std::vector<int> control_cores;
  AccessPolicyConfig access;
  std::optional<TcpListenerConfig> tcp;
  // Where StartCapture may write (absolute folders; files go inside, never through a link).
  std::vector<std::string> capture_dirs{"/var/lib/daqiri/captures"};
  ClientLimitsConfig limits;
  // Where the daemon keeps a CDI spec of its flows (absolute); empty: none.
  std::string cdi_spec;
  Located where;
};

struct MemoryRegionConfig {
  std::string name;
  RegionKind kind = RegionKind::kHost;
  uint32_t buf_size = 0;
  uint32_t num_bufs = 0;
  int gpu = -1;                     // pinned/device: GPU index
  std::vector<std::string> access;  // RDMA access flags: local, rdma_read, rdma_write
  bool share_pages = false;         // huge: pack the RX pools cut from it into shared hugepages
  bool gpudirect = false;  // device, RX of rdma interfaces: the NIC writes into the GPU (dma-buf)
  Located where;

  [[nodiscard]] uint64_t total_bytes() const { return uint64_t{buf_size} * num_bufs; }
};

// A TX queue's pacing_mbps at most: 1 Tb/s.
inline constexpr uint32_t kMaxPacingMbps = 1'000'000;

inline constexpr uint32_t kDefaultTxClients = 64;
inline constexpr uint32_t kMaxTxClients = 1024;

struct QueueConfig {
  std::string name;
  uint32_t id = 0;
  int core = -1;  // -1: not pinned
  uint32_t batch_size = 64;
  uint32_t ring_size = 1024;
  // Its poller never parks (nor, on RX, the GPU engine of its GPU rings while attached).
  bool busy_poll = false;
  // TX queues only; unset: kChecked.
  std::optional<TxPolicy> tx_policy;
  uint32_t pacing_mbps = 0;  // TX queues only: the long-run rate cap; 0: none
  // TX queues only: a frame may name a time it leaves no earlier than (DAQIRI_TX_AT).
  bool accurate_send = false;
  // TX queues only: who may attach (empty: every client), and how many attachments it holds
  // at once (each is a ring the poller serves in turn, and a pool).
  core::ClientList clients;
  uint32_t max_clients = kDefaultTxClients;
  // RX, DAQIRI's schema: the batch timeout of reorders whose first flow is on this queue.
  uint32_t timeout_us = 0;
  std::vector<std::string> regions;
  Located where;
};

struct RdmaConfig {
  enum class Mode { kServer, kClient };
  enum class Transport { kRc, kUc };
  Mode mode = Mode::kServer;
  uint16_t port = 4791;
  Transport transport = Transport::kRc;
};

struct InterfaceConfig {
  std::string name;
  Backend backend = Backend::kSocket;
  std::string address;  // socket: bind IP; dpdk: PCI address or vdev; rdma: IP; xdp: Linux name
  // dpdk: the IPv4 address the port sends from, which checked TX queues hold frames to.
  std::string source_ipv4;
  uint32_t mtu = 1500;
  bool promiscuous = false;
  bool flow_isolation = false;
  bool hardware_timestamps = false;  // dpdk: descriptors carry the NIC's receive timestamps
  std::optional<RdmaConfig> rdma;
  std::vector<QueueConfig> rx_queues;
  std::vector<QueueConfig> tx_queues;
  // dpdk: headers put around the frames clients send here that a flow matches (DAQIRI's
  // tx.flows), the first that matches.
  std::vector<core::TxFlow> tx_flows;
  Located where;
};

struct FlowConfig {
  std::string name;
  std::string interface;
  std::string queue;           // empty: the interface's first RX queue
  std::optional<uint32_t> id;  // unset: assigned by the daemon
  core::FlowMatch match;
  std::optional<core::Endpoint> connect;  // TCP client stream instead of a match
  core::BlockPolicy allow_block;
  std::vector<std::string> rss_queues;  // RSS: the queues it spreads over (core::FlowSpec)
  core::ClientList clients;
  Located where;

  [[nodiscard]] core::FlowSpec spec() const {
    return {name,    interface,   queue,      match,  id, core::FlowOrigin::kConfig,
            connect, allow_block, rss_queues, clients};
  }
};

// A reorder (DAQIRI's rx.reorder_configs): the payloads of its flows' packets placed by
// sequence number into batches, each delivered to the reorder's own clients as one buffer of
// `region` (docs/reorder.md). The plan's max_payload follows from the region's buf_size.
struct ReorderConfig {
  std::string name;
  std::string interface;
  std::vector<std::string> flows;
  std::string region;
  reorder::ReorderPlan plan;
  Located where;
};

// The DPDK environment (EAL) daqirid starts when an interface uses the dpdk backend.
struct DpdkConfig {
  int main_core = -1;        // EAL main lcore; -1: the first control core, else the first CPU
  bool hugepages = true;     // false: --no-huge (anonymous memory; slower, no PCI devices)
  uint32_t memory_mb = 256;  // EAL heap: mbuf headers, descriptor rings, PMD state
  std::vector<std::string> eal_args;  // appended to the EAL arguments as they are
  Located where;
};

enum class Schema { kDaqirid, kDaqiri };

struct Config {
  std::string source;  // file path or "<embedded default>"
  Schema schema = Schema::kDaqirid;
  DaemonConfig daemon;
  std::vector<MemoryRegionConfig> memory_regions;
  std::vector<InterfaceConfig> interfaces;
  std::vector<FlowConfig> flows;
  std::vector<ReorderConfig> reorders;
  DpdkConfig dpdk;
};

// A dotted IPv4 address in host order, or nullopt.
std::optional<uint32_t> parse_ipv4(const std::string& text);
// The address the interface's frames go out from, host order (dpdk: source_ipv4; 0 unset).
uint32_t sending_ipv4(const InterfaceConfig& itf);

// The region of that name (validated configs always have it), or null.
inline const MemoryRegionConfig* find_region(const Config& c, std::string_view name) {
  for (const auto& r : c.memory_regions) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

}  // namespace daqiri::config
