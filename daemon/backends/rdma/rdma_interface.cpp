#include "backends/rdma/rdma_interface.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "dataplane/receive_clock.hpp"

namespace daqiri::backends::rdma {
namespace {

using dataplane::bump;

constexpr int kResolveTimeoutMs = 2000;
constexpr int kCqSize = int(RdmaInterface::kMaxConnections) *
                        int(RdmaInterface::kRecvDepth + RdmaInterface::kSendDepth);
constexpr uint32_t kRepostBatch = 16;  // post RECVs in chains of at least this many
// An int, not the enum: ibv_reg_mr's macro mixes it with another enum type.
constexpr int kLocalWrite = IBV_ACCESS_LOCAL_WRITE;

// Work request ids: which connection (and which life of it) and which queue.
constexpr uint64_t kSendBit = uint64_t{1} << 63;
uint64_t wr_id(bool send, size_t slot, uint32_t generation, uint32_t index) {
  return (send ? kSendBit : 0) | uint64_t(slot) << 56 | uint64_t(generation & 0xffffff) << 32 |
         index;
}
size_t wr_slot(uint64_t id) {
  return (id >> 56) & 0x7f;
}
uint32_t wr_generation(uint64_t id) {
  return uint32_t(id >> 32) & 0xffffff;
}

bool set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

int access_flags(const config::MemoryRegionConfig& region) {
  int access = kLocalWrite;
  for (const auto& a : region.access) {
    if (a == "rdma_write") access |= IBV_ACCESS_REMOTE_WRITE;
    if (a == "rdma_read") access |= IBV_ACCESS_REMOTE_READ;
  }
  return access;
}

}  // namespace

Result<std::unique_ptr<RdmaInterface>> RdmaInterface::create(const config::InterfaceConfig& itf,
                                                             uint32_t ipv4, uint32_t batch) {
  config::RdmaConfig rc = itf.rdma.value_or(config::RdmaConfig{});
  std::unique_ptr<RdmaInterface> r(new RdmaInterface(itf, batch));
  r->address_ = ipv4;
  r->port_ = rc.port;
  std::string where = "interface \"" + itf.name + "\": ";

  r->channel_.reset(rdma_create_event_channel());
  if (!r->channel_) {
    int err = errno;
    if (err == ENODEV || err == ENOENT) {
      return fail(
          ErrorCode::kFailedPrecondition,
          where + "this host has no RDMA devices (/dev/infiniband/rdma_cm: " + std::strerror(err) +
              "; load the NIC's RDMA driver and rdma_ucm, or Soft-RoCE: modprobe "
              "rdma_rxe && rdma link add rxe0 type rxe netdev IFNAME)");
    }
    return fail_errno(where + "rdma_create_event_channel", err);
  }
  if (!set_nonblocking(r->channel_->fd)) return fail_errno(where + "CM channel O_NONBLOCK");
  bool server = r->mode_ == config::RdmaConfig::Mode::kServer;
  core::Endpoint local{r->address_, server ? r->port_ : uint16_t{0}};
  std::string bind_to_text = local.to_string();
  auto bound = r->bound_id(local.port, nullptr);
  if (!bound) {
    int err = errno;
    return fail(err == EADDRINUSE ? ErrorCode::kFailedPrecondition : ErrorCode::kInternal,
                where + "cannot bind RDMA CM to " + bind_to_text + ": " + std::strerror(err) +
                    " (is there an RDMA device on the netdev with this address? `rdma link`)",
                "address");
  }
  r->bound_ = std::move(*bound);
  rdma_cm_id* id = r->bound_.get();
  if (id->verbs == nullptr) {
    return fail(ErrorCode::kFailedPrecondition,
                where + "no RDMA device owns " + itf.address +
                    " (`rdma link` lists devices; for Soft-RoCE: rdma link add rxe0 type rxe "
                    "netdev IFNAME)",
                "address");
  }
  if (server && rdma_listen(id, int(kMaxConnections)) != 0) {
    return fail_errno(where + "rdma_listen on " + bind_to_text);
  }
  r->context_ = id->verbs;
  r->device_ = ibv_get_device_name(r->context_->device);
  ibv_device_attr attr{};
  if (ibv_query_device(r->context_, &attr) != 0) return fail_errno(where + "ibv_query_device");
  ibv_port_attr port{};
  if (ibv_query_port(r->context_, id->port_num, &port) != 0) {
    return fail_errno(where + "ibv_query_port");
  }
  r->max_message_ = port.max_msg_sz;
  // UC has no READ, so no responder resources.
  r->rd_atomic_ =
      r->qp_type_ == IBV_QPT_UC
          ? uint8_t{0}
          : static_cast<uint8_t>(std::min({attr.max_qp_rd_atom, attr.max_qp_init_rd_atom, 16}));
  r->pd_.reset(ibv_alloc_pd(r->context_));
  if (!r->pd_) return fail_errno(where + "ibv_alloc_pd on " + r->device_);
  r->completions_.reset(ibv_create_comp_channel(r->context_));
  if (!r->completions_) return fail_errno(where + "ibv_create_comp_channel");
  if (!set_nonblocking(r->completions_->fd) || !set_nonblocking(r->context_->async_fd)) {
    return fail_errno(where + "O_NONBLOCK on the completion or event channel");
  }
  int cqe = std::min(kCqSize, attr.max_cqe);
  r->cq_.reset(ibv_create_cq(r->context_, cqe, nullptr, r->completions_.get(), 0));
  if (!r->cq_) return fail_errno(where + "ibv_create_cq");
  spdlog::info("rdma interface {}: {} {} on {} ({})", itf.name,
               server ? "listening on" : "bound to", bind_to_text, r->device_,
               r->qp_type_ == IBV_QPT_UC ? "UC" : "RC");
  return r;
}

RdmaInterface::RdmaInterface(const config::InterfaceConfig& itf, uint32_t batch)
    : name_(itf.name),
      mode_(itf.rdma.value_or(config::RdmaConfig{}).mode),
      qp_type_(itf.rdma.value_or(config::RdmaConfig{}).transport ==
                       config::RdmaConfig::Transport::kUc
                   ? IBV_QPT_UC
                   : IBV_QPT_RC),
      batch_(std::min<uint32_t>(batch, 256)),
      flows_(std::make_unique<const Flows>()) {}

RdmaInterface::~RdmaInterface() {
  // Queue pairs before the CQ and PD they use; buffers go back to pools and TX rings that
  // still exist (the data plane destroys interfaces before flows and attachments).
  uint64_t now = dataplane::monotonic_ns();
  for (auto& c : conns_) {
    if (c.state != State::kFree) teardown(c, now);
  }
}

std::vector<int> RdmaInterface::fds() const {
  return {channel_->fd, completions_->fd, context_->async_fd};
}

std::optional<CmId> RdmaInterface::bound_id(uint16_t port, void* context) {
  sockaddr_in local = ipv4_address(address_, port);
  rdma_cm_id* id = nullptr;
  if (qp_type_ == IBV_QPT_RC) {
    if (rdma_create_id(channel_.get(), &id, context, RDMA_PS_TCP) != 0) return std::nullopt;
  } else {
    // librdmacm's rdma_create_id makes every id of RDMA_PS_IB an RC one, and the kernel's CM
    // then sets RC attributes on the queue pair. rdma_create_ep takes the queue pair type;
    // its id is synchronous until it moves to our channel.
    rdma_addrinfo ai{};
    ai.ai_flags = RAI_PASSIVE;
    ai.ai_family = AF_INET;
    ai.ai_qp_type = IBV_QPT_UC;
    ai.ai_port_space = RDMA_PS_IB;
    ai.ai_src_addr = reinterpret_cast<sockaddr*>(&local);
    ai.ai_src_len = sizeof(local);
    if (rdma_create_ep(&id, &ai, nullptr, nullptr) != 0) return std::nullopt;
    if (rdma_migrate_id(id, channel_.get()) != 0) {
      int err = errno;
      rdma_destroy_ep(id);
      errno = err;
      return std::nullopt;
    }
    id->context = context;
    return CmId(id);
  }
  CmId owned(id);
  if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&local)) != 0) {
    int err = errno;  // the caller reports it; destroying the id may change errno
    owned.reset();
    errno = err;
    return std::nullopt;
  }
  return owned;
}

// ---- control side ------------------------------------------------------------------------

Result<std::unique_ptr<RdmaRxFlow>> RdmaInterface::add_flow(
    const core::Flow& flow, const config::MemoryRegionConfig& region, memory::PageArena* arena,
    const dataplane::Epoch& epoch, const memory::DeviceMemory* device) {
  bool server = mode_ == config::RdmaConfig::Mode::kServer;
  if (auto ok = core::check_rdma_flow(flow.match, flow.connect, server); !ok) {
    return std::unexpected(ok.error());
  }
  int access = access_flags(region);
  bool window = (access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)) != 0;
  auto f = RdmaRxFlow::create(flow, region.buf_size, region.num_bufs,
                              region.kind == config::RegionKind::kHuge, arena,
                              window ? region.num_bufs : 0, device);
  if (!f) return std::unexpected(f.error());
  auto rec = std::make_unique<FlowRecord>();
  rec->flow = f->get();
  memory::BufferPool& pool = (*f)->pool();
  size_t pool_bytes = uint64_t{pool.buf_size()} * pool.num_bufs();
  if (device != nullptr) {
    // GPUDirect RDMA: the NIC maps the GPU memory through its dma-buf; work requests name it
    // by its device address (the iova).
    rec->pool_mr.reset(ibv_reg_dmabuf_mr(pd_.get(), 0, pool_bytes,
                                         reinterpret_cast<uintptr_t>(pool.buffer(0)),
                                         device->dmabuf_fd, kLocalWrite));
    if (!rec->pool_mr) {
      int err = errno;
      return fail(ErrorCode::kFailedPrecondition,
                  "flow \"" + flow.name + "\": ibv_reg_dmabuf_mr of its pool in GPU memory on " +
                      device_ + ": " + std::strerror(err) +
                      " (the device cannot DMA into GPU memory: GPUDirect RDMA needs a NIC "
                      "such as ConnectX with dma-buf support)",
                  "gpudirect");
    }
  } else {
    rec->pool_mr.reset(ibv_reg_mr(pd_.get(), pool.buffer(0), pool_bytes, kLocalWrite));
  }
  if (!rec->pool_mr) return fail_errno("flow \"" + flow.name + "\": ibv_reg_mr of its pool");
  if (memory::BufferPool* w = (*f)->remote_window()) {
    size_t bytes = uint64_t{w->buf_size()} * w->num_bufs();
    rec->window_mr.reset(ibv_reg_mr(pd_.get(), w->buffer(0), bytes, access));
    if (!rec->window_mr) {
      return fail_errno("flow \"" + flow.name + "\": ibv_reg_mr of its remote window");
    }
    rec->ours.window_addr = reinterpret_cast<uintptr_t>(w->buffer(0));
    rec->ours.window_rkey = rec->window_mr->rkey;
    rec->ours.slot_size = w->buf_size();
    rec->ours.slots = w->num_bufs();
    bool readable = (access & IBV_ACCESS_REMOTE_READ) != 0 && qp_type_ == IBV_QPT_RC;
    rec->ours.access = uint16_t(((access & IBV_ACCESS_REMOTE_WRITE) ? kWindowWritable : 0) |
                                (readable ? kWindowReadable : 0));
  }
  dataplane::publish_added(flows_, rec.get(), epoch);
  flow_records_[f->get()] = std::move(rec);
  return f;
}

void RdmaInterface::close_flow(RdmaRxFlow* flow, const dataplane::Epoch& epoch) {
  flow->closing.store(true, std::memory_order_release);
  epoch.wake();  // its poller may be asleep for up to a second
}

dataplane::Grace RdmaInterface::remove_closed_flow(RdmaRxFlow* flow,
                                                   const dataplane::Epoch& epoch) {
  auto it = flow_records_.find(flow);
  if (it == flow_records_.end()) return {};
  dataplane::Grace g = dataplane::publish_removed(flows_, it->second.get(), epoch);
  dataplane::dispose(g, std::move(it->second));
  flow_records_.erase(it);
  return g;
}

Result<> RdmaInterface::add(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) {
  auto rec = std::make_unique<TxRecord>();
  rec->a = a;
  // LOCAL_WRITE: a READ's data lands in the client's buffer.
  rec->mr.reset(ibv_reg_mr(pd_.get(), a->buffers().data(), a->buffers().size(), kLocalWrite));
  if (!rec->mr) return fail_errno("ibv_reg_mr of a TX attachment's buffers");
  tx_.add(a, std::move(rec), epoch);
  return {};
}

dataplane::Grace RdmaInterface::remove(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) {
  return tx_.remove(a, epoch);
}

dataplane::NicStats RdmaInterface::stats() const {
  dataplane::NicStats s;
  s.interface = name_;
  s.driver = "rdma:" + device_;
  s.link = counters_.established.load(std::memory_order_relaxed) > 0 ? "up" : "down";
  auto v = [](const auto& c) { return uint64_t(c.load(std::memory_order_relaxed)); };
  const Counters& c = counters_;
  s.rx_packets = v(c.messages);
  s.rx_bytes = v(c.message_bytes);
  s.tx_packets = v(c.completed);
  s.tx_bytes = v(c.completed_bytes);
  s.rx_errors = v(c.window_overruns) + v(c.bad_immediates);
  s.tx_errors = v(c.completion_errors) + v(c.tx_refused);
  s.xstats = {{"connections", v(c.established)},
              {"connections_opened", v(c.opened)},
              {"connections_closed", v(c.closed)},
              {"connect_failures", v(c.connect_failures)},
              {"connections_rejected", v(c.rejected)},
              {"completion_errors", v(c.completion_errors)},
              {"remote_access_errors", v(c.remote_access_errors)},
              {"qp_errors", v(c.qp_errors)},
              {"cq_errors", v(c.cq_errors)},
              {"device_events", v(c.device_events)},
              {"tx_refused", v(c.tx_refused)},
              {"window_overruns", v(c.window_overruns)},
              {"bad_immediates", v(c.bad_immediates)}};
  return s;
}

std::string RdmaInterface::state() const {
  return std::to_string(counters_.established.load(std::memory_order_relaxed)) + " connections";
}

// ---- poller side -------------------------------------------------------------------------

bool RdmaInterface::poll() {
  const Flows& flows = flows_.load();
  for (FlowRecord* f : flows) {
    if (!f->flow->released.load(std::memory_order_relaxed)) f->flow->fanout().begin();
  }
  // Completions first: a connection that the slow path below tears down fails the sends still
  // in flight, so those the CQ already holds must be counted as what they were (a peer that
  // disconnects right after our last SEND arrived, its completion and the CM event woke us
  // together).
  bool work = poll_completions();
  uint64_t now = 0;
  // Connection and device events, and the completion channel, are rare and cost syscalls:
  // every 64th poll, busy or idle (a woken poller spins 2048 polls before it parks again).
  bool slow_path = (++tick_ & 63) == 0;
  if (slow_path) {
    now = dataplane::monotonic_ns();
    handle_device_events();
    handle_cm_events(now);
    for (FlowRecord* f : flows) {
      RdmaRxFlow* flow = f->flow;
      if (flow->released.load(std::memory_order_relaxed)) continue;
      if (flow->closing.load(std::memory_order_acquire)) {
        for (auto& c : conns_) {
          if (c.state != State::kFree && c.flow == f) teardown(c, now);
        }
        flow->released.store(true, std::memory_order_release);
        continue;
      }
      if (flow->flow().connect && f->redial.due(now) && !has_connection(*f)) dial(*f, now);
    }
  }
  if (armed_ && slow_path) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(completions_.get(), &cq, &ctx) == 0) {
      ibv_ack_cq_events(cq, 1);
      armed_ = false;
    }
  }
  work |= drain_tx();
  for (auto& c : conns_) {
    if (c.state == State::kFree) continue;
    if (c.failed) {
      if (now == 0) now = dataplane::monotonic_ns();
      teardown(c, now);
      continue;
    }
    post_receives(c);
  }
  for (FlowRecord* f : flows) {
    if (!f->flow->released.load(std::memory_order_relaxed)) {
      f->flow->fanout().publish();
      f->flow->counters.on_loan.store(f->flow->pool().num_bufs() - f->flow->pool().available(),
                                      std::memory_order_relaxed);
    }
  }
  if (work) {
    idle_ = 0;
  } else if (++idle_ >= 64 && !armed_) {
    // Quiet: ask for a completion event so that a parked poller wakes on the next one.
    armed_ = ibv_req_notify_cq(cq_.get(), 0) == 0;
  }
  return work;
}

void RdmaInterface::handle_device_events() {
  ibv_async_event ev{};
  while (ibv_get_async_event(context_, &ev) == 0) {
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
        bump(counters_.qp_errors);
        for (auto& c : conns_) {
          if (c.state != State::kFree && c.id && c.id->qp == ev.element.qp) c.failed = true;
        }
        break;
      case IBV_EVENT_CQ_ERR:
        // Sized for every work request that can be outstanding, so this means a bug of ours.
        bump(counters_.cq_errors);
        spdlog::error("rdma interface {}: completion queue overrun", name_);
        break;
      default:
        bump(counters_.device_events);
        break;
    }
    ibv_ack_async_event(&ev);
  }
}

void RdmaInterface::handle_cm_events(uint64_t now_ns) {
  rdma_cm_event* ev = nullptr;
  while (rdma_get_cm_event(channel_.get(), &ev) == 0) {
    // Copy what we need and acknowledge first: destroying an id waits for its events' acks.
    rdma_cm_event_type type = ev->event;
    rdma_cm_id* id = ev->id;
    int status = ev->status;
    std::optional<Handshake> peer;
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST || type == RDMA_CM_EVENT_ESTABLISHED) {
      peer = parse_handshake(ev->param.conn.private_data, ev->param.conn.private_data_len);
    }
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      on_connect_request(id, peer);
      continue;
    }
    auto* c = static_cast<Connection*>(id->context);
    if (c == nullptr || c->state == State::kFree || c->id.get() != id) {
      if (type == RDMA_CM_EVENT_DEVICE_REMOVAL) bump(counters_.device_events);
      continue;
    }
    switch (type) {
      case RDMA_CM_EVENT_ADDR_RESOLVED:
        if (rdma_resolve_route(id, kResolveTimeoutMs) != 0) {
          bump(counters_.connect_failures);
          teardown(*c, now_ns);
        }
        break;
      case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        if (!open_queue_pair(*c)) {
          bump(counters_.connect_failures);
          teardown(*c, now_ns);
          break;
        }
        rdma_conn_param p{};
        p.private_data = &c->flow->ours;
        p.private_data_len = sizeof(Handshake);
        p.responder_resources = rd_atomic_;
        p.initiator_depth = rd_atomic_;
        p.retry_count = 7;
        p.rnr_retry_count = 7;  // a receiver without posted RECVs holds us back, forever
        c->state = State::kConnecting;
        if (rdma_connect(id, &p) != 0) {
          bump(counters_.connect_failures);
          teardown(*c, now_ns);
        }
        break;
      }
      case RDMA_CM_EVENT_ESTABLISHED:
        if (c->flow->flow->flow().connect) {
          c->peer = peer;  // the server's, in its reply
          c->stream = next_stream();
        }
        c->state = State::kEstablished;
        c->flow->redial.connected();
        bump(counters_.opened);
        bump(counters_.established);
        spdlog::info("rdma interface {}: connection {} of flow {} established ({})", name_,
                     c->stream, c->flow->flow->flow().name,
                     c->peer ? "daqirid peer, window of " + std::to_string(c->peer->slots)
                             : std::string("plain verbs peer"));
        break;
      case RDMA_CM_EVENT_ADDR_ERROR:
      case RDMA_CM_EVENT_ROUTE_ERROR:
      case RDMA_CM_EVENT_CONNECT_ERROR:
      case RDMA_CM_EVENT_UNREACHABLE:
      case RDMA_CM_EVENT_REJECTED:
        bump(counters_.connect_failures);
        spdlog::debug("rdma interface {}: connection of flow {}: {} (status {})", name_,
                      c->flow->flow->flow().name, rdma_event_str(type), status);
        teardown(*c, now_ns);
        break;
      case RDMA_CM_EVENT_DISCONNECTED:
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
        teardown(*c, now_ns);
        break;
      default:
        break;
    }
  }
}

void RdmaInterface::on_connect_request(rdma_cm_id* id, const std::optional<Handshake>& peer) {
  sockaddr* sa = rdma_get_peer_addr(id);
  uint32_t from =
      sa->sa_family == AF_INET ? ntohl(reinterpret_cast<sockaddr_in*>(sa)->sin_addr.s_addr) : 0;
  // The flow whose ipv4_src takes the peer, else the catch-all (match any).
  FlowRecord* flow = nullptr;
  for (FlowRecord* f : flows_.load()) {
    const core::FlowMatch& m = f->flow->flow().match;
    if (f->flow->closing.load(std::memory_order_relaxed)) continue;
    if (m.ipv4_src && m.ipv4_src->contains(from)) {
      flow = f;
      break;
    }
    if (m.any) flow = f;
  }
  int slot = free_slot();
  if (flow == nullptr || slot < 0 || id->verbs != context_) {
    bump(counters_.rejected);
    spdlog::warn("rdma interface {}: refused a connection from {}: {}", name_,
                 core::Ipv4Prefix{from, 32}.to_string(),
                 flow == nullptr ? "no flow matches it"
                 : slot < 0      ? "all " + std::to_string(kMaxConnections) + " connections in use"
                                 : "it arrived on another device");
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return;
  }
  Connection& c = conns_[size_t(slot)];
  c.id.reset(id);
  id->context = &c;
  c.flow = flow;
  c.peer = peer;
  c.stream = next_stream();
  c.state = State::kConnecting;
  if (!open_queue_pair(c)) {
    rdma_reject(id, nullptr, 0);
    bump(counters_.rejected);
    teardown(c, dataplane::monotonic_ns());
    return;
  }
  rdma_conn_param p{};
  p.private_data = &flow->ours;
  p.private_data_len = sizeof(Handshake);
  p.responder_resources = rd_atomic_;
  p.initiator_depth = rd_atomic_;
  p.rnr_retry_count = 7;
  if (rdma_accept(id, &p) != 0) {
    bump(counters_.rejected);
    teardown(c, dataplane::monotonic_ns());
  }
}

void RdmaInterface::dial(FlowRecord& f, uint64_t now_ns) {
  int slot = free_slot();
  if (slot < 0) return f.redial.failed(now_ns);
  Connection& c = conns_[size_t(slot)];
  auto id = bound_id(0, &c);
  if (!id) return f.redial.failed(now_ns);
  c.id = std::move(*id);
  c.flow = &f;
  c.stream = 0;  // numbered when established: failed dials use up no numbers
  c.state = State::kResolving;
  sockaddr_in dst = ipv4_address(f.flow->flow().connect->ipv4, f.flow->flow().connect->port);
  if (rdma_resolve_addr(c.id.get(), nullptr, reinterpret_cast<sockaddr*>(&dst),
                        kResolveTimeoutMs) != 0) {
    bump(counters_.connect_failures);
    teardown(c, now_ns);
  }
}

bool RdmaInterface::open_queue_pair(Connection& c) {
  if (c.id->verbs != context_) return false;
  ibv_qp_init_attr attr{};
  attr.send_cq = cq_.get();
  attr.recv_cq = cq_.get();
  attr.qp_type = qp_type_;
  attr.sq_sig_all = 1;
  attr.cap.max_send_wr = kSendDepth;
  attr.cap.max_recv_wr = kRecvDepth;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  if (rdma_create_qp(c.id.get(), pd_.get(), &attr) != 0) {
    spdlog::warn("rdma interface {}: rdma_create_qp: {}", name_, std::strerror(errno));
    return false;
  }
  post_receives(c);  // before the peer can send
  return true;
}

void RdmaInterface::post_receives(Connection& c) {
  if (c.id == nullptr || c.id->qp == nullptr) return;
  RdmaRxFlow& flow = *c.flow->flow;
  uint32_t want = kRecvDepth - c.recvs.size();
  if (want < kRepostBatch && c.recvs.size() > 0) return;
  // Blocking backpressure: never more RECVs posted than the fullest such client has ring
  // slots (each may become a descriptor); without RECVs, RC flow control (receiver not ready)
  // holds the sender back.
  if (uint32_t room = flow.fanout().blocking_room(); room != UINT32_MAX) {
    want = room > c.flow->posted ? std::min(want, room - c.flow->posted) : 0;
    if (want == 0) {
      (void)flow.fanout().must_wait(c.flow->posted + 1);  // counts the stall
      return;
    }
  }
  memory::BufferPool& pool = flow.pool();
  uint32_t got = pool.alloc(bufs_.data(), want);
  if (got == 0) return;
  std::array<ibv_recv_wr, kRecvDepth> wrs{};
  std::array<ibv_sge, kRecvDepth> sges{};
  size_t slot = size_t(&c - conns_.data());
  for (uint32_t i = 0; i < got; ++i) {
    sges[i] = {reinterpret_cast<uintptr_t>(pool.buffer(bufs_[i])), pool.buf_size(),
               c.flow->pool_mr->lkey};
    wrs[i].wr_id = wr_id(false, slot, c.generation, bufs_[i]);
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].next = i + 1 < got ? &wrs[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(c.id->qp, wrs.data(), &bad);
  uint32_t posted = rc == 0 ? got : uint32_t(bad - wrs.data());
  for (uint32_t i = 0; i < got; ++i) {
    if (i < posted) {
      c.recvs.push(bufs_[i]);
    } else {
      pool.set_refs(bufs_[i], 0);
    }
  }
  c.flow->posted += posted;
}

bool RdmaInterface::poll_completions() {
  ibv_wc wc[32];
  int n = ibv_poll_cq(cq_.get(), 32, wc);
  if (n <= 0) return false;
  uint64_t stamp = dataplane::ReceiveClock::now_ns();
  for (int i = 0; i < n; ++i) {
    const ibv_wc& w = wc[i];
    Connection& c = conns_[wr_slot(w.wr_id)];
    if (c.state == State::kFree || (c.generation & 0xffffff) != wr_generation(w.wr_id)) continue;
    bool ok = w.status == IBV_WC_SUCCESS;
    if (!ok && w.status != IBV_WC_WR_FLUSH_ERR) {
      bump(counters_.completion_errors);
      if (w.status == IBV_WC_REM_ACCESS_ERR || w.status == IBV_WC_REM_INV_REQ_ERR) {
        bump(counters_.remote_access_errors);
      }
      spdlog::debug("rdma interface {}: connection {}: {}", name_, c.stream,
                    ibv_wc_status_str(w.status));
      c.failed = true;  // the queue pair is in error: reconnect
    }
    if (w.wr_id & kSendBit) {
      InFlight f = c.sends.pop();
      if (ok) {
        bump(counters_.completed);
        bump(counters_.completed_bytes, f.desc.length);
        bump(f.tx->a->counters.packets);
        bump(f.tx->a->counters.bytes, f.desc.length);
      } else {
        bump(f.tx->a->counters.send_errors);
      }
      f.tx->a->complete(&f.desc, 1, !ok);
      --f.tx->in_flight;
      continue;
    }
    uint32_t buf = c.recvs.pop();
    --c.flow->posted;
    if (ok && w.opcode == IBV_WC_RECV) {
      deliver(c, c.flow->flow->pool(), buf, w.byte_len, DAQIRI_DESC_MESSAGE, stamp);
      continue;
    }
    c.flow->flow->pool().set_refs(buf, 0);
    if (ok && w.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      deliver_window(c, ntohl(w.imm_data), w.byte_len, stamp);
    }
  }
  return true;
}

void RdmaInterface::deliver_window(Connection& c, uint32_t slot, uint32_t length, uint64_t now_ns) {
  memory::BufferPool* window = c.flow->flow->remote_window();
  if (window == nullptr || slot >= window->num_bufs() || length > window->buf_size()) {
    bump(counters_.bad_immediates);
    return;
  }
  if (window->refs(slot) != 0) {
    // The peer wrote into a slot clients still hold: their data is already overwritten; the
    // descriptor they have stands for both writes.
    bump(counters_.window_overruns);
    return;
  }
  deliver(c, *window, slot, length, DAQIRI_DESC_MESSAGE | DAQIRI_DESC_REMOTE_WRITE, now_ns);
}

void RdmaInterface::deliver(Connection& c, memory::BufferPool& pool, uint32_t buffer,
                            uint32_t length, uint16_t flags, uint64_t now_ns) {
  RdmaRxFlow& flow = *c.flow->flow;
  daqiri_rx_desc d{};
  d.offset = pool.offset(buffer);
  d.timestamp_ns = now_ns;
  d.length = length;
  d.flow_id = flow.flow().id;
  d.flags = flags;
  d.stream = c.stream;
  uint16_t refs = flow.fanout().deliver(d, buffer, &pool);
  if (refs == 0) {
    bump(flow.fanout().active() == 0 ? flow.counters.no_attachment : flow.counters.rings_full);
  }
  pool.set_refs(buffer, refs);
  bump(flow.counters.packets);
  bump(flow.counters.bytes, length);
  bump(counters_.messages);
  bump(counters_.message_bytes, length);
}

bool RdmaInterface::arm_wakeups() {
  return dataplane::arm_wakeups(tx_.load(), attachment_of);
}

void RdmaInterface::disarm_wakeups() {
  dataplane::disarm_wakeups(tx_.load(), attachment_of);
  // Whatever woke the poller (a CM or device event, a dial falling due) is looked at in the
  // slow path: the next poll takes it.
  tick_ |= 63;
}

bool RdmaInterface::needs_timed_wakeup() const {
  if (!armed_ || dataplane::has_client_without_kicks(tx_.load(), attachment_of)) return true;
  return std::ranges::any_of(flows_.load(), [](const FlowRecord* f) {
    RdmaRxFlow* flow = f->flow;
    return !flow->released.load(std::memory_order_relaxed) && flow->fanout().holds_buffers();
  });
}

uint64_t RdmaInterface::wakeup_due_ns() const {
  uint64_t due = kNoWakeupDue;
  for (const FlowRecord* f : flows_.load()) {
    const RdmaRxFlow* flow = f->flow;
    if (!flow->released.load(std::memory_order_relaxed) && flow->flow().connect &&
        !has_connection(*f)) {
      due = std::min(due, f->redial.due_ns());
    }
  }
  return due;
}

bool RdmaInterface::drain_tx() {
  bool work = false;
  for (TxRecord* t : tx_.load()) {
    dataplane::TxAttachment& a = *t->a;
    if (a.lifecycle.released.load(std::memory_order_relaxed)) continue;
    if (a.lifecycle.closing.load(std::memory_order_acquire)) {
      // Its buffers stay the NIC's until their work completes (or their connection dies).
      if (t->in_flight == 0) a.detach();
      continue;
    }
    if (a.lifecycle.violated.load(std::memory_order_relaxed)) continue;
    uint32_t room = batch_;
    for (const auto& c : conns_) {
      if (c.state == State::kEstablished) room = std::min(room, kSendDepth - c.sends.size());
    }
    uint32_t n = a.take(descs_.data(), room);
    for (uint32_t i = 0; i < n; ++i)
      post(*t, descs_[i]);
    work |= n > 0;
  }
  return work;
}

void RdmaInterface::refuse(TxRecord& t, const daqiri_tx_desc& d) {
  bump(counters_.tx_refused);
  bump(t.a->counters.send_errors);
  t.a->complete(&d, 1, true);
}

void RdmaInterface::post(TxRecord& t, const daqiri_tx_desc& d) {
  Connection* c = find_stream(uint16_t(d.flags >> DAQIRI_TX_CONNECTION_SHIFT));
  // A message longer than the port carries would only come back failed: refused here.
  if (c == nullptr || c->sends.full() || d.length > max_message_) return refuse(t, d);
  auto op = static_cast<daqiri_rdma_op>(d.flags & DAQIRI_TX_OP_MASK);
  if (op == DAQIRI_RDMA_READ && qp_type_ == IBV_QPT_UC) return refuse(t, d);
  ibv_send_wr wr{};
  if (op != DAQIRI_RDMA_SEND) {
    uint16_t need = op == DAQIRI_RDMA_READ ? kWindowReadable : kWindowWritable;
    const std::optional<Handshake>& p = c->peer;
    if (!p || (p->access & need) == 0 || d.remote >= p->slots || d.length > p->slot_size) {
      return refuse(t, d);
    }
    wr.wr.rdma.remote_addr = p->window_addr + uint64_t{d.remote} * p->slot_size;
    wr.wr.rdma.rkey = p->window_rkey;
  }
  switch (op) {
    case DAQIRI_RDMA_SEND:
      wr.opcode = IBV_WR_SEND;
      break;
    case DAQIRI_RDMA_WRITE:
      wr.opcode = IBV_WR_RDMA_WRITE;
      break;
    case DAQIRI_RDMA_WRITE_IMM:
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.imm_data = htonl(d.remote);
      break;
    case DAQIRI_RDMA_READ:
      wr.opcode = IBV_WR_RDMA_READ;
      break;
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(t.a->buffer(d.buffer)), d.length, t.mr->lkey};
  wr.wr_id = wr_id(true, size_t(c - conns_.data()), c->generation, d.buffer);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(c->id->qp, &wr, &bad) != 0) return refuse(t, d);
  c->sends.push({&t, d});
  ++t.in_flight;
}

RdmaInterface::Connection* RdmaInterface::find_stream(uint16_t stream) {
  for (auto& c : conns_) {
    if (c.state == State::kEstablished && (stream == 0 || c.stream == stream)) return &c;
  }
  return nullptr;
}

uint16_t RdmaInterface::next_stream() {
  uint16_t s = next_stream_++;
  if (next_stream_ == 0) next_stream_ = 1;  // 0 means "the first connected" in TX descriptors
  return s;
}

bool RdmaInterface::has_connection(const FlowRecord& f) const {
  return std::any_of(conns_.begin(), conns_.end(),
                     [&f](const Connection& c) { return c.state != State::kFree && c.flow == &f; });
}

int RdmaInterface::free_slot() const {
  for (size_t i = 0; i < conns_.size(); ++i) {
    if (conns_[i].state == State::kFree) return int(i);
  }
  return -1;
}

void RdmaInterface::teardown(Connection& c, uint64_t now_ns) {
  if (c.state == State::kEstablished) {
    bump(counters_.closed);
    counters_.established.store(counters_.established.load(std::memory_order_relaxed) - 1,
                                std::memory_order_relaxed);
    spdlog::info("rdma interface {}: connection {} of flow {} closed", name_, c.stream,
                 c.flow->flow->flow().name);
  }
  if (c.id && c.id->qp != nullptr) {
    rdma_disconnect(c.id.get());
    rdma_destroy_qp(c.id.get());
  }
  c.id.reset();
  // The queue pair is gone and its completions with it: everything it held comes back now.
  memory::BufferPool& pool = c.flow->flow->pool();
  c.flow->posted -= c.recvs.size();
  while (c.recvs.size() > 0)
    pool.set_refs(c.recvs.pop(), 0);
  while (c.sends.size() > 0) {
    InFlight f = c.sends.pop();
    bump(f.tx->a->counters.send_errors);
    f.tx->a->complete(&f.desc, 1, true);
    --f.tx->in_flight;
  }
  if (c.flow->flow->flow().connect) {
    c.flow->redial.failed(now_ns);
  }
  c.flow = nullptr;
  c.peer.reset();
  c.failed = false;
  ++c.generation;
  c.state = State::kFree;
}

}  // namespace daqiri::backends::rdma
