// The daemon's model of what it serves: the configured interfaces, queues and memory regions
// (fixed for the daemon's life) and the flow table (changed at runtime through the control
// API). Thread-safe: any thread may read or change flows.
#pragma once

#include <functional>
#include <mutex>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "core/flow_table.hpp"

namespace daqiri::core {

class Model {
 public:
  // `config` must have passed validation.
  explicit Model(config::Config config);

  [[nodiscard]] const config::Config& config() const { return config_; }
  [[nodiscard]] const config::InterfaceConfig* find_interface(std::string_view name) const;

  // Flows of one interface, or of all when `interface` is empty; ordered by name.
  [[nodiscard]] std::vector<Flow> flows(std::string_view interface = {}) const;
  // What must also happen for a flow change to count (installing it in the data plane); runs
  // under the model's lock, so flows change one at a time and the table never disagrees with
  // the data plane. An error undoes the change.
  using FlowHook = std::function<Result<>(const Flow&)>;
  Result<Flow> create_flow(FlowSpec spec, const FlowHook& apply = {});
  Result<> delete_flow(std::string_view name, const FlowHook& apply = {});

 private:
  const config::Config config_;
  mutable std::mutex mutex_;
  FlowTable flows_;
};

}  // namespace daqiri::core
