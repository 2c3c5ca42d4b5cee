// daqiri.v1.Control: decode, check the caller's role, call the model, encode. Errors become
// gRPC statuses here and nowhere else. Called on gRPC's threads; the model is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <set>
#include <string>

#include "capture/capture_registry.hpp"
#include "control/access_policy.hpp"
#include "control/cdi_writer.hpp"
#include "control/connection_registry.hpp"
#include "core/model.hpp"
#include "daqiri/v1/control.grpc.pb.h"
#include "orchestrator/data_plane.hpp"
#include "session/session_server.hpp"

namespace daqiri::control {

grpc::Status to_status(const Error& error);

// What the control API acts on; all of it outlives the service.
struct ControlTargets {
  core::Model& model;
  const AccessPolicy& policy;
  orchestrator::DataPlane& data_plane;
  session::SessionServer& sessions;
  capture_service::CaptureRegistry& captures;
  CdiWriter* cdi = nullptr;  // daemon.cdi_spec: refreshed after each flow change
};

class ControlService final : public v1::Control::Service {
 public:
  // Calls being handled right now: shutdown waits for them, not for idle connections.
  [[nodiscard]] int in_flight() const { return in_flight_.load(std::memory_order_acquire); }

  ControlService(const ControlTargets& targets, const ConnectionRegistry& connections);

  grpc::Status GetInfo(grpc::ServerContext* ctx, const v1::GetInfoRequest* req,
                       v1::Info* resp) override;
  grpc::Status ListInterfaces(grpc::ServerContext* ctx, const v1::ListInterfacesRequest* req,
                              v1::ListInterfacesResponse* resp) override;
  grpc::Status ListMemoryRegions(grpc::ServerContext* ctx, const v1::ListMemoryRegionsRequest* req,
                                 v1::ListMemoryRegionsResponse* resp) override;
  grpc::Status ListQueues(grpc::ServerContext* ctx, const v1::ListQueuesRequest* req,
                          v1::ListQueuesResponse* resp) override;
  grpc::Status ListFlows(grpc::ServerContext* ctx, const v1::ListFlowsRequest* req,
                         v1::ListFlowsResponse* resp) override;
  grpc::Status ListSessions(grpc::ServerContext* ctx, const v1::ListSessionsRequest* req,
                            v1::ListSessionsResponse* resp) override;
  grpc::Status CreateFlow(grpc::ServerContext* ctx, const v1::CreateFlowRequest* req,
                          v1::Flow* resp) override;
  grpc::Status DeleteFlow(grpc::ServerContext* ctx, const v1::DeleteFlowRequest* req,
                          v1::DeleteFlowResponse* resp) override;
  grpc::Status Attach(grpc::ServerContext* ctx, const v1::AttachRequest* req,
                      v1::AttachResponse* resp) override;
  grpc::Status GetStats(grpc::ServerContext* ctx, const v1::GetStatsRequest* req,
                        v1::Stats* resp) override;
  grpc::Status StartCapture(grpc::ServerContext* ctx, const v1::StartCaptureRequest* req,
                            v1::Capture* resp) override;
  grpc::Status StopCapture(grpc::ServerContext* ctx, const v1::StopCaptureRequest* req,
                           v1::Capture* resp) override;
  grpc::Status ListCaptures(grpc::ServerContext* ctx, const v1::ListCapturesRequest* req,
                            v1::ListCapturesResponse* resp) override;

 private:
  // The caller's identity if it holds `need`, else the status to return.
  Result<PeerIdentity> authorize(grpc::ServerContext* ctx, Role need,
                                 std::string_view action) const;
  // The flows (and reorders of them) whose clients lists do not admit `peer`; none for admins.
  [[nodiscard]] std::set<std::string> hidden_flows(const PeerIdentity& peer) const;

  core::Model& model_;
  const AccessPolicy& policy_;
  orchestrator::DataPlane& data_plane_;
  session::SessionServer& sessions_;
  capture_service::CaptureRegistry& captures_;
  CdiWriter* cdi_;
  const ConnectionRegistry& connections_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::atomic<int> in_flight_{0};
};

}  // namespace daqiri::control
