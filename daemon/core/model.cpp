#include "core/model.hpp"

#include <stdexcept>

namespace daqiri::core {
namespace {

RxTopology topology_of(const config::Config& config) {
  RxTopology t;
  for (const auto& itf : config.interfaces) {
    auto& qs = t.rx_queues[itf.name];
    for (const auto& q : itf.rx_queues)
      qs.push_back(q.name);
  }
  return t;
}

}  // namespace

Model::Model(config::Config config) : config_(std::move(config)), flows_(topology_of(config_)) {
  for (const auto& f : config_.flows) {
    auto added = flows_.add(f.spec());
    // Validation already applied the same rules: a failure here is a bug, not bad input.
    if (!added) throw std::logic_error("validated flow rejected: " + added.error().message);
  }
}

const config::InterfaceConfig* Model::find_interface(std::string_view name) const {
  for (const auto& itf : config_.interfaces) {
    if (itf.name == name) return &itf;
  }
  return nullptr;
}

std::vector<Flow> Model::flows(std::string_view interface) const {
  std::lock_guard lock(mutex_);
  std::vector<Flow> out;
  for (const auto& [name, flow] : flows_.flows()) {
    if (interface.empty() || flow.interface == interface) out.push_back(flow);
  }
  return out;
}

Result<Flow> Model::create_flow(FlowSpec spec, const FlowHook& apply) {
  std::lock_guard lock(mutex_);
  auto flow = flows_.add(std::move(spec));
  if (!flow || !apply) return flow;
  if (auto ok = apply(*flow); !ok) {
    (void)flows_.remove(flow->name);
    return std::unexpected(ok.error());
  }
  return flow;
}

Result<> Model::delete_flow(std::string_view name, const FlowHook& apply) {
  std::lock_guard lock(mutex_);
  auto it = flows_.flows().find(name);
  if (it == flows_.flows().end()) return flows_.remove(name);  // the NOT_FOUND error
  if (apply) {
    if (auto ok = apply(it->second); !ok) return ok;
  }
  return flows_.remove(name);
}

}  // namespace daqiri::core
