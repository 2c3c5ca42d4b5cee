// The control plane: the gRPC server (daqiri.v1.Control, grpc.health.v1, reflection) fed by
// our own Unix listener (so every connection carries its kernel identity), plus an optional
// TCP listener that only speaks TLS, behind a gate that counts connections per peer.
#pragma once

#include <grpcpp/server.h>
#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <optional>

#include "config/config.hpp"
#include "control/access_policy.hpp"
#include "control/connection_registry.hpp"
#include "control/control_service.hpp"
#include "control/tcp_gate.hpp"
#include "control/unix_listener.hpp"
#include "core/model.hpp"

namespace daqiri::control {

struct ControlServerOptions {
  std::string socket_path;
  // Observers of every call (metrics); handed to the gRPC server.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  std::optional<gid_t> socket_group;  // the socket is mode 0660 and owned by this group
  std::optional<config::TcpListenerConfig> tcp;
  // Unix-socket connections one uid may hold open at once; 0: no limit.
  uint32_t connections_per_user = 0;
  TcpGate::Limits tcp_limits;
};

class ControlServer {
 public:
  // Binds, starts serving and accepting. `targets` must outlive the server.
  static Result<std::unique_ptr<ControlServer>> start(ControlServerOptions options,
                                                      const ControlTargets& targets);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Stops accepting, lets calls in flight finish for up to `grace`, then cancels them.
  void shutdown(std::chrono::milliseconds grace);
  // Marks the health service NOT_SERVING (draining) or SERVING.
  void set_serving(bool serving);

 private:
  ControlServer() = default;

  ConnectionRegistry connections_;
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<UnixListener> listener_;
  std::unique_ptr<TcpGate> tcp_gate_;
  bool shut_down_ = false;
};

}  // namespace daqiri::control
