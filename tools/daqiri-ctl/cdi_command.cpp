#include "cdi_command.hpp"

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
  for (const auto& f : flows.flows()) {
    spec.flows.push_back(f.name());
    if (!cdi::is_device_name(f.name())) {
      std::cerr << "daqiri-ctl: flow \"" << f.name() << "\" has no device of its own (a CDI "
                << "device name is a letter or digit, then letters, digits, '_', '.', ':' and "
                << "'-', and not \"all\"): containers reach it through " << args.kind << "=all\n";
    }
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
  for (const auto& f : spec.flows) {
    if (cdi::is_device_name(f)) std::cout << ", " << args.kind << "=" << f;
  }
  std::cout << "\n";
  return kOk;
}

}  // namespace daqiri::ctl
