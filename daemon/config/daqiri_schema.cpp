// NVIDIA DAQIRI's schema (`daqiri: cfg:`), mapped onto ours so DAQIRI users can bring their
// files. Where a DAQIRI key means something looser here, a warning says what it became.
#include "config/daqiri_socket_config.hpp"
#include "config/schema_common.hpp"
#include "config/schemas.hpp"

namespace daqiri::config {
namespace {

const std::vector<std::pair<std::string_view, RegionKind>> kRegionKinds = {
    {"host", RegionKind::kHost},
    {"host_pinned", RegionKind::kPinned},
    {"huge", RegionKind::kHuge},
    {"device", RegionKind::kDevice}};

MemoryRegionConfig read_region(const YamlNode& node) {
  MemoryRegionConfig r;
  r.where.self = node.origin();
  YamlMap map(node);
  map.read_string("name", r.name, r.where, true);
  map.read_choice("kind", r.kind, kRegionKinds, r.where, true);
  map.read_uint("buf_size", r.buf_size, 64, 1u << 20, r.where, true);
  map.read_uint("num_bufs", r.num_bufs, 1, 1u << 26, r.where, true);
  map.read_string_list("access", r.access, r.where);
  if (auto affinity = map.get("affinity")) {
    if (auto v = affinity->to_int(-1, 63)) {
      if (r.kind == RegionKind::kDevice || r.kind == RegionKind::kPinned) {
        r.gpu = static_cast<int>(*v);
        r.where.record("gpu", affinity->origin());
      } else {
        affinity->warning(
            "NUMA affinity of host regions is not applied by daqirid; the region "
            "is allocated on the daemon's NUMA node");
      }
    }
  }
  map.finish();
  return r;
}

QueueConfig read_queue(const YamlNode& node, uint32_t index, bool tx) {
  QueueConfig q;
  q.id = index;
  q.where.self = node.origin();
  YamlMap map(node);
  map.read_string("name", q.name, q.where, true);
  map.read_uint("id", q.id, 0, 1023, q.where);
  map.read_int("cpu_core", q.core, 0, 4095, q.where);
  map.read_uint("batch_size", q.batch_size, 1, 65536, q.where);
  map.read_string_list("memory_regions", q.regions, q.where);
  if (q.regions.empty()) {
    Origin o = q.where.self;
    o.key_path = node.path() + ".memory_regions";
    node.diags().error(o, "a queue needs at least one memory region");
  }
  // DAQIRI sizes the NIC ring itself; keep ours large enough for its batches.
  while (q.ring_size < q.batch_size)
    q.ring_size *= 2;
  map.ignore("timeout_us",
             "daqirid delivers each burst as soon as it is polled; clients choose "
             "their own wait timeout");
  map.ignore("output_port", "Holoscan operator wiring belongs to the application");
  map.ignore("split_boundary", "header-data split follows from a queue with two memory regions");
  if (tx) {
    map.ignore("offloads", "TX offloads are chosen per interface by the backend");
  }
  map.finish();
  return q;
}

void read_flows(const YamlNode& node, const InterfaceConfig& itf, Config& config) {
  for (const auto& f : node.items()) {
    FlowConfig flow;
    flow.where.self = f.origin();
    flow.interface = itf.name;
    YamlMap map(f);
    map.read_string("name", flow.name, flow.where, true);
    uint32_t id = 0;
    if (map.read_uint("id", id, 0, (1u << 24) - 1, flow.where)) flow.id = id;
    if (auto action = map.require("action")) {
      YamlMap a(*action);
      if (auto type = a.require("type")) (void)type->to_choice({"queue"});
      uint32_t queue_id = 0;
      if (a.read_uint("id", queue_id, 0, 1023, flow.where, true)) {
        for (const auto& q : itf.rx_queues) {
          if (q.id == queue_id) flow.queue = q.name;
        }
        if (flow.queue.empty()) {
          action->error("no RX queue with id " + std::to_string(queue_id) + " on interface " +
                        itf.name);
        }
      }
      a.finish();
    }
    if (auto m = map.require("match")) {
      flow.match = read_flow_match(*m, [](YamlMap& mm) {
        mm.ignore("ipv4_len",
                  "daqirid does not match on the IPv4 total length; the flow "
                  "matches packets of any length");
      });
      flow.where.record("match", m->origin());
    }
    map.finish();
    config.flows.push_back(std::move(flow));
  }
}

// What cfg's stream_type and engine say for every interface.
struct Stream {
  Backend backend = Backend::kDpdk;  // raw streams
  bool socket = false;               // stream_type: socket: each interface has a socket_config
  std::optional<SocketTransport> engine_transport;
};

// A socket stream's interface: the backend its transport runs on, and the RDMA settings.
std::optional<DaqiriSocketConfig> read_socket_stream(YamlMap& map, const Stream& stream,
                                                     InterfaceConfig& itf) {
  auto sc = map.require("socket_config");
  if (!sc) return std::nullopt;
  auto socket = read_daqiri_socket_config(*sc, stream.engine_transport);
  auto roce = map.get("roce_config");
  if (!socket) return std::nullopt;
  if (socket->transport != SocketTransport::kRoce) {
    itf.backend = Backend::kSocket;
    if (roce) roce->warning("roce_config applies to roce:// endpoints only; ignored");
    return socket;
  }
  itf.backend = Backend::kRdma;
  RdmaConfig rc;
  rc.mode = socket->server ? RdmaConfig::Mode::kServer : RdmaConfig::Mode::kClient;
  if (socket->server) rc.port = socket->local->port;
  if (!roce) {
    sc->error("a roce:// endpoint needs a roce_config with its transport_mode (RC or UC)");
    return std::nullopt;
  }
  auto transport = read_daqiri_roce_config(*roce);
  if (!transport) return std::nullopt;
  rc.transport = *transport;
  itf.rdma = rc;
  if (!socket->server) {
    sc->warning(
        "a RoCE client dials the server its application names: with daqirid, add a "
        "flow with connect: IP:PORT on interface " +
        itf.name + " at runtime (daqiri-ctl flows add)");
  }
  return socket;
}

// The flow a socket stream's interface receives on, named after the interface, into its first
// RX queue: what the DAQIRI socket engine's connection delivers.
void add_socket_flow(const DaqiriSocketConfig& socket, const YamlNode& node,
                     const InterfaceConfig& itf, Config& config) {
  if (itf.rx_queues.empty()) return;
  if (socket.transport == SocketTransport::kRoce && !socket.server) return;  // dialled at runtime
  FlowConfig flow;
  flow.where.self = node.origin();
  flow.name = itf.name;
  flow.interface = itf.name;
  flow.queue = itf.rx_queues.front().name;
  auto host = [](const core::Endpoint& e) { return core::Ipv4Prefix{e.ipv4, 32}; };
  auto port = [](const core::Endpoint& e) { return core::PortRange{e.port, e.port}; };
  switch (socket.transport) {
    case SocketTransport::kRoce:
      flow.match.any = true;  // a server takes every peer's connection
      break;
    case SocketTransport::kTcp:
      if (socket.server) {
        flow.match.tcp_dst = port(*socket.local);
        flow.match.ipv4_dst = host(*socket.local);
      } else {
        flow.connect = socket.remote;
        if (socket.local && socket.local->port != 0) {
          node.warning(
              "a TCP client flow's local port is chosen by the kernel; local_addr's "
              "port is not bound");
        }
      }
      break;
    case SocketTransport::kUdp:
      if (!socket.local || socket.local->port == 0) {
        node.error(
            "daqirid binds the port a UDP endpoint receives on: give local_addr "
            "udp://IP:PORT");
        return;
      }
      flow.match.udp_dst = port(*socket.local);
      if (socket.local->ipv4 != 0) flow.match.ipv4_dst = host(*socket.local);
      if (socket.remote) {  // a client hears only its server, as a connected socket does
        flow.match.udp_src = port(*socket.remote);
        flow.match.ipv4_src = host(*socket.remote);
      }
      break;
  }
  config.flows.push_back(std::move(flow));
}

void read_interface(const YamlNode& node, const Stream& stream, Config& config) {
  InterfaceConfig itf;
  itf.backend = stream.backend;
  itf.where.self = node.origin();
  YamlMap map(node);
  map.read_string("name", itf.name, itf.where, true);
  map.read_string("address", itf.address, itf.where, true);
  map.read_bool("flow_isolation", itf.flow_isolation, itf.where);
  std::optional<DaqiriSocketConfig> socket;
  if (stream.socket) socket = read_socket_stream(map, stream, itf);
  const Backend backend = itf.backend;
  if (backend == Backend::kRdma) {
    RdmaConfig rc = itf.rdma.value_or(RdmaConfig{});  // a roce:// socket_config's, if any
    map.read_choice("rdma_mode", rc.mode,
                    {{"server", RdmaConfig::Mode::kServer}, {"client", RdmaConfig::Mode::kClient}},
                    itf.where);
    uint32_t port = rc.port;
    if (map.read_uint("rdma_port", port, 1, 65535, itf.where))
      rc.port = static_cast<uint16_t>(port);
    map.read_choice("rdma_transport_mode", rc.transport,
                    {{"RC", RdmaConfig::Transport::kRc}, {"UC", RdmaConfig::Transport::kUc}},
                    itf.where);
    itf.rdma = rc;
  }
  std::optional<YamlNode> flows;
  if (auto rx = map.get("rx")) {
    YamlMap r(*rx);
    r.read_bool("flow_isolation", itf.flow_isolation, itf.where);
    if (auto qs = r.get("queues")) {
      uint32_t i = 0;
      for (const auto& q : qs->items())
        itf.rx_queues.push_back(read_queue(q, i++, false));
    }
    flows = r.get("flows");
    r.finish();
  }
  if (auto tx = map.get("tx")) {
    YamlMap t(*tx);
    if (auto qs = t.get("queues")) {
      uint32_t i = 0;
      for (const auto& q : qs->items())
        itf.tx_queues.push_back(read_queue(q, i++, true));
    }
    t.ignore("accurate_send", "send-time scheduling is not offered by daqirid");
    // DAQIRI sends what its in-process application wrote; a DAQIRI file names no address to
    // hold a daemon's clients to, so its DPDK TX queues stay raw, and say so.
    if (backend == Backend::kDpdk && !itf.tx_queues.empty()) {
      for (auto& q : itf.tx_queues)
        q.tx_policy = TxPolicy::kRaw;
      tx->warning(
          "DPDK TX queues of a DAQIRI file send frames as clients write them "
          "(tx_policy: raw): give them only to clients you trust with a raw socket, or "
          "write the interface in daqirid's schema with source_ipv4 to check them");
    }
    t.finish();
  }
  map.finish();
  if (flows) read_flows(*flows, itf, config);
  if (socket) {
    if (socket->transport == SocketTransport::kTcp && !itf.tx_queues.empty()) {
      node.error(
          "daqirid's socket TX queues send UDP datagrams; sending on a TCP connection "
          "is not offered: remove tx from this tcp:// interface");
    }
    add_socket_flow(*socket, node, itf, config);
  }
  config.interfaces.push_back(std::move(itf));
}

}  // namespace

void read_daqiri_schema(const YamlNode& cfg_node, Config& config) {
  config.schema = Schema::kDaqiri;
  YamlMap cfg(cfg_node);
  DaemonConfig& d = config.daemon;
  d.where.self = cfg.origin();

  uint32_t version = 1;
  cfg.read_uint("version", version, 1, 1, d.where);
  Stream stream;
  if (auto m = cfg.get("manager")) {
    auto i = m->to_choice({"dpdk", "socket", "rdma", "default"});
    if (i) stream.backend = *i == 1 ? Backend::kSocket : *i == 2 ? Backend::kRdma : Backend::kDpdk;
  }
  if (auto st = cfg.get("stream_type")) stream.socket = st->to_choice({"raw", "socket"}) == 1;
  if (auto e = cfg.get("engine")) {
    if (auto i = e->to_choice({"dpdk", "socket", "ibverbs"})) {
      // DAQIRI's own rules: which engines a stream type takes.
      if (stream.socket && *i == 0) {
        e->error("engine dpdk is not valid for stream_type socket (socket or ibverbs)");
      } else if (!stream.socket && *i == 1) {
        e->error("engine socket is not valid for stream_type raw (dpdk or ibverbs)");
      } else if (stream.socket && *i == 2) {
        stream.engine_transport = SocketTransport::kRoce;
      } else if (!stream.socket && *i == 2) {
        stream.backend = Backend::kDpdk;
        e->warning(
            "DAQIRI's ibverbs raw engine (striding RQ on mlx5) runs here as DPDK's mlx5 "
            "PMD on the same NIC: the same frames, through DPDK's receive path");
      }
    }
  }
  if (auto mc = cfg.get("master_core")) {
    if (auto v = mc->to_int(0, 4095)) {
      d.control_cores = {static_cast<int>(*v)};
      d.where.record("control_cores", mc->origin());
      config.dpdk.main_core = static_cast<int>(*v);
      config.dpdk.where.record("main_core", mc->origin());
      mc->warning(
          "mapped to daemon.control_cores and dpdk.main_core: daqirid's control threads and "
          "the EAL main lcore run there; pollers are pinned by each queue's cpu_core");
    }
  }
  bool debug = false;
  if (cfg.read_bool("debug", debug, d.where) && debug) {
    d.log_level = LogLevel::kDebug;
  }
  cfg.read_choice("log_level", d.log_level, log_level_names(), d.where);
  if (auto lb = cfg.get("loopback")) {
    if (auto v = lb->to_string(); v && !v->empty()) {
      lb->error("software loopback is not offered by daqirid; use a net_ring DPDK vdev pair");
    }
  }
  cfg.ignore("tx_meta_buffers", "daqirid sizes descriptor rings per attachment");
  cfg.ignore("rx_meta_buffers", "daqirid sizes descriptor rings per attachment");

  if (auto regions = cfg.get("memory_regions")) {
    for (const auto& r : regions->items())
      config.memory_regions.push_back(read_region(r));
  }
  if (auto interfaces = cfg.get("interfaces")) {
    for (const auto& i : interfaces->items())
      read_interface(i, stream, config);
  }
  cfg.finish();
}

}  // namespace daqiri::config
