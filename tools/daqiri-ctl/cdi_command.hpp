// daqiri-ctl cdi generate: a CDI spec of the daemon's flows (daqiri/common/cdi_spec.hpp), for
// container runtimes to hand them to containers.
#pragma once

#include <string>

#include "control_client.hpp"
#include "daqiri/common/cdi_spec.hpp"

namespace daqiri::ctl {

struct CdiArgs {
  std::string output = "/var/run/cdi/daqiri.yaml";  // "-": standard output
  std::string kind{cdi::kDefaultKind};
};

// The flows the caller may see (an admin: all) become devices; the socket is --socket's path.
int run_cdi_generate(ControlClient& client, const Options& opts, const CdiArgs& args);

}  // namespace daqiri::ctl
