// NVIDIA DAQIRI's schema (`daqiri: cfg:`), mapped onto ours so DAQIRI users can bring their
// files. Where a DAQIRI key means something looser here, a warning says what it became.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/config_validator.hpp"
#include "config/daqiri_flows.hpp"
#include "config/daqiri_socket_config.hpp"
#include "config/dpdk_address.hpp"
#include "config/reorder_schema.hpp"
#include "config/schema_common.hpp"
#include "config/schemas.hpp"

namespace daqiri::config {
namespace {

const std::vector<std::pair<std::string_view, RegionKind>> kDaqiriRegionKinds = {
    {"host", RegionKind::kHost},
    {"host_pinned", RegionKind::kPinned},
    {"huge", RegionKind::kHuge},
    {"device", RegionKind::kDevice}};

// What cfg's stream_type and engine say for every interface.
struct Stream {
  Backend backend = Backend::kDpdk;  // raw streams
  bool socket = false;               // stream_type: socket: each interface has a socket_config
  std::optional<SocketTransport> engine_transport;
  bool raw_ibverbs = false;  // engine: ibverbs on a raw stream
  bool sw_loopback = false;  // loopback: "sw": TX comes back on RX, no NIC
};

MemoryRegionConfig read_daqiri_region(const YamlNode& node) {
  MemoryRegionConfig r;
  r.where.self = node.origin();
  YamlMap map(node);
  map.read_string("name", r.name, r.where, true);
  map.read_choice("kind", r.kind, kDaqiriRegionKinds, r.where, true);
  map.read_uint("buf_size", r.buf_size, 64, 1u << 30, r.where, true);
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

// DAQIRI's poll_mode: direct has the application's thread poll the NIC, on its raw ibverbs
// engine only, and the queue then names no worker core, batch or timeout. Here a poller still
// owns the queue; the nearest thing is one that never parks and hands over what each poll finds.
void read_poll_mode(YamlMap& map, const YamlNode& node, const Stream& stream, QueueConfig& q) {
  auto mode = map.get("poll_mode");
  if (!mode) return;
  auto direct = mode->to_choice({"indirect", "direct"});
  if (direct != 1) return;
  if (!stream.raw_ibverbs) {
    mode->error("poll_mode direct is DAQIRI's raw ibverbs engine's only (engine: ibverbs)");
    return;
  }
  for (const char* field : {"cpu_core", "batch_size", "timeout_us"}) {
    if (node.raw()[field]) {
      node.diags().error(q.where.at(field), std::string("a direct queue omits ") + field);
    }
  }
  q.busy_poll = true;
  q.batch_size = 256;  // what one direct poll returns at most
  mode->warning(
      "direct: here the queue's poller never parks (busy_poll) and hands over each poll's "
      "frames, up to 256, at once; the application reads them from its ring");
}

// `rdma`: the queue may name no region (DAQIRI's RDMA engine takes one per message, named by
// the application); pick_rdma_regions gives it one.
QueueConfig read_queue(const YamlNode& node, uint32_t index, bool tx, const Stream& stream,
                       bool rdma) {
  QueueConfig q;
  q.id = index;
  q.where.self = node.origin();
  YamlMap map(node);
  map.read_string("name", q.name, q.where, true);
  map.read_uint("id", q.id, 0, 1023, q.where);
  map.read_int("cpu_core", q.core, 0, 4095, q.where);
  map.read_uint("batch_size", q.batch_size, 1, 65536, q.where);
  map.read_string_list("memory_regions", q.regions, q.where);
  read_poll_mode(map, node, stream, q);
  if (q.regions.empty() && !rdma) {
    Origin o = q.where.self;
    o.key_path = node.path() + ".memory_regions";
    node.diags().error(o, "a queue needs at least one memory region");
  }
  // DAQIRI sizes the NIC ring itself; keep ours large enough for its batches.
  while (q.ring_size < q.batch_size)
    q.ring_size *= 2;
  if (tx) {
    map.ignore("timeout_us",
               "daqirid sends each burst as soon as it is polled; clients choose their own "
               "wait timeout");
  } else if (auto t = map.get("timeout_us")) {
    // DAQIRI flushes a partial burst after it, and its reorders a partial batch.
    if (auto v = t->to_uint(0, 60'000'000)) q.timeout_us = static_cast<uint32_t>(*v);
    t->warning(
        "daqirid delivers each burst as soon as it is polled; timeout_us is the batch timeout "
        "of the reorders whose first flow is on this queue");
  }
  map.ignore("output_port", "Holoscan operator wiring belongs to the application");
  map.ignore("split_boundary", "header-data split follows from a queue with two memory regions");
  if (tx) {
    map.ignore("offloads", "TX offloads are chosen per interface by the backend");
    map.read_uint("pacing_mbps", q.pacing_mbps, 0, kMaxPacingMbps, q.where);
  }
  map.finish();
  return q;
}

// DAQIRI's rx.reorder_configs: flows by id (this interface's), the method as a map of one of
// seq_batch_number or seq_packets_per_batch, the batch timeout from the queue of the first flow
// (its timeout_us). reorder_type names where DAQIRI runs it; here the daemon reorders on the
// CPU either way, and the output region's kind says how clients take it (a GPU ring from a
// device or pinned region).
void read_daqiri_reorders(const YamlNode& list, const InterfaceConfig& itf, Config& config) {
  for (const auto& node : list.items()) {
    ReorderConfig r;
    r.interface = itf.name;
    r.where.self = node.origin();
    YamlMap map(node);
    map.read_string("name", r.name, r.where, true);
    map.read_string("memory_region", r.region, r.where, true);
    r.where.record("region", r.where.at("memory_region"));
    map.read_uint("payload_byte_offset", r.plan.payload_offset, 0, 65535, r.where, true);
    std::string type;
    if (map.read_string("reorder_type", type, r.where, true) && type != "cpu" && type != "gpu") {
      node.diags().error(r.where.at("reorder_type"),
                         "reorder_type \"" + type + "\": expected gpu or cpu");
    } else if (type == "gpu") {
      node.diags().warning(r.where.at("reorder_type"),
                           "reorder_type gpu: daqirid places and converts the packets on the "
                           "CPU, on its first flow's poller, and the copy engines copy each "
                           "whole batch into its clients' GPU rings; DAQIRI places them in a GPU "
                           "kernel");
    }
    if (auto ids = map.require("flow_ids")) {
      r.where.record("flows", ids->origin());
      for (const auto& id_node : ids->items()) {
        auto id = id_node.to_uint(0, 65535);
        if (!id) continue;
        auto f = std::find_if(config.flows.begin(), config.flows.end(), [&](const FlowConfig& c) {
          return c.interface == itf.name && c.id == *id;
        });
        if (f == config.flows.end()) {
          id_node.error("interface \"" + itf.name + "\" has no flow with id " +
                        std::to_string(*id));
        } else {
          r.flows.push_back(f->name);
        }
      }
    }
    if (auto d = map.get("data_types")) {
      r.plan.format = read_sample_format(
          *d,
          {{"input_type", "input"}, {"output_type", "output"}, {"endianness", "input_endianness"}});
      r.where.record("convert", d->origin());
    }
    if (auto m = map.require("method")) {
      YamlMap method(*m);
      auto numbered = method.get("seq_batch_number");
      auto counted = method.get("seq_packets_per_batch");
      method.finish();
      if (numbered.has_value() == counted.has_value()) {
        m->error("a method is exactly one of seq_batch_number and seq_packets_per_batch");
      } else if (numbered) {
        YamlMap n(*numbered);
        if (auto s = n.require("sequence_number")) r.plan.sequence = read_bit_field(*s);
        if (auto b = n.require("batch_number")) number_batches(r.plan, *b);
        n.finish();
        r.where.record("batch", numbered->origin());
      } else {
        YamlMap c(*counted);
        if (auto s = c.require("sequence_number")) r.plan.sequence = read_bit_field(*s);
        c.read_uint("packets_per_batch", r.plan.packets_per_batch, 1, 1u << 24, r.where, true);
        c.finish();
      }
      r.where.record("sequence", m->origin());
    }
    map.finish();
    if (!r.flows.empty()) {
      const FlowConfig& first =
          *std::find_if(config.flows.begin(), config.flows.end(),
                        [&](const FlowConfig& f) { return f.name == r.flows.front(); });
      for (const auto& q : itf.rx_queues) {
        if (q.name == first.queue || (first.queue.empty() && &q == &itf.rx_queues.front()))
          r.plan.timeout_ns = uint64_t{q.timeout_us} * 1000;
      }
    }
    config.reorders.push_back(std::move(r));
  }
}

// DAQIRI's software loopback, as its DPDK engine rules it: one interface addressed "loopback"
// (or a PCI address it never opens), one queue each way. Here the interface becomes a net_ring
// device, whose TX queue feeds its RX queue, so that frames pass the daemon's steering on the
// way back in.
void map_sw_loopback(const YamlNode& node, InterfaceConfig& itf) {
  auto bdf = parse_dpdk_address(itf.address);
  if (itf.address != "loopback" && !(bdf && bdf->pci)) {
    node.diags().error(itf.where.at("address"),
                       "in software loopback an interface's address is \"loopback\" (or a PCI "
                       "address, which is not opened), not \"" +
                           itf.address + "\"");
    return;
  }
  if (itf.rx_queues.size() > 1 || itf.tx_queues.size() > 1) {
    node.error("software loopback takes one RX and one TX queue per interface, as in DAQIRI");
    return;
  }
  itf.address = "net_ring0";
}

// The flow daqirid adds for what DAQIRI's interface itself receives: named after the
// interface, into its first RX queue (the caller checks it has one).
FlowConfig interface_flow(const YamlNode& node, const InterfaceConfig& itf) {
  FlowConfig flow;
  flow.where.self = node.origin();
  flow.name = itf.name;
  flow.interface = itf.name;
  flow.queue = itf.rx_queues.front().name;
  return flow;
}

// DAQIRI's loopback hands its RX queue every frame sent, flows or not: an interface whose file
// names no flow gets a catch-all for clients to attach to.
void add_loopback_flow(const YamlNode& node, const InterfaceConfig& itf, Config& config) {
  if (itf.rx_queues.empty()) return;
  for (const auto& f : config.flows) {
    if (f.interface == itf.name) return;
  }
  FlowConfig flow = interface_flow(node, itf);
  flow.match.any = true;
  config.flows.push_back(std::move(flow));
}

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
  FlowConfig flow = interface_flow(node, itf);
  auto host = [](const core::Endpoint& e) { return core::Ipv4Prefix{e.ipv4, 32}; };
  auto port = [](const core::Endpoint& e) { return core::PortRange{e.port, e.port}; };
  switch (socket.transport) {
    case SocketTransport::kRoce:
      flow.match.any = true;  // a server takes every peer's connection
      // An RC connection loses no message: a receiver not ready holds its sender back. So
      // here, for a client that attaches with block backpressure.
      flow.allow_block.anyone = itf.rdma && itf.rdma->transport == RdmaConfig::Transport::kRc;
      break;
    case SocketTransport::kTcp:
      // DAQIRI loses no byte of a connection: TCP's flow control holds the sender back. So
      // here, for a client that attaches with block backpressure.
      flow.allow_block.anyone = true;
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
  std::optional<YamlNode> flex_items;
  std::optional<YamlNode> reorders;
  if (auto rx = map.get("rx")) {
    YamlMap r(*rx);
    r.read_bool("flow_isolation", itf.flow_isolation, itf.where);
    if (auto ts = r.get("hardware_timestamps"); ts && ts->to_bool().value_or(false)) {
      // DAQIRI's rule: raw streams only.
      if (backend == Backend::kDpdk) {
        itf.hardware_timestamps = true;
        itf.where.record("hardware_timestamps", ts->origin());
      } else {
        ts->warning("hardware timestamps are for raw streams (DAQIRI's rule); ignored here");
      }
    }
    if (auto cap = r.get("dynamic_flow_capacity")) {
      if (auto v = cap->to_uint(0, UINT32_MAX); v && *v != 0) {
        cap->warning(
            "daqirid adds flows at runtime on any port (daqiri-ctl flows add, rte_flow_create "
            "on DPDK); no template table is reserved");
      }
    }
    if (auto qs = r.get("queues")) {
      uint32_t i = 0;
      for (const auto& q : qs->items())
        itf.rx_queues.push_back(read_queue(q, i++, false, stream, backend == Backend::kRdma));
    }
    flows = r.get("flows");
    flex_items = r.get("flex_items");
    reorders = r.get("reorder_configs");
    r.finish();
  }
  if (auto tx = map.get("tx")) {
    YamlMap t(*tx);
    if (auto qs = t.get("queues")) {
      uint32_t i = 0;
      for (const auto& q : qs->items())
        itf.tx_queues.push_back(read_queue(q, i++, true, stream, backend == Backend::kRdma));
    }
    const bool tcp = socket && socket->transport == SocketTransport::kTcp;
    if (tcp) {
      // DAQIRI's socket engine writes each burst to a connection: so do these queues.
      for (auto& q : itf.tx_queues)
        q.tx_policy = TxPolicy::kTcp;
    }
    if (auto a = t.get("accurate_send")) {
      // DAQIRI's is the NIC's send scheduling (SEND_ON_TIMESTAMP, the NIC's PTP clock).
      if (auto on = a->to_bool(); on && *on && tcp) {
        a->warning(
            "accurate_send: a TCP connection's bytes leave when its peer has room, as DAQIRI's "
            "socket engine sends them: ignored");
      } else if (on && *on) {
        a->warning(
            "accurate_send: a frame's time is CLOCK_REALTIME (TxBuffer::send_at_ns), not the "
            "NIC's clock; the NIC holds each frame till then where its PMD schedules sends "
            "(SEND_ON_TIMESTAMP), else the daemon's TX poller does, late by its "
            "microseconds: keep the NIC's clock in step (phc2sys)");
        for (auto& q : itf.tx_queues) {
          q.accurate_send = true;
          q.where.record("accurate_send", a->origin());
        }
      }
    }
    if (auto f = t.get("flows")) {
      if (backend == Backend::kDpdk) {
        read_daqiri_tx_flows(*f, itf);
      } else {
        f->error("TX flows transform raw Ethernet frames: DAQIRI's raw streams only");
      }
    }
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
  if (stream.sw_loopback && backend == Backend::kDpdk) map_sw_loopback(node, itf);
  if (flows) {
    read_daqiri_flows(*flows, flex_items, itf, config);
  } else if (flex_items) {
    flex_items->warning("no flow of this interface uses a flex item");
  }
  if (stream.sw_loopback && backend == Backend::kDpdk) add_loopback_flow(node, itf, config);
  if (reorders) read_daqiri_reorders(*reorders, itf, config);
  if (socket) add_socket_flow(*socket, node, itf, config);
  config.interfaces.push_back(std::move(itf));
}

// DAQIRI's buf_size is a buffer's data room, with DPDK's mbuf headroom on top; daqirid's holds
// both, so the regions of single-region DPDK RX queues grow by the headroom (a split queue's
// regions are a header and a payload segment, whose sizes are the split's; TX buffers hold
// frames as clients write them, with no headroom). And DAQIRI sizes a port's MTU from its
// queues: the frame the largest queue's buffers hold, plus the largest header its flows push or
// strip, less the Ethernet header and FCS, within its jumbo bound.
void map_dpdk_buffers(Config& config) {
  constexpr uint32_t kEthernetHeaderAndFcs = 18;
  constexpr uint32_t kJumboFrame = 9100;  // DAQIRI's JUMBOFRAME_SIZE
  auto buf_size = [&](const std::string& name) -> uint32_t {
    const MemoryRegionConfig* r = find_region(config, name);
    return r != nullptr ? r->buf_size : 0;
  };
  // Bytes each region grows by: the mbuf headroom, and the headers this daemon strips after the
  // frame landed in the buffer (DAQIRI's NIC strips them before).
  std::map<std::string, uint32_t> growth;
  for (auto& itf : config.interfaces) {
    if (itf.backend != Backend::kDpdk) continue;
    // As DAQIRI sizes the port for VLAN and tunnel transforms: room for the outer wire frame.
    uint32_t encap = 0, decap = 0;
    for (const auto& f : itf.tx_flows)
      encap = std::max(encap, f.encap.overhead());
    for (const auto& f : config.flows) {
      if (f.interface != itf.name || !f.match.decap) continue;
      decap = std::max(decap, core::outer_header_bytes(f.match.decap->kind));
    }
    uint32_t frame = 64;
    for (const auto* queues : {&itf.rx_queues, &itf.tx_queues}) {
      for (const auto& q : *queues) {
        uint32_t room = 0;
        for (const auto& name : q.regions)
          room += buf_size(name);
        frame = std::max(frame, room);
        if (queues == &itf.rx_queues && q.regions.size() == 1) {
          uint32_t& g = growth[q.regions.front()];
          g = std::max(g, kMbufHeadroom + decap);
        }
      }
    }
    frame += std::max(encap, decap);
    itf.mtu = std::max(std::min(frame, kJumboFrame) - kEthernetHeaderAndFcs, uint32_t{68});
  }
  for (auto& r : config.memory_regions) {
    if (auto g = growth.find(r.name); g != growth.end()) r.buf_size += g->second;
  }
}

// The words of a region's name, lower case: DAQIRI's examples name a region by its direction
// and side ("DATA_RX_GPU_SERVER").
std::vector<std::string> name_words(const std::string& name) {
  std::vector<std::string> words(1);
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      words.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!words.back().empty()) {
      words.emplace_back();
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

// How well a region's name fits a queue: its direction counts most, then the interface's side.
int region_fit(const std::string& region, bool tx, bool server) {
  int fit = 0;
  for (const auto& w : name_words(region)) {
    bool rx_word = w == "rx" || w == "recv" || w == "receive";
    bool tx_word = w == "tx" || w == "send";
    if (rx_word || tx_word) fit += rx_word != tx ? 2 : -2;
    if (w == "server" || w == "client") fit += (w == "server") == server ? 1 : -1;
  }
  return fit;
}

// A RoCE queue that names no region draws on the one whose name fits it best among those no
// queue names (or among all, when every one is named), first in the file on a tie; the warning
// says which.
void pick_rdma_regions(const YamlNode& cfg, Config& config) {
  std::set<std::string> named;
  for (const auto& itf : config.interfaces) {
    for (const auto* queues : {&itf.rx_queues, &itf.tx_queues}) {
      for (const auto& q : *queues)
        named.insert(q.regions.begin(), q.regions.end());
    }
  }
  for (auto& itf : config.interfaces) {
    if (itf.backend != Backend::kRdma) continue;
    const bool server = itf.rdma && itf.rdma->mode == RdmaConfig::Mode::kServer;
    for (auto* queues : {&itf.rx_queues, &itf.tx_queues}) {
      const bool tx = queues == &itf.tx_queues;
      for (auto& q : *queues) {
        if (!q.regions.empty()) continue;
        const MemoryRegionConfig* best = nullptr;
        for (bool any : {false, true}) {
          for (const auto& r : config.memory_regions) {
            if ((any || !named.contains(r.name)) &&
                (!best || region_fit(r.name, tx, server) > region_fit(best->name, tx, server))) {
              best = &r;
            }
          }
          if (best) break;
        }
        if (!best) {
          cfg.diags().error(q.where.self, "queue " + q.name +
                                              " has no memory region to draw on: the file "
                                              "defines none");
          continue;
        }
        q.regions = {best->name};
        named.insert(best->name);
        cfg.diags().warning(
            q.where.self,
            "queue " + q.name +
                " names no memory_regions (DAQIRI's RDMA engine takes a region "
                "per message, as its application names it): here its buffers come from " +
                best->name + ", the best fit by name; name one in memory_regions to choose");
      }
    }
  }
}

// DAQIRI's RDMA engine has no ring of its own: a queue's messages are its region's buffers. Here
// each RoCE queue of such a file gets the largest ring its region's buffers cover (1.5x the
// ring plus a batch), not DPDK's 1024, so that a region of 20 large messages is used as it is.
void fit_rdma_rings(Config& config) {
  for (auto& itf : config.interfaces) {
    if (itf.backend != Backend::kRdma) continue;
    for (auto* queues : {&itf.rx_queues, &itf.tx_queues}) {
      for (auto& q : *queues) {
        uint64_t bufs = UINT64_MAX;
        for (const auto& name : q.regions) {
          if (const MemoryRegionConfig* r = find_region(config, name))
            bufs = std::min<uint64_t>(bufs, r->num_bufs);
        }
        if (bufs == UINT64_MAX) continue;
        uint32_t ring = 1;
        while (ring < q.batch_size)
          ring *= 2;
        while (ring * 2 <= q.ring_size && (uint64_t{ring} * 2) * 3 / 2 + q.batch_size <= bufs)
          ring *= 2;
        q.ring_size = ring;
      }
    }
  }
}

// DAQIRI raises a pool that is too small for its NIC ring (it would deadlock) to 3x the ring,
// with a warning; the same here against daqirid's ring of each queue that draws on the region.
// A split queue's first region holds headers, not a pool.
void raise_small_regions(const YamlNode& cfg, Config& config) {
  for (auto& r : config.memory_regions) {
    const QueueConfig* worst = nullptr;
    for (const auto& itf : config.interfaces) {
      for (const auto* queues : {&itf.rx_queues, &itf.tx_queues}) {
        for (const auto& q : *queues) {
          bool pool = q.regions.size() == 2 ? q.regions.back() == r.name
                                            : std::ranges::count(q.regions, r.name) != 0;
          if (pool && (!worst || buffers_needed(q) > buffers_needed(*worst))) worst = &q;
        }
      }
    }
    if (!worst || r.num_bufs >= buffers_needed(*worst)) continue;
    auto raised = static_cast<uint32_t>(
        std::max<uint64_t>(uint64_t{worst->ring_size} * 3, buffers_needed(*worst)));
    cfg.diags().warning(r.where.at("num_bufs"),
                        "num_bufs " + std::to_string(r.num_bufs) + " is too few for queue " +
                            worst->name + "'s ring of " + std::to_string(worst->ring_size) +
                            " (1.5x the ring plus a batch); raised to " + std::to_string(raised) +
                            ", as DAQIRI raises it");
    r.num_bufs = raised;
  }
}

// A TX queue of a device region sends from GPU memory as DAQIRI's does, by another way: the
// warning says which.
void note_gpu_tx(const YamlNode& cfg, const Config& config) {
  for (const auto& itf : config.interfaces) {
    for (const auto& q : itf.tx_queues) {
      const MemoryRegionConfig* r =
          q.regions.empty() ? nullptr : find_region(config, q.regions.back());
      if (r == nullptr || r->kind != RegionKind::kDevice) continue;
      cfg.diags().warning(q.where.at("memory_regions"),
                          "frames from GPU memory: daqirid's GPU engine copies each frame's GPU "
                          "bytes into host memory of its own, and the queue sends that copy; "
                          "DAQIRI's NIC reads them in GPU memory (GPUDirect), which daqirid does "
                          "for a daqirid file's gpudirect payload region on a NIC");
    }
  }
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
        stream.raw_ibverbs = true;
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
  std::optional<YamlNode> loopback = cfg.get("loopback");
  if (loopback) {
    if (auto v = loopback->to_string()) {
      if (*v == "sw") {
        stream.sw_loopback = !stream.socket && stream.backend == Backend::kDpdk;
        if (!stream.sw_loopback)
          loopback->warning("software loopback is DAQIRI's DPDK engine's; ignored for this stream");
      } else if (!v->empty()) {
        loopback->error("loopback is \"sw\" or \"\" (off), not \"" + *v + "\"");
      }
    }
  }
  cfg.ignore("tx_meta_buffers", "daqirid sizes descriptor rings per attachment");
  cfg.ignore("rx_meta_buffers", "daqirid sizes descriptor rings per attachment");

  if (auto regions = cfg.get("memory_regions")) {
    for (const auto& r : regions->items())
      config.memory_regions.push_back(read_daqiri_region(r));
  }
  if (auto interfaces = cfg.get("interfaces")) {
    for (const auto& i : interfaces->items())
      read_interface(i, stream, config);
    if (stream.sw_loopback && config.interfaces.size() > 1)
      loopback->error("software loopback takes a single interface, as in DAQIRI");
  }
  pick_rdma_regions(cfg_node, config);
  fit_rdma_rings(config);
  map_dpdk_buffers(config);
  raise_small_regions(cfg_node, config);
  note_gpu_tx(cfg_node, config);
  cfg.finish();
}

}  // namespace daqiri::config
