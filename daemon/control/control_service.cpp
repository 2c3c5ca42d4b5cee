#include "control/control_service.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "build_info.hpp"
#include "control/proto_convert.hpp"
#include "system/host_info.hpp"

namespace daqiri::control {

grpc::Status to_status(const Error& error) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (error.code) {
    case ErrorCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case ErrorCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case ErrorCode::kAlreadyExists:
      code = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case ErrorCode::kPermissionDenied:
      code = grpc::StatusCode::PERMISSION_DENIED;
      break;
    case ErrorCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case ErrorCode::kResourceExhausted:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    case ErrorCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case ErrorCode::kInternal:
      code = grpc::StatusCode::INTERNAL;
      break;
  }
  return {code, error.message};
}

ControlService::ControlService(core::Model& model, const AccessPolicy& policy,
                               const ConnectionRegistry& connections)
    : model_(model), policy_(policy), connections_(connections) {}

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
  resp->add_backends("socket");
  if (build::kHaveDpdk) resp->add_backends("dpdk");
  if (build::kHaveRdma) resp->add_backends("rdma");
  for (const auto& g : system::probe_gpus()) {
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
  if (auto peer = authorize(ctx, Role::kClient, "list interfaces"); !peer) {
    return to_status(peer.error());
  }
  for (const auto& itf : model_.config().interfaces)
    to_proto(itf, *resp->add_interfaces());
  return grpc::Status::OK;
}

grpc::Status ControlService::ListMemoryRegions(grpc::ServerContext* ctx,
                                               const v1::ListMemoryRegionsRequest*,
                                               v1::ListMemoryRegionsResponse* resp) {
  if (auto peer = authorize(ctx, Role::kClient, "list memory regions"); !peer) {
    return to_status(peer.error());
  }
  for (const auto& r : model_.config().memory_regions)
    to_proto(r, *resp->add_regions());
  return grpc::Status::OK;
}

grpc::Status ControlService::ListQueues(grpc::ServerContext* ctx, const v1::ListQueuesRequest* req,
                                        v1::ListQueuesResponse* resp) {
  if (auto peer = authorize(ctx, Role::kClient, "list queues"); !peer) {
    return to_status(peer.error());
  }
  if (!req->interface().empty() && !model_.find_interface(req->interface())) {
    return to_status({ErrorCode::kNotFound, "no interface named \"" + req->interface() + "\"", {}});
  }
  for (const auto& itf : model_.config().interfaces) {
    if (!req->interface().empty() && itf.name != req->interface()) continue;
    for (const auto& q : itf.rx_queues)
      to_proto(itf, q, v1::DIRECTION_RX, *resp->add_queues());
    for (const auto& q : itf.tx_queues)
      to_proto(itf, q, v1::DIRECTION_TX, *resp->add_queues());
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::ListFlows(grpc::ServerContext* ctx, const v1::ListFlowsRequest* req,
                                       v1::ListFlowsResponse* resp) {
  if (auto peer = authorize(ctx, Role::kClient, "list flows"); !peer) {
    return to_status(peer.error());
  }
  if (!req->interface().empty() && !model_.find_interface(req->interface())) {
    return to_status({ErrorCode::kNotFound, "no interface named \"" + req->interface() + "\"", {}});
  }
  for (const auto& f : model_.flows(req->interface()))
    to_proto(f, *resp->add_flows());
  return grpc::Status::OK;
}

grpc::Status ControlService::ListSessions(grpc::ServerContext* ctx, const v1::ListSessionsRequest*,
                                          v1::ListSessionsResponse*) {
  if (auto peer = authorize(ctx, Role::kClient, "list sessions"); !peer) {
    return to_status(peer.error());
  }
  // Sessions open through the data-plane handshake; until it exists the list is empty.
  return grpc::Status::OK;
}

grpc::Status ControlService::CreateFlow(grpc::ServerContext* ctx, const v1::CreateFlowRequest* req,
                                        v1::Flow* resp) {
  auto peer = authorize(ctx, Role::kAdmin, "create flows");
  if (!peer) return to_status(peer.error());
  auto spec = from_proto(*req);
  if (!spec) return to_status(spec.error());
  auto flow = model_.create_flow(std::move(*spec));
  if (!flow) return to_status(flow.error());
  spdlog::info("flow {} created by {}: {} -> {}/{}", flow->name, peer->describe(),
               flow->match.to_string(), flow->interface, flow->queue);
  to_proto(*flow, *resp);
  return grpc::Status::OK;
}

grpc::Status ControlService::DeleteFlow(grpc::ServerContext* ctx, const v1::DeleteFlowRequest* req,
                                        v1::DeleteFlowResponse*) {
  auto peer = authorize(ctx, Role::kAdmin, "delete flows");
  if (!peer) return to_status(peer.error());
  if (req->name().empty()) {
    return to_status({ErrorCode::kInvalidArgument, "name is required", "name"});
  }
  if (auto ok = model_.delete_flow(req->name()); !ok) return to_status(ok.error());
  spdlog::info("flow {} deleted by {}", req->name(), peer->describe());
  return grpc::Status::OK;
}

}  // namespace daqiri::control
