#include "control/control_service.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <set>

#include "backends/registry.hpp"
#include "build_info.hpp"
#include "control/proto_convert.hpp"
#include "daqiri/v1/stats_reflection.hpp"
#include "daqiri/v1/status_code.hpp"
#include "system/host_info.hpp"

namespace daqiri::control {

grpc::Status to_status(const Error& error) {
  return {v1::to_grpc_code(error.code), error.message};
}

namespace {

class CallGuard {
 public:
  explicit CallGuard(std::atomic<int>& n) : n_(n) { n_.fetch_add(1, std::memory_order_acq_rel); }
  ~CallGuard() { n_.fetch_sub(1, std::memory_order_acq_rel); }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;

 private:
  std::atomic<int>& n_;
};

}  // namespace

ControlService::ControlService(const ControlTargets& targets, const ConnectionRegistry& connections)
    : model_(targets.model),
      policy_(targets.policy),
      data_plane_(targets.data_plane),
      sessions_(targets.sessions),
      captures_(targets.captures),
      cdi_(targets.cdi),
      connections_(connections) {}

Result<PeerIdentity> ControlService::authorize(grpc::ServerContext* ctx, Role need,
                                               std::string_view action) const {
  auto peer = connections_.lookup(ctx->peer());
  if (!peer) {
    return fail(ErrorCode::kPermissionDenied,
                "the daemon cannot identify this connection (" + ctx->peer() + ")");
  }
  if (auto ok = policy_.require(*peer, need, action); !ok) {
    spdlog::info("denied: {}", ok.error().message);
    return std::unexpected(ok.error());
  }
  return *peer;
}

grpc::Status ControlService::GetInfo(grpc::ServerContext* ctx, const v1::GetInfoRequest*,
                                     v1::Info* resp) {
  CallGuard guard(in_flight_);
  auto peer = authorize(ctx, Role::kClient, "read daemon info");
  if (!peer) return to_status(peer.error());
  resp->set_version(build::kVersion);
  auto feature = [resp](const char* name, bool on, const char* detail) {
    auto* f = resp->add_build_features();
    f->set_name(name);
    f->set_enabled(on);
    f->set_detail(detail);
  };
  feature("dpdk", build::kHaveDpdk, build::kDpdkDetail);
  feature("rdma", build::kHaveRdma, build::kRdmaDetail);
  feature("cuda", build::kHaveCuda, build::kCudaDetail);
  feature("xdp", build::kHaveXdp, build::kXdpDetail);
  for (const auto& b : backends::built_backends())
    resp->add_backends(config::to_string(b.kind));
  for (const auto& g : data_plane_.gpus()) {
    auto* gpu = resp->add_gpus();
    gpu->set_index(g.index);
    gpu->set_name(g.name);
    gpu->set_memory_bytes(g.memory_bytes);
    gpu->set_pci_bus_id(g.pci_bus_id);
  }
  for (const auto& h : system::probe_hugepages()) {
    auto* pool = resp->add_hugepages();
    pool->set_page_size_bytes(h.page_size);
    pool->set_total_pages(h.total);
    pool->set_free_pages(h.free);
  }
  resp->set_pid(::getpid());
  resp->set_uptime_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  resp->set_config_source(model_.config().source);
  resp->set_session_socket(sessions_.path());
  resp->set_abi_version(DAQIRI_ABI_VERSION);
  auto* caller = resp->mutable_caller();
  caller->set_uid(peer->uid);
  caller->set_gid(peer->gid);
  caller->set_pid(peer->pid);
  caller->set_user(peer->user);
  caller->set_transport(peer->transport == PeerIdentity::Transport::kTcp ? "tcp" : "unix");
  switch (policy_.role_of(*peer)) {
    case Role::kNone:
      caller->set_role(v1::ROLE_NONE);
      break;
    case Role::kClient:
      caller->set_role(v1::ROLE_CLIENT);
      break;
    case Role::kAdmin:
      caller->set_role(v1::ROLE_ADMIN);
      break;
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::ListInterfaces(grpc::ServerContext* ctx,
                                            const v1::ListInterfacesRequest*,
                                            v1::ListInterfacesResponse* resp) {
  CallGuard guard(in_flight_);
  if (auto peer = authorize(ctx, Role::kClient, "list interfaces"); !peer) {
    return to_status(peer.error());
  }
  for (const auto& itf : model_.config().interfaces)
    to_proto(itf, data_plane_.interface_state(itf.name), *resp->add_interfaces());
  return grpc::Status::OK;
}

grpc::Status ControlService::ListMemoryRegions(grpc::ServerContext* ctx,
                                               const v1::ListMemoryRegionsRequest*,
                                               v1::ListMemoryRegionsResponse* resp) {
  CallGuard guard(in_flight_);
  if (auto peer = authorize(ctx, Role::kClient, "list memory regions"); !peer) {
    return to_status(peer.error());
  }
  for (const auto& r : model_.config().memory_regions)
    to_proto(r, *resp->add_regions());
  return grpc::Status::OK;
}

grpc::Status ControlService::ListQueues(grpc::ServerContext* ctx, const v1::ListQueuesRequest* req,
                                        v1::ListQueuesResponse* resp) {
  CallGuard guard(in_flight_);
  auto peer = authorize(ctx, Role::kClient, "list queues");
  if (!peer) return to_status(peer.error());
  // As flows: a client sees no TX queue it may not attach to.
  const bool admin = policy_.role_of(*peer) == Role::kAdmin;
  const std::vector<uint32_t> groups(peer->groups.begin(), peer->groups.end());
  if (!req->interface().empty() && !model_.find_interface(req->interface())) {
    return to_status({ErrorCode::kNotFound, "no interface named \"" + req->interface() + "\"", {}});
  }
  for (const auto& itf : model_.config().interfaces) {
    if (!req->interface().empty() && itf.name != req->interface()) continue;
    for (const auto& q : itf.rx_queues) {
      auto* out = resp->add_queues();
      to_proto(itf, q, v1::DIRECTION_RX, *out);
      out->set_delivery(data_plane_.delivery(itf.name, q.name));
    }
    for (const auto& q : itf.tx_queues) {
      if (admin || q.clients.allows(peer->uid, peer->gid, groups))
        to_proto(itf, q, v1::DIRECTION_TX, *resp->add_queues());
    }
  }
  return grpc::Status::OK;
}

std::set<std::string> ControlService::hidden_flows(const PeerIdentity& peer) const {
  std::set<std::string> hidden;
  if (policy_.role_of(peer) == Role::kAdmin) return hidden;
  const std::vector<uint32_t> groups(peer.groups.begin(), peer.groups.end());
  for (const auto& f : model_.flows()) {
    if (!f.clients.allows(peer.uid, peer.gid, groups)) hidden.insert(f.name);
  }
  for (const auto& r : model_.config().reorders) {
    if (!r.flows.empty() && hidden.contains(r.flows.front())) hidden.insert(r.name);
  }
  return hidden;
}

grpc::Status ControlService::ListFlows(grpc::ServerContext* ctx, const v1::ListFlowsRequest* req,
                                       v1::ListFlowsResponse* resp) {
  CallGuard guard(in_flight_);
  auto peer = authorize(ctx, Role::kClient, "list flows");
  if (!peer) return to_status(peer.error());
  if (!req->interface().empty() && !model_.find_interface(req->interface())) {
    return to_status({ErrorCode::kNotFound, "no interface named \"" + req->interface() + "\"", {}});
  }
  // A client sees the flows it may attach to (a container of one flow, that one).
  const std::set<std::string> hidden = hidden_flows(*peer);
  for (const auto& f : model_.flows(req->interface())) {
    if (!hidden.contains(f.name)) to_proto(f, data_plane_.steering(f.name), *resp->add_flows());
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::ListSessions(grpc::ServerContext* ctx, const v1::ListSessionsRequest*,
                                          v1::ListSessionsResponse* resp) {
  CallGuard guard(in_flight_);
  if (auto peer = authorize(ctx, Role::kClient, "list sessions"); !peer) {
    return to_status(peer.error());
  }
  for (const auto& s : sessions_.sessions()) {
    auto* out = resp->add_sessions();
    out->set_id(s.id);
    out->set_uid(s.uid);
    out->set_pid(s.pid);
    out->set_user(s.user);
    out->set_name(s.name);
    out->set_age_seconds(s.age_seconds);
    for (const auto& a : s.attachments) {
      auto* att = out->add_attachments();
      att->set_id(a.id);
      att->set_target(a.target);
      att->set_direction(a.rx ? v1::DIRECTION_RX : v1::DIRECTION_TX);
    }
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::CreateFlow(grpc::ServerContext* ctx, const v1::CreateFlowRequest* req,
                                        v1::Flow* resp) {
  CallGuard guard(in_flight_);
  auto peer = authorize(ctx, Role::kAdmin, "create flows");
  if (!peer) return to_status(peer.error());
  auto spec = from_proto(*req);
  if (!spec) return to_status(spec.error());
  auto flow = model_.create_flow(std::move(*spec),
                                 [this](const core::Flow& f) { return data_plane_.add_flow(f); });
  if (!flow) return to_status(flow.error());
  spdlog::info("flow {} created by {}: {} -> {}/{}", flow->name, peer->describe(),
               flow->match.to_string(), flow->interface, flow->queue);
  to_proto(*flow, data_plane_.steering(flow->name), *resp);
  if (cdi_) cdi_->refresh();
  return grpc::Status::OK;
}

grpc::Status ControlService::DeleteFlow(grpc::ServerContext* ctx, const v1::DeleteFlowRequest* req,
                                        v1::DeleteFlowResponse*) {
  CallGuard guard(in_flight_);
  auto peer = authorize(ctx, Role::kAdmin, "delete flows");
  if (!peer) return to_status(peer.error());
  if (req->name().empty()) {
    return to_status({ErrorCode::kInvalidArgument, "name is required", "name"});
  }
  auto ok = model_.delete_flow(
      req->name(), [this](const core::Flow& f) { return data_plane_.remove_flow(f.name); });
  if (!ok) return to_status(ok.error());
  spdlog::info("flow {} deleted by {}", req->name(), peer->describe());
  if (cdi_) cdi_->refresh();
  return grpc::Status::OK;
}

}  // namespace daqiri::control

namespace daqiri::control {

grpc::Status ControlService::Attach(grpc::ServerContext* ctx, const v1::AttachRequest* req,
                                    v1::AttachResponse* resp) {
  CallGuard guard(in_flight_);
  auto peer = authorize(ctx, Role::kClient, "attach");
  if (!peer) return to_status(peer.error());
  session::AttachSpec spec;
  spec.session_id = req->session_id();
  switch (req->target_case()) {
    case v1::AttachRequest::kFlow:
      if (req->flow().empty()) {
        return to_status({ErrorCode::kInvalidArgument, "flow name is empty", "flow"});
      }
      spec.flow = req->flow();
      break;
    case v1::AttachRequest::kRxQueue:
      if (req->rx_queue().interface().empty() || req->rx_queue().queue().empty()) {
        return to_status(
            {ErrorCode::kInvalidArgument, "rx_queue needs an interface and a queue", "rx_queue"});
      }
      spec.rx_interface = req->rx_queue().interface();
      spec.rx_queue = req->rx_queue().queue();
      break;
    case v1::AttachRequest::kTxQueue:
      if (req->tx_queue().interface().empty()) {
        return to_status(
            {ErrorCode::kInvalidArgument, "tx_queue.interface is required", "tx_queue"});
      }
      spec.tx_interface = req->tx_queue().interface();
      spec.tx_queue = req->tx_queue().queue();
      spec.tx_kicks = req->kicks();
      break;
    default:
      return to_status(
          {ErrorCode::kInvalidArgument, "name a flow (RX) or a tx_queue (TX)", "target"});
  }
  spec.rx_options.ring_size = req->ring_size();
  spec.rx_options.gpu = req->gpu();
  spec.rx_options.cuda_ipc = req->cuda_ipc();
  spec.rx_options.compact = req->compact();
  if (req->compact() && (req->gpu() || req->target_case() == v1::AttachRequest::kTxQueue)) {
    return to_status({ErrorCode::kInvalidArgument,
                      "compact is for RX rings in host memory (not gpu, not tx_queue)", "compact"});
  }
  if (req->cuda_ipc() && req->target_case() == v1::AttachRequest::kTxQueue) {
    return to_status({ErrorCode::kInvalidArgument,
                      "cuda_ipc is for GPU RX rings; GPU TX buffers come as a CUDA VMM fd",
                      "cuda_ipc"});
  }
  if (req->cuda_ipc() && !req->gpu()) {
    return to_status(
        {ErrorCode::kInvalidArgument, "cuda_ipc is for GPU rings (gpu: true)", "cuda_ipc"});
  }
  spec.rx_options.backpressure = req->backpressure() == v1::BACKPRESSURE_BLOCK
                                     ? dataplane::Backpressure::kBlock
                                     : dataplane::Backpressure::kDropNew;
  spec.rx_options.who.user = peer->user;
  spec.rx_options.who.uid = peer->uid;
  spec.rx_options.who.gid = peer->gid;
  spec.rx_options.who.groups.assign(peer->groups.begin(), peer->groups.end());
  spec.rx_options.who.admin = policy_.role_of(*peer) == Role::kAdmin;
  auto grant = sessions_.attach(*peer, spec);
  if (!grant) return to_status(grant.error());
  resp->set_attachment_id(grant->attachment_id);
  resp->set_token(grant->token.data(), grant->token.size());
  if (req->cuda_ipc()) {
    auto handle = data_plane_.cuda_ipc_handle(grant->attachment_id);
    if (!handle) return to_status(handle.error());  // the session's ledger frees the ring
    resp->set_cuda_ipc_handle(*handle);
  }
  spdlog::info("attachment {} for {} pid {} on {}", grant->attachment_id, peer->describe(),
               peer->pid, spec.flow.empty() ? spec.tx_interface + " TX" : "flow " + spec.flow);
  return grpc::Status::OK;
}

grpc::Status ControlService::GetStats(grpc::ServerContext* ctx, const v1::GetStatsRequest*,
                                      v1::Stats* resp) {
  CallGuard guard(in_flight_);
  auto peer = authorize(ctx, Role::kClient, "read statistics");
  if (!peer) return to_status(peer.error());
  // As in ListFlows: a client sees nothing of the flows (and their reorders) it may not
  // attach to, nor of the attachments to them.
  const std::set<std::string> hidden = hidden_flows(*peer);
  for (const auto& f : data_plane_.flow_stats()) {
    if (hidden.contains(f.name)) continue;
    auto* out = resp->add_flows();
    out->set_name(f.name);
#define DAQIRI_STATS_SET(member, field, ...) v1::stats::set_counter(*out, field, f.member);
    DAQIRI_FLOW_COUNTERS(DAQIRI_STATS_SET)
#undef DAQIRI_STATS_SET
  }
  for (const auto& a : data_plane_.attachment_stats()) {
    if (hidden.contains(a.target)) continue;
    auto* out = resp->add_attachments();
    out->set_id(a.id);
    out->set_session_id(sessions_.session_of(a.id));
    out->set_direction(a.rx ? v1::DIRECTION_RX : v1::DIRECTION_TX);
    out->set_target(a.target);
    out->set_gpu(a.gpu);
    out->set_claimed(a.claimed);
#define DAQIRI_STATS_SET(member, field, ...) v1::stats::set_counter(*out, field, a.member);
    DAQIRI_ATTACHMENT_COUNTERS(DAQIRI_STATS_SET)
#undef DAQIRI_STATS_SET
  }
  for (const auto& n : data_plane_.nic_stats()) {
    auto* out = resp->add_nics();
    out->set_interface(n.interface);
    out->set_driver(n.driver);
    out->set_link(n.link);
    out->set_rx_packets(n.rx_packets);
    out->set_rx_bytes(n.rx_bytes);
    out->set_rx_missed(n.rx_missed);
    out->set_rx_errors(n.rx_errors);
    out->set_rx_nombuf(n.rx_nombuf);
    out->set_tx_packets(n.tx_packets);
    out->set_tx_bytes(n.tx_bytes);
    out->set_tx_errors(n.tx_errors);
    for (const auto& [name, value] : n.xstats) {
      auto* x = out->add_xstats();
      x->set_name(name);
      x->set_value(value);
    }
    for (const auto& q : n.queues) {
      auto* qo = out->add_queues();
      qo->set_name(q.name);
      qo->set_direction(q.rx ? v1::DIRECTION_RX : v1::DIRECTION_TX);
      qo->set_packets(q.packets);
      qo->set_bytes(q.bytes);
      qo->set_unmatched(q.unmatched);
      qo->set_copied(q.copied);
      qo->set_no_buffer(q.no_buffer);
      qo->set_truncated(q.truncated);
      qo->set_no_header(q.no_header);
      qo->set_oversize(q.oversize);
      qo->set_buffers_on_loan(q.on_loan);
      qo->set_mbufs_free(q.mbufs_free);
    }
  }
  for (const orchestrator::PollerStats& p : data_plane_.poller_stats()) {
    auto* out = resp->add_pollers();
    out->set_name(p.name);
    out->set_busy_ratio(p.busy_ratio);
    out->set_parks(p.wakeups.parks);
    out->set_io_wakeups(p.wakeups.io);
    out->set_doorbell_wakeups(p.wakeups.doorbell);
    out->set_timer_wakeups(p.wakeups.timer);
  }
  resp->set_sessions_cut_off(sessions_.sessions_cut_off());
  resp->set_attachments_parked(static_cast<uint32_t>(data_plane_.parked()));
  return grpc::Status::OK;
}

grpc::Status ControlService::StartCapture(grpc::ServerContext* ctx,
                                          const v1::StartCaptureRequest* req, v1::Capture* resp) {
  CallGuard guard(in_flight_);
  auto peer = authorize(ctx, Role::kClient, "start captures");
  if (!peer) return to_status(peer.error());
  if (peer->transport == PeerIdentity::Transport::kTcp) {
    return to_status({ErrorCode::kPermissionDenied,
                      "captures are started over the Unix socket (files belong to a local uid)",
                      "transport"});
  }
  auto spec = from_proto(*req);
  if (!spec) return to_status(spec.error());
  auto started = captures_.start(*spec, peer->uid, peer->gid, peer->groups);
  if (!started) return to_status(started.error());
  to_proto(*started, *resp);
  return grpc::Status::OK;
}

grpc::Status ControlService::StopCapture(grpc::ServerContext* ctx,
                                         const v1::StopCaptureRequest* req, v1::Capture* resp) {
  CallGuard guard(in_flight_);
  auto peer = authorize(ctx, Role::kClient, "stop captures");
  if (!peer) return to_status(peer.error());
  auto stopped = captures_.stop(req->id(), peer->uid, policy_.role_of(*peer) == Role::kAdmin);
  if (!stopped) return to_status(stopped.error());
  to_proto(*stopped, *resp);
  return grpc::Status::OK;
}

grpc::Status ControlService::ListCaptures(grpc::ServerContext* ctx, const v1::ListCapturesRequest*,
                                          v1::ListCapturesResponse* resp) {
  CallGuard guard(in_flight_);
  if (auto peer = authorize(ctx, Role::kClient, "list captures"); !peer) {
    return to_status(peer.error());
  }
  for (const auto& s : captures_.list())
    to_proto(s, *resp->add_captures());
  return grpc::Status::OK;
}

}  // namespace daqiri::control
