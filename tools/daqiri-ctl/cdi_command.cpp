#include "cdi_command.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "daqiri/common/cdi_spec.hpp"

namespace daqiri::ctl {

int run_cdi_generate(ControlClient& client, const Options& opts, const CdiArgs& args) {
  v1::ListFlowsResponse flows;
  auto ctx = client.context();
  auto status = client.control().ListFlows(ctx.get(), v1::ListFlowsRequest{}, &flows);
  if (!status.ok()) return client.report(status);
  cdi::Spec spec;
  spec.kind = args.kind;
  spec.socket = std::filesystem::absolute(opts.socket).lexically_normal().string();
  v1::ListQueuesResponse queues;
  auto qctx = client.context();
  status = client.control().ListQueues(qctx.get(), v1::ListQueuesRequest{}, &queues);
  if (!status.ok()) return client.report(status);
  for (const auto& f : flows.flows())
    spec.flows.push_back(f.name());
  for (const auto& q : queues.queues()) {
    if (q.direction() == v1::DIRECTION_TX) spec.tx_queues.push_back({q.interface(), q.name()});
  }
  const std::vector<cdi::Device> devices = cdi::devices(spec);
  auto has_device = [&](const std::string& name) {
    return std::any_of(devices.begin(), devices.end(),
                       [&](const cdi::Device& d) { return d.name == name; });
  };
  for (const auto& f : spec.flows) {
    if (has_device(f)) continue;
    std::cerr << "daqiri-ctl: flow \"" << f << "\" has no device of its own (a CDI device name "
              << "is a letter or digit, then letters, digits, '_', '.', ':' and '-', not \"all\" "
              << "nor a TX queue's): containers reach it through " << args.kind << "=all\n";
  }
  for (const auto& q : spec.tx_queues) {
    if (has_device(cdi::tx_device(q))) continue;
    std::cerr << "daqiri-ctl: TX queue " << q.interface << "/" << q.queue
              << " has no device: its names make no CDI device name\n";
  }
  if (args.output == "-") {
    std::cout << cdi::to_yaml(spec);
    return kOk;
  }
  if (auto ok = cdi::write_spec(args.output, spec); !ok) {
    std::cerr << "daqiri-ctl: " << ok.error().message << "\n";
    return kFailed;
  }
  std::cout << "wrote " << args.output << ": " << args.kind << "=all";
  for (const auto& d : devices)
    std::cout << ", " << args.kind << "=" << d.name;
  std::cout << "\n";
  return kOk;
}

}  // namespace daqiri::ctl
