#include "node_agent.hpp"

#include <spdlog/spdlog.h>

#include <thread>

#include "resource_names.hpp"

namespace daqiri::k8s {

NodeAgent::NodeAgent(PluginSettings settings, std::chrono::milliseconds poll)
    : settings_(std::move(settings)),
      poll_(poll),
      control_(v1::Control::NewStub(grpc::CreateChannel("unix:" + settings_.daqiri_socket,
                                                        grpc::InsecureChannelCredentials()))) {}

Result<std::map<std::string, Offer>> NodeAgent::offers() {
  auto call = [&](auto method, const auto& req, auto& resp) -> Result<> {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc::Status status = ((*control_).*method)(&ctx, req, &resp);
    if (!status.ok()) return fail(ErrorCode::kUnavailable, status.error_message());
    return {};
  };
  v1::ListFlowsResponse flows;
  v1::ListQueuesResponse queues;
  if (auto ok = call(&v1::Control::Stub::ListFlows, v1::ListFlowsRequest{}, flows); !ok)
    return std::unexpected(ok.error());
  if (auto ok = call(&v1::Control::Stub::ListQueues, v1::ListQueuesRequest{}, queues); !ok)
    return std::unexpected(ok.error());
  cdi::Spec spec;
  std::map<std::string, Offer> tx_offers;  // by CDI device, to be completed
  for (const auto& q : queues.queues()) {
    if (q.direction() != v1::DIRECTION_TX) continue;
    auto resource = tx_resource_of(settings_.resource_domain, q.interface(), q.name());
    if (!resource) continue;
    cdi::TxQueueRef ref{q.interface(), q.name()};
    spec.tx_queues.push_back(ref);
    tx_offers[cdi::tx_device(ref)] = {
        "TX queue " + q.interface() + "/" + q.name(), {}, *resource, q.max_clients()};
  }
  for (const auto& f : flows.flows())
    spec.flows.push_back(f.name());
  std::map<std::string, Offer> out;
  for (auto& d : cdi::devices(spec)) {
    Offer o;
    if (auto tx = tx_offers.find(d.name); tx != tx_offers.end()) {
      o = tx->second;
    } else {
      auto resource = resource_of(settings_.resource_domain, d.name);
      if (!resource) continue;
      o = {"flow " + d.name, {}, *resource, settings_.capacity};
    }
    o.device = std::move(d);
    std::string key = o.resource;
    out.emplace(std::move(key), std::move(o));
  }
  return out;
}

void NodeAgent::reconcile() {
  auto now = offers();
  if (!now) {
    if (reachable_) {
      spdlog::warn("daqirid at {}: {}: every device unhealthy until it answers",
                   settings_.daqiri_socket, now.error().message);
    }
    reachable_ = false;
    for (auto& [name, r] : resources_)
      r->set_healthy(false);
    return;
  }
  if (!reachable_) spdlog::info("daqirid answers again");
  reachable_ = true;
  for (auto& [name, offer] : *now) {
    auto it = resources_.find(name);
    if (it != resources_.end() && !it->second->socket_present()) {
      spdlog::info("{}: the kubelet removed {}'s socket (it restarted): registering again",
                   offer.what, name);
      resources_.erase(it);
      it = resources_.end();
    }
    if (it != resources_.end() && it->second->offer().capacity != offer.capacity) {
      resources_.erase(it);  // registered again with the new number of devices
      it = resources_.end();
    }
    if (it == resources_.end()) {
      std::string what = offer.what;
      auto r = DeviceResource::start(settings_, std::move(offer));
      if (!r) {
        spdlog::warn("{}: {} (again in {} ms)", what, r.error().message, poll_.count());
        continue;
      }
      it = resources_.emplace(name, std::move(*r)).first;
    }
    it->second->set_healthy(true);
  }
  for (auto it = resources_.begin(); it != resources_.end();) {
    if (now->contains(it->first)) {
      ++it;
      continue;
    }
    spdlog::info("{} is gone: {} withdrawn", it->second->offer().what, it->first);
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
