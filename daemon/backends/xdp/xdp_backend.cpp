#include "backends/xdp/xdp_backend.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <fstream>

#include "backends/xdp/xdp_program.hpp"
#include "backends/xdp/xsk_rx_queue.hpp"
#include "backends/xdp/xsk_socket.hpp"
#include "backends/xdp/xsk_tx_queue.hpp"

namespace daqiri::backends::xdp {

namespace {

// The filter's rule for a flow on `queue`: a UDP match, as the flow filter takes it.
Result<daqiri_xdp_rule> rule_for(const core::Flow& flow, uint32_t queue) {
  const core::FlowMatch& m = flow.match;
  if (m.any || m.raw_ethernet() || m.is_tcp() || flow.connect || (!m.udp_src && !m.udp_dst)) {
    return fail(ErrorCode::kInvalidArgument,
                "flow \"" + flow.name + "\": an xdp interface takes UDP flows (udp_dst or " +
                    "udp_src, with optional address prefixes); other traffic stays the kernel's",
                "match");
  }
  daqiri_xdp_rule r{};
  if (m.ipv4_src) {
    r.src_addr = htonl(m.ipv4_src->address);
    r.src_mask = htonl(m.ipv4_src->mask());
  }
  if (m.ipv4_dst) {
    r.dst_addr = htonl(m.ipv4_dst->address);
    r.dst_mask = htonl(m.ipv4_dst->mask());
  }
  const core::PortRange all{0, 0xffff};
  r.src_port_lo = m.udp_src.value_or(all).first;
  r.src_port_hi = m.udp_src.value_or(all).last;
  r.dst_port_lo = m.udp_dst.value_or(all).first;
  r.dst_port_hi = m.udp_dst.value_or(all).last;
  r.ip_length = m.ipv4_length.value_or(0);
  r.queue = static_cast<uint16_t>(queue);
  return r;
}

}  // namespace

Result<std::unique_ptr<Backend>> XdpBackend::open(const BackendContext& context) {
  std::unique_ptr<XdpBackend> b(new XdpBackend(context));
  for (const auto& itf : context.config.interfaces) {
    if (itf.backend != config::Backend::kXdp) continue;
    Interface& i = b->interfaces_[itf.name];
    i.config = &itf;
    i.ifindex = static_cast<int>(if_nametoindex(itf.address.c_str()));
    if (i.ifindex == 0) {
      return fail_errno("xdp interface " + itf.name + ": network interface \"" + itf.address +
                        "\"");
    }
    auto removed = XdpProgram::remove_leftovers(i.ifindex);
    if (!removed) return std::unexpected(removed.error());
    if (*removed > 0) {
      spdlog::warn(
          "xdp interface {}: removed {} flow filter(s) a daqirid that did not stop left "
          "on {}",
          itf.name, *removed, itf.address);
    }
    auto program = XdpProgram::attach(i.ifindex);
    if (!program) {
      return fail(program.error().code, "xdp interface " + itf.name + " (" + itf.address +
                                            "): " + program.error().message);
    }
    i.program = std::move(*program);
    spdlog::info("xdp interface {}: flow filter on {} ({} XDP)", itf.name, itf.address,
                 i.program->mode());
  }
  return std::unique_ptr<Backend>(std::move(b));
}

XdpBackend::XdpBackend(const BackendContext& context) : Backend(context) {}

XdpBackend::~XdpBackend() = default;

XskRxQueue* XdpBackend::rx_queue(const QueueHome& home) const {
  auto i = interfaces_.find(home.itf->name);
  if (i == interfaces_.end()) return nullptr;
  auto q = i->second.rx.find(home.queue->name);
  return q == i->second.rx.end() ? nullptr : q->second.get();
}

const config::MemoryRegionConfig* XdpBackend::region_of(const config::QueueConfig& q) const {
  for (const auto& r : context_.config.memory_regions) {
    if (!q.regions.empty() && r.name == q.regions.front()) return &r;
  }
  return nullptr;
}

Result<XskSocket*> XdpBackend::socket_for(Interface& i, uint32_t id) {
  std::unique_ptr<XskSocket>& socket = i.sockets[id];
  if (socket) return socket.get();
  const config::InterfaceConfig& itf = *i.config;
  auto with_id = [id](const std::vector<config::QueueConfig>& queues) {
    auto q = std::find_if(queues.begin(), queues.end(),
                          [id](const config::QueueConfig& c) { return c.id == id; });
    return q == queues.end() ? nullptr : &*q;
  };
  const config::QueueConfig* rx = with_id(itf.rx_queues);
  const config::QueueConfig* tx = with_id(itf.tx_queues);
  XskSocketSetup s;
  s.ifname = itf.address;
  s.queue_id = id;
  if (const config::MemoryRegionConfig* r = rx ? region_of(*rx) : nullptr) {
    s.chunk_size = r->buf_size;
    s.pool_name = "xsk-" + itf.name + "-" + rx->name;
    s.rx_buffers = r->num_bufs;
    s.huge = r->kind == config::RegionKind::kHuge;
    s.rx_ring = rx->ring_size;
  }
  if (const config::MemoryRegionConfig* t = tx ? region_of(*tx) : nullptr) {
    // Without an RX pool, the smallest chunk that holds the TX region's frames.
    if (s.chunk_size == 0) s.chunk_size = std::max(2048u, std::bit_ceil(t->buf_size));
    s.tx_chunks = tx->ring_size;
    s.tx_ring = tx->ring_size;
  }
  auto made = XskSocket::create(s);
  if (!made) {
    i.sockets.erase(id);
    return fail(made.error().code, "xdp interface " + itf.name + ": " + made.error().message);
  }
  spdlog::info("xdp interface {}: AF_XDP socket on {} queue {}, {}", itf.name, itf.address, id,
               (*made)->zero_copy() ? "zero-copy" : "copy mode");
  socket = std::move(*made);
  return socket.get();
}

Result<> XdpBackend::open_rx_queue(const QueueHome& home) {
  Interface& i = interfaces_.at(home.itf->name);
  const config::QueueConfig& qc = *home.queue;
  auto socket = socket_for(i, qc.id);
  if (!socket) return std::unexpected(socket.error());
  auto q = std::make_unique<XskRxQueue>(**socket,
                                        XskQueueSetup{qc.ring_size, qc.batch_size, qc.busy_poll});
  if (auto ok = i.program->set_socket(qc.id, (*socket)->fd()); !ok) return ok;
  home.poller->add_task(q.get(), {(*socket)->fd()});
  i.rx[qc.name] = std::move(q);
  return {};
}

namespace {

// The interface's MAC, as the kernel has it ("aa:bb:cc:dd:ee:ff").
Result<frame::Mac> mac_of(const std::string& ifname) {
  std::ifstream in("/sys/class/net/" + ifname + "/address");
  std::string text;
  frame::Mac mac{};
  bool ok = static_cast<bool>(in >> text) && text.size() == 17;
  for (size_t i = 0; ok && i < mac.size(); ++i) {
    const char* first = text.data() + i * 3;
    auto [end, ec] = std::from_chars(first, first + 2, mac[i], 16);
    ok = ec == std::errc{} && end == first + 2 && (i == 5 || *end == ':');
  }
  if (!ok) return fail(ErrorCode::kNotFound, "the MAC address of " + ifname);
  return mac;
}

}  // namespace

Result<dataplane::TxQueueTask*> XdpBackend::open_tx_queue(const QueueHome& home) {
  Interface& i = interfaces_.at(home.itf->name);
  const config::QueueConfig& qc = *home.queue;
  auto mac = mac_of(home.itf->address);
  if (!mac) return std::unexpected(mac.error());
  auto socket = socket_for(i, qc.id);
  if (!socket) return std::unexpected(socket.error());
  XskTxSetup s;
  s.batch = qc.batch_size;
  s.policy = qc.tx_policy.value_or(config::TxPolicy::kChecked);
  s.source_ipv4 = config::sending_ipv4(*home.itf);
  s.mac = *mac;
  s.pacing_mbps = qc.pacing_mbps;
  s.max_frame = home.region->buf_size;
  s.send_times = qc.accurate_send;
  auto q = std::make_unique<XskTxQueue>(**socket, s);
  XskTxQueue* raw = q.get();
  home.poller->add_task(raw, {});
  i.tx[qc.name] = std::move(q);
  return raw;
}

Result<std::unique_ptr<dataplane::RxFlowTask>> XdpBackend::add_flow(const core::Flow& flow,
                                                                    const QueueHome& home,
                                                                    memory::PageArena* /*arena*/) {
  Interface& i = interfaces_.at(home.itf->name);
  XskRxQueue* queue = rx_queue(home);
  if (queue == nullptr) return fail(ErrorCode::kNotFound, "no xdp RX queue " + home.key());
  auto rule = rule_for(flow, queue->socket().queue_id());
  if (!rule) return std::unexpected(rule.error());
  auto free = std::find(i.slots.begin(), i.slots.end(), std::string());
  if (free == i.slots.end()) {
    return fail(ErrorCode::kResourceExhausted, "xdp interface " + home.itf->name + " holds " +
                                                   std::to_string(DAQIRI_XDP_MAX_RULES) +
                                                   " flows already");
  }
  const auto slot = static_cast<uint32_t>(free - i.slots.begin());
  // A frame the filter sends before the queue has the flow (the next poll) is counted unmatched.
  if (auto ok = i.program->set_rule(slot, *rule); !ok) return std::unexpected(ok.error());
  auto f = std::make_unique<XdpRxFlow>(flow, *queue, slot);
  queue->add(f.get(), home.poller->epoch());
  *free = flow.name;
  return f;
}

void XdpBackend::close_flow(dataplane::RxFlowTask& flow, const QueueHome& home) {
  auto& f = static_cast<XdpRxFlow&>(flow);  // every flow of this backend is one
  Interface& i = interfaces_.at(home.itf->name);
  if (auto ok = i.program->clear_rule(f.slot()); !ok) {
    spdlog::error("flow {}: {}", f.flow().name, ok.error().message);
  }
}

dataplane::Grace XdpBackend::remove_flow(dataplane::RxFlowTask* flow, const QueueHome& home) {
  auto* f = static_cast<XdpRxFlow*>(flow);
  Interface& i = interfaces_.at(home.itf->name);
  i.slots[f->slot()].clear();
  return f->queue().remove(f, home.poller->epoch());
}

QueueTraits XdpBackend::traits(const QueueHome& home) const {
  return {home.queue->ring_size, false};
}

std::string XdpBackend::delivery(const QueueHome& home) const {
  const Interface& i = interfaces_.at(home.itf->name);
  auto socket = i.sockets.find(home.queue->id);
  if (socket == i.sockets.end()) return "";
  return std::string(socket->second->zero_copy() ? "zero-copy" : "copy") + " (AF_XDP, " +
         i.program->mode() + " XDP)";
}

namespace {

// "up", "down", ...: the kernel's operstate of the interface.
std::string operstate(const std::string& ifname) {
  std::ifstream in("/sys/class/net/" + ifname + "/operstate");
  std::string state;
  return in >> state ? state : "unknown";
}

}  // namespace

std::string XdpBackend::mode(const Interface& i) {
  // A driver binds all its queues' sockets alike: the first says for the interface.
  const bool zero_copy = !i.sockets.empty() && i.sockets.begin()->second->zero_copy();
  return i.program->mode() + " XDP, " + (zero_copy ? "zero-copy" : "copy");
}

std::string XdpBackend::link_state(const config::InterfaceConfig& itf) const {
  auto i = interfaces_.find(itf.name);
  const std::string state = operstate(itf.address);
  return i == interfaces_.end() ? state : state + ", " + mode(i->second);
}

std::vector<dataplane::NicStats> XdpBackend::nic_stats() const {
  std::vector<dataplane::NicStats> out;
  for (const auto& [name, i] : interfaces_) {
    dataplane::NicStats s;
    s.interface = name;
    s.driver = "xdp (" + mode(i) + ") on " + i.config->address;
    s.link = operstate(i.config->address);
    for (const auto& [qname, q] : i.rx) {
      dataplane::NicQueueStats qs = q->stats(qname);
      s.rx_packets += qs.packets;
      s.rx_bytes += qs.bytes;
      const XskStatistics x = q->socket().statistics();  // one getsockopt a queue
      qs.no_buffer = x.fill_ring_empty;
      s.rx_missed += x.rx_dropped;
      s.rx_errors += x.rx_invalid_descs;
      const std::string p = qname + "_";
      s.xstats.emplace_back(p + "rx_dropped", x.rx_dropped);
      s.xstats.emplace_back(p + "rx_invalid_descs", x.rx_invalid_descs);
      s.xstats.emplace_back(p + "rx_ring_full", x.rx_ring_full);
      s.xstats.emplace_back(p + "fill_ring_empty", x.fill_ring_empty);
      s.xstats.emplace_back(p + "wakeups", q->counters.wakeups.load(std::memory_order_relaxed));
      s.queues.push_back(std::move(qs));
    }
    for (const auto& [qname, q] : i.tx) {
      dataplane::NicQueueStats qs = q->stats(qname);
      s.tx_packets += qs.packets;
      s.tx_bytes += qs.bytes;
      const XskStatistics x = q->socket().statistics();
      s.tx_errors += x.tx_invalid_descs;
      s.xstats.emplace_back(qname + "_tx_invalid_descs", x.tx_invalid_descs);
      s.xstats.emplace_back(qname + "_kicks", q->counters.kicks.load(std::memory_order_relaxed));
      s.queues.push_back(std::move(qs));
    }
    for (uint32_t slot = 0; slot < DAQIRI_XDP_MAX_RULES; ++slot) {
      if (i.slots[slot].empty()) continue;
      daqiri_xdp_counts c = i.program->counts(slot);
      const std::string p = "flow_" + i.slots[slot] + "_";
      s.xstats.emplace_back(p + "redirected", c.redirected);
      s.xstats.emplace_back(p + "no_socket", c.no_socket);
      s.xstats.emplace_back(p + "other_queue", c.other_queue);
    }
    s.xstats.emplace_back("passed_to_kernel", i.program->counts(DAQIRI_XDP_MAX_RULES).no_socket);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace daqiri::backends::xdp
