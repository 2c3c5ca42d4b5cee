// Prometheus metrics at daemon.metrics (default 127.0.0.1:9464, /metrics). The data plane is
// never asked to count anything for it: the pollers' own single-writer counters are read when
// Prometheus scrapes (DataPlaneCollector). Control-plane calls are counted by a gRPC server
// interceptor. docs/metrics.md lists every family.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <string>
#include <vector>

#include "daqiri/common/result.hpp"
#include "orchestrator/data_plane.hpp"
#include "session/session_server.hpp"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace daqiri::metrics {

class ControlCallMetrics;
class DataPlaneCollector;

class MetricsServer {
 public:
  // Listens on `address` (host:port). The sources must outlive the server.
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address,
                                                      const orchestrator::DataPlane& data_plane,
                                                      const session::SessionServer& sessions);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // For the control server's builder: counts every call by method and status, with latency.
  [[nodiscard]] std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
  interceptor_factory();
  [[nodiscard]] const std::string& address() const { return address_; }

 private:
  MetricsServer() = default;
  std::string address_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<DataPlaneCollector> collector_;
  std::unique_ptr<ControlCallMetrics> calls_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace daqiri::metrics
