// Our own schema: top-level daemon, memory_regions, interfaces, flows, reorders.
#include "config/reorder_schema.hpp"
#include "config/schema_common.hpp"
#include "config/schemas.hpp"

namespace daqiri::config {
namespace {

const std::vector<std::pair<std::string_view, RegionKind>> kRegionKinds = {
    {"host", RegionKind::kHost},
    {"huge", RegionKind::kHuge},
    {"pinned", RegionKind::kPinned},
    {"device", RegionKind::kDevice}};

const std::vector<std::pair<std::string_view, Backend>> kBackends = {{"socket", Backend::kSocket},
                                                                     {"dpdk", Backend::kDpdk},
                                                                     {"rdma", Backend::kRdma},
                                                                     {"xdp", Backend::kXdp}};

// `{users: [...], groups: [...]}`: names or numbers, kept as given and as ids.
core::ClientList read_id_lists(const YamlNode& node) {
  core::ClientList list;
  YamlMap map(node);
  if (auto users = map.get("users")) {
    for (const auto& u : users->items(true)) {
      if (auto uid = read_user(u)) {
        list.users.push_back(*u.to_string());
        list.uids.push_back(*uid);
      }
    }
  }
  if (auto groups = map.get("groups")) {
    for (const auto& g : groups->items(true)) {
      if (auto gid = read_group(g)) {
        list.groups.push_back(*g.to_string());
        list.gids.push_back(*gid);
      }
    }
  }
  map.finish();
  return list;
}

void read_access_list(YamlMap& parent, std::string_view key, AccessList& out, bool* given) {
  auto n = parent.get(key);
  if (!n) return;
  if (given) *given = true;
  core::ClientList list = read_id_lists(*n);
  out.uids.insert(out.uids.end(), list.uids.begin(), list.uids.end());
  out.gids.insert(out.gids.end(), list.gids.begin(), list.gids.end());
}

void read_tcp(const YamlNode& node, DaemonConfig& d) {
  TcpListenerConfig tcp;
  tcp.where.self = node.origin();
  YamlMap map(node);
  map.read_string("address", tcp.address, tcp.where, /*required=*/true);
  map.read_string("cert", tcp.cert_file, tcp.where, /*required=*/true);
  map.read_string("key", tcp.key_file, tcp.where, /*required=*/true);
  map.read_string("client_ca", tcp.client_ca_file, tcp.where);
  if (auto r = map.get("role")) {
    if (auto i = r->to_choice({"client", "admin", "anonymous"})) {
      tcp.admin = *i == 1;
      tcp.anonymous = *i == 2;
      tcp.where.record("role", r->origin());
    }
  }
  map.finish();
  d.tcp = std::move(tcp);
}

void read_daemon(const YamlNode& node, DaemonConfig& d) {
  d.where.self = node.origin();
  YamlMap map(node);
  map.read_string("socket", d.socket_path, d.where);
  std::string group;
  if (map.read_string("socket_group", group, d.where)) d.socket_group = group;
  map.read_string("metrics", d.metrics_address, d.where);
  map.read_string("cdi_spec", d.cdi_spec, d.where);
  if (d.metrics_address == "off") d.metrics_address.clear();
  map.read_choice("log_level", d.log_level, log_level_names(), d.where);
  if (auto cores = map.get("control_cores")) {
    for (const auto& c : cores->items(true)) {
      if (auto v = c.to_int(0, 4095)) d.control_cores.push_back(static_cast<int>(*v));
    }
    d.where.record("control_cores", cores->origin());
  }
  if (auto access = map.get("access")) {
    YamlMap a(*access);
    bool clients_given = false;
    read_access_list(a, "admins", d.access.admins, nullptr);
    read_access_list(a, "clients", d.access.clients, &clients_given);
    d.access.default_clients = !clients_given;
    a.finish();
  }
  if (auto tcp = map.get("tcp")) read_tcp(*tcp, d);
  if (auto limits = map.get("limits")) {
    YamlMap l(*limits);
    l.read_uint("sessions_per_user", d.limits.sessions_per_user, 1, 1u << 20, d.where);
    l.read_uint("attachments_per_user", d.limits.attachments_per_user, 1, 1u << 20, d.where);
    l.read_uint("control_connections_per_user", d.limits.control_connections_per_user, 1, 1u << 20,
                d.where);
    l.read_uint("tcp_connections_per_peer", d.limits.tcp_connections_per_peer, 1, 1u << 16,
                d.where);
    l.read_uint("tcp_connections_total", d.limits.tcp_connections_total, 1, 1u << 16, d.where);
    l.read_uint("memory_mb_per_user", d.limits.memory_mb_per_user, 1, 1u << 24, d.where);
    l.read_uint("memory_mb_total", d.limits.memory_mb_total, 1, 1u << 24, d.where);
    l.read_uint("gpu_memory_mb_per_user", d.limits.gpu_memory_mb_per_user, 1, 1u << 24, d.where);
    l.read_uint("gpu_memory_mb_total", d.limits.gpu_memory_mb_total, 1, 1u << 24, d.where);
    l.finish();
  }
  if (std::vector<std::string> dirs; map.read_string_list("capture_dirs", dirs, d.where)) {
    d.capture_dirs = std::move(dirs);
  }
  map.finish();
}

MemoryRegionConfig read_region(const YamlNode& node) {
  MemoryRegionConfig r;
  r.where.self = node.origin();
  YamlMap map(node);
  map.read_string("name", r.name, r.where, true);
  map.read_choice("kind", r.kind, kRegionKinds, r.where, true);
  map.read_uint("buf_size", r.buf_size, 64, 1u << 30, r.where, true);
  map.read_uint("num_bufs", r.num_bufs, 1, 1u << 26, r.where, true);
  map.read_int("gpu", r.gpu, 0, 63, r.where);
  map.ignore("gpu_copy",
             "the GPU engine has one copy method now (copy engines only, docs/gpu.md); remove it");
  map.read_bool("share_pages", r.share_pages, r.where);
  map.read_bool("gpudirect", r.gpudirect, r.where);
  map.read_string_list("access", r.access, r.where);
  map.finish();
  return r;
}

const std::vector<std::pair<std::string_view, TxPolicy>> kTxPolicies = {
    {"checked", TxPolicy::kChecked}, {"raw", TxPolicy::kRaw}, {"tcp", TxPolicy::kTcp}};

// `clients: {users: [...], groups: [...]}` of a flow or a TX queue: who may attach.
core::ClientList read_clients(const YamlNode& node) {
  core::ClientList list = read_id_lists(node);
  if (!list.restricted() && !node.diags().has_errors()) {
    node.error(
        "clients names who may attach: at least one of users and groups (leave it out "
        "for every client)");
  }
  return list;
}

QueueConfig read_queue(const YamlNode& node, uint32_t index, bool tx) {
  QueueConfig q;
  q.id = index;
  q.where.self = node.origin();
  YamlMap map(node);
  map.read_string("name", q.name, q.where, true);
  map.read_uint("id", q.id, 0, 1023, q.where);
  map.read_int("core", q.core, 0, 4095, q.where);
  map.read_uint("batch_size", q.batch_size, 1, 65536, q.where);
  map.read_uint("ring_size", q.ring_size, 64, 1u << 20, q.where);
  map.read_bool("busy_poll", q.busy_poll, q.where);
  if (TxPolicy p{}; tx && map.read_choice("tx_policy", p, kTxPolicies, q.where)) q.tx_policy = p;
  if (tx) map.read_uint("pacing_mbps", q.pacing_mbps, 0, kMaxPacingMbps, q.where);
  if (tx) map.read_bool("accurate_send", q.accurate_send, q.where);
  if (tx) map.read_uint("max_clients", q.max_clients, 1, kMaxTxClients, q.where);
  if (auto c = tx ? map.get("clients") : std::nullopt) {
    q.clients = read_clients(*c);
    q.where.record("clients", c->origin());
  }
  map.read_string_list("regions", q.regions, q.where);
  if (q.regions.empty()) {
    Origin o = q.where.self;
    o.key_path = node.path() + ".regions";
    node.diags().error(o, "a queue needs at least one memory region");
  }
  map.finish();
  return q;
}

void read_queues(YamlMap& dir_map, std::vector<QueueConfig>& out, bool tx) {
  if (auto qs = dir_map.get("queues")) {
    uint32_t i = 0;
    for (const auto& q : qs->items())
      out.push_back(read_queue(q, i++, tx));
  }
}

InterfaceConfig read_interface(const YamlNode& node) {
  InterfaceConfig itf;
  itf.where.self = node.origin();
  YamlMap map(node);
  map.read_string("name", itf.name, itf.where, true);
  map.read_choice("backend", itf.backend, kBackends, itf.where, true);
  map.read_string("address", itf.address, itf.where, true);
  map.read_string("source_ipv4", itf.source_ipv4, itf.where);
  map.read_uint("mtu", itf.mtu, 68, 9216, itf.where);
  map.read_bool("promiscuous", itf.promiscuous, itf.where);
  map.read_bool("flow_isolation", itf.flow_isolation, itf.where);
  map.read_bool("hardware_timestamps", itf.hardware_timestamps, itf.where);
  if (auto rdma = map.get("rdma")) {
    RdmaConfig rc;
    YamlMap r(*rdma);
    r.read_choice("mode", rc.mode,
                  {{"server", RdmaConfig::Mode::kServer}, {"client", RdmaConfig::Mode::kClient}},
                  itf.where);
    uint32_t port = rc.port;
    if (r.read_uint("port", port, 1, 65535, itf.where)) rc.port = static_cast<uint16_t>(port);
    r.read_choice("transport", rc.transport,
                  {{"RC", RdmaConfig::Transport::kRc}, {"UC", RdmaConfig::Transport::kUc}},
                  itf.where);
    r.finish();
    itf.rdma = rc;
  }
  if (auto rx = map.get("rx")) {
    YamlMap r(*rx);
    read_queues(r, itf.rx_queues, false);
    r.finish();
  }
  if (auto tx = map.get("tx")) {
    YamlMap t(*tx);
    read_queues(t, itf.tx_queues, true);
    t.finish();
  }
  map.finish();
  return itf;
}

FlowConfig read_flow(const YamlNode& node) {
  FlowConfig f;
  f.where.self = node.origin();
  YamlMap map(node);
  map.read_string("name", f.name, f.where, true);
  map.read_string("interface", f.interface, f.where, true);
  map.read_string("queue", f.queue, f.where);
  map.read_string_list("queues", f.rss_queues, f.where);
  uint32_t id = 0;
  if (map.read_uint("id", id, 0, (1u << 24) - 1, f.where)) f.id = id;
  if (auto c = map.get("connect")) {
    if (auto text = c->to_string()) {
      if (auto ep = core::parse_endpoint(*text)) {
        f.connect = *ep;
      } else {
        c->error(ep.error().message);
      }
    }
    f.where.record("connect", c->origin());
  }
  if (auto m = f.connect ? map.get("match") : map.require("match")) {
    f.match = read_flow_match(*m);
    f.where.record("match", m->origin());
  }
  if (auto b = map.get("allow_block")) {  // true, false, or a list of user names
    if (b->is_sequence()) {
      for (const auto& u : b->items())
        if (auto name = u.to_string()) f.allow_block.users.push_back(std::move(*name));
    } else if (auto yes = b->to_bool()) {
      f.allow_block.anyone = *yes;
    }
    f.where.record("allow_block", b->origin());
  }
  if (auto c = map.get("clients")) {
    f.clients = read_clients(*c);
    f.where.record("clients", c->origin());
  }
  map.finish();
  return f;
}

ReorderConfig read_reorder(const YamlNode& node) {
  ReorderConfig r;
  r.where.self = node.origin();
  YamlMap map(node);
  map.read_string("name", r.name, r.where, true);
  map.read_string("interface", r.interface, r.where, true);
  map.read_string_list("flows", r.flows, r.where);
  map.read_string("region", r.region, r.where, true);
  map.read_uint("payload_offset", r.plan.payload_offset, 0, 65535, r.where);
  uint32_t timeout_us = 0;
  if (map.read_uint("timeout_us", timeout_us, 0, 60'000'000, r.where))
    r.plan.timeout_ns = uint64_t{timeout_us} * 1000;
  if (auto s = map.require("sequence")) {
    r.plan.sequence = read_bit_field(*s);
    r.where.record("sequence", s->origin());
  }
  auto batch = map.get("batch");
  bool counted = map.read_uint("packets_per_batch", r.plan.packets_per_batch, 1, 1u << 24, r.where);
  if (batch && counted) {
    node.error("a reorder's batches are numbered (batch) or counted (packets_per_batch), not both");
  } else if (batch) {
    number_batches(r.plan, *batch);
    r.where.record("batch", batch->origin());
  } else if (!counted) {
    node.error("a reorder needs packets_per_batch, or batch (the batch number's bits)");
  }
  if (auto c = map.get("convert")) {
    r.plan.format = read_sample_format(*c, {{"input"}, {"output"}, {"byte_order"}});
    r.where.record("convert", c->origin());
  }
  map.finish();
  if (r.flows.empty()) node.error("a reorder needs at least one flow (flows)");
  return r;
}

void read_dpdk(const YamlNode& node, DpdkConfig& d) {
  d.where.self = node.origin();
  YamlMap map(node);
  map.read_int("main_core", d.main_core, 0, 4095, d.where);
  map.read_bool("hugepages", d.hugepages, d.where);
  map.read_uint("memory_mb", d.memory_mb, 16, 1u << 20, d.where);
  map.read_string_list("eal_args", d.eal_args, d.where);
  map.finish();
}

}  // namespace

void read_daqirid_schema(YamlMap& root, Config& config) {
  if (auto d = root.get("daemon")) read_daemon(*d, config.daemon);
  if (auto regions = root.get("memory_regions")) {
    for (const auto& r : regions->items())
      config.memory_regions.push_back(read_region(r));
  }
  if (auto interfaces = root.get("interfaces")) {
    for (const auto& i : interfaces->items())
      config.interfaces.push_back(read_interface(i));
  }
  if (auto flows = root.get("flows")) {
    for (const auto& f : flows->items())
      config.flows.push_back(read_flow(f));
  }
  if (auto reorders = root.get("reorders")) {
    for (const auto& r : reorders->items())
      config.reorders.push_back(read_reorder(r));
  }
  if (auto dpdk = root.get("dpdk")) read_dpdk(*dpdk, config.dpdk);
  root.finish();
}

}  // namespace daqiri::config
