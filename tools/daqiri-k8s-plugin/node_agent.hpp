// daqiri-k8s-plugin's loop: the daemon's flow table, followed live (ListFlows every poll, the
// daemon offers no watch), as kubelet resources: a FlowResource for each flow that can be one,
// started as a flow appears and withdrawn as it goes. While the daemon cannot be reached every
// device is unhealthy (no pod is admitted to a flow nobody serves). When the kubelet restarts
// it removes the plugins' sockets: every resource is then served and registered again.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "daqiri/v1/control.grpc.pb.h"
#include "flow_resource.hpp"

namespace daqiri::k8s {

class NodeAgent {
 public:
  NodeAgent(PluginSettings settings, std::chrono::milliseconds poll);
  // Until `stop` is set.
  void run(const std::atomic<bool>& stop);
  // One round: the flows now, the resources made to match.
  void reconcile();

 private:
  PluginSettings settings_;
  std::chrono::milliseconds poll_;
  std::unique_ptr<v1::Control::Stub> control_;
  std::map<std::string, std::unique_ptr<FlowResource>> resources_;  // by flow
  bool reachable_ = true;
};

}  // namespace daqiri::k8s
