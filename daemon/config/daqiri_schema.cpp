// NVIDIA DAQIRI's schema (`daqiri: cfg:`), mapped onto ours so DAQIRI users can bring their
// files. Where a DAQIRI key means something looser here, a warning says what it became.
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

void read_interface(const YamlNode& node, Backend backend, Config& config) {
  InterfaceConfig itf;
  itf.backend = backend;
  itf.where.self = node.origin();
  YamlMap map(node);
  map.read_string("name", itf.name, itf.where, true);
  map.read_string("address", itf.address, itf.where, true);
  map.read_bool("flow_isolation", itf.flow_isolation, itf.where);
  if (backend == Backend::kRdma) {
    RdmaConfig rc;
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
  Backend backend = Backend::kDpdk;
  if (auto m = cfg.get("manager")) {
    auto i = m->to_choice({"dpdk", "socket", "rdma", "default"});
    if (i) backend = *i == 1 ? Backend::kSocket : *i == 2 ? Backend::kRdma : Backend::kDpdk;
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
  if (auto st = cfg.get("stream_type")) (void)st->to_choice({"raw"});
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
      read_interface(i, backend, config);
  }
  cfg.finish();
}

}  // namespace daqiri::config
