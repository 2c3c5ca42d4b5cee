// One flow or TX queue as a kubelet device-plugin resource (v1beta1): a gRPC server on a
// socket of its own in the kubelet's device-plugin folder, registered with the kubelet under
// the offer's resource name. Its devices are the offer's `capacity` holds; Allocate hands a
// container its CDI device (KIND=NAME), and for runtimes without CDI the same by hand (the
// sockets' folder mounted read-only, DAQIRI_SOCKET and the device's environment). The kubelet
// watches the device list: set_healthy(false) marks every device unhealthy (the flow is gone),
// and destruction ends the streams and removes the socket.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "daqiri/common/cdi_spec.hpp"
#include "daqiri/common/result.hpp"
#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"

namespace daqiri::k8s {

struct PluginSettings {
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";  // the kubelet's socket is here
  std::string daqiri_socket = "/run/daqiri/daqiri.sock";
  std::string cdi_kind = "daqiri.io/flow";
  std::string resource_domain = "daqiri.io";
  uint32_t capacity = 16;  // containers that may hold a flow at once (the daemon's 16 a flow)
};

// What one resource offers: for the logs, `what` ("flow NAME", "TX queue IF/Q"); the CDI
// device a container gets and its environment; the resource's name (DOMAIN/NAME) and devices.
struct Offer {
  std::string what;
  cdi::Device device;
  std::string resource;
  uint32_t capacity = 0;
};

class DeviceResource final : public v1beta1::DevicePlugin::Service {
 public:
  // Serves the offer's resource and registers it with the kubelet (a failure of either:
  // error).
  static Result<std::unique_ptr<DeviceResource>> start(const PluginSettings& settings, Offer offer);
  ~DeviceResource() override;
  DeviceResource(const DeviceResource&) = delete;
  DeviceResource& operator=(const DeviceResource&) = delete;

  // The flow is gone (or the daemon cannot be reached): every device unhealthy, or healthy
  // again.
  void set_healthy(bool healthy);
  // False once the kubelet removed the socket (it does when it restarts): serve and register
  // again.
  [[nodiscard]] bool socket_present() const;
  [[nodiscard]] const Offer& offer() const { return offer_; }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext* ctx, const v1beta1::Empty* req,
                                      v1beta1::DevicePluginOptions* resp) override;
  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty* req,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext* ctx,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* resp) override;
  grpc::Status Allocate(grpc::ServerContext* ctx, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* resp) override;
  grpc::Status PreStartContainer(grpc::ServerContext* ctx,
                                 const v1beta1::PreStartContainerRequest* req,
                                 v1beta1::PreStartContainerResponse* resp) override;

 private:
  DeviceResource(const PluginSettings& settings, Offer offer);
  Result<> register_with_kubelet() const;
  [[nodiscard]] v1beta1::ListAndWatchResponse devices(bool healthy) const;

  PluginSettings settings_;
  Offer offer_;
  std::string socket_;  // ours, in the plugin folder
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t generation_ = 0;  // bumped at each change the watchers must send
  bool healthy_ = true;
  bool stopping_ = false;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace daqiri::k8s
