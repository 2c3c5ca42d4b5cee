#include "node_agent.hpp"

#include <spdlog/spdlog.h>

#include <set>
#include <thread>

#include "resource_names.hpp"

namespace daqiri::k8s {

NodeAgent::NodeAgent(PluginSettings settings, std::chrono::milliseconds poll)
    : settings_(std::move(settings)),
      poll_(poll),
      control_(v1::Control::NewStub(grpc::CreateChannel("unix:" + settings_.daqiri_socket,
                                                        grpc::InsecureChannelCredentials()))) {}

void NodeAgent::reconcile() {
  v1::ListFlowsResponse flows;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  grpc::Status status = control_->ListFlows(&ctx, v1::ListFlowsRequest{}, &flows);
  if (!status.ok()) {
    if (reachable_) {
      spdlog::warn("daqirid at {}: {}: every flow's devices unhealthy until it answers",
                   settings_.daqiri_socket, status.error_message());
    }
    reachable_ = false;
    for (auto& [flow, r] : resources_)
      r->set_healthy(false);
    return;
  }
  if (!reachable_) spdlog::info("daqirid answers again");
  reachable_ = true;
  std::set<std::string> now;
  for (const auto& f : flows.flows()) {
    auto resource = resource_of(settings_.resource_domain, f.name());
    if (!resource) continue;  // told once below, when first seen
    now.insert(f.name());
    auto it = resources_.find(f.name());
    if (it != resources_.end() && !it->second->socket_present()) {
      spdlog::info("flow {}: the kubelet removed {}'s socket (it restarted): registering again",
                   f.name(), *resource);
      resources_.erase(it);
      it = resources_.end();
    }
    if (it == resources_.end()) {
      auto r = FlowResource::start(settings_, f.name(), *resource);
      if (!r) {
        spdlog::warn("flow {}: {} (again in {} ms)", f.name(), r.error().message, poll_.count());
        continue;
      }
      it = resources_.emplace(f.name(), std::move(*r)).first;
    }
    it->second->set_healthy(true);
  }
  for (auto it = resources_.begin(); it != resources_.end();) {
    if (now.contains(it->first)) {
      ++it;
      continue;
    }
    spdlog::info("flow {} is gone: {} withdrawn", it->first, it->second->resource());
    it->second->set_healthy(false);  // the kubelet's stream sees it before it ends
    it = resources_.erase(it);
  }
}

void NodeAgent::run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    reconcile();
    auto until = std::chrono::steady_clock::now() + poll_;
    while (!stop.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  resources_.clear();
}

}  // namespace daqiri::k8s
