// daqiri-k8s-plugin's loop: the daemon's flow table and TX queues, followed live (ListFlows and
// ListQueues every poll, the daemon offers no watch), as kubelet resources: a DeviceResource
// for each flow and TX queue that can be one, started as it appears and withdrawn as it goes. While
// the daemon cannot be reached every device is unhealthy (no pod is admitted to a flow nobody
// serves). When the kubelet restarts it removes the plugins' sockets: every resource is then served
// and registered again.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "daqiri/v1/control.grpc.pb.h"
#include "device_resource.hpp"

namespace daqiri::k8s {

class NodeAgent {
 public:
  NodeAgent(PluginSettings settings, std::chrono::milliseconds poll);
  // Until `stop` is set.
  void run(const std::atomic<bool>& stop);
  // One round: the flows and TX queues now, the resources made to match.
  void reconcile();

 private:
  PluginSettings settings_;
  std::chrono::milliseconds poll_;
  std::unique_ptr<v1::Control::Stub> control_;
  // What the daemon offers now (by resource name), or an error.
  Result<std::map<std::string, Offer>> offers();

  std::map<std::string, std::unique_ptr<DeviceResource>> resources_;  // by resource name
  bool reachable_ = true;
};

}  // namespace daqiri::k8s
