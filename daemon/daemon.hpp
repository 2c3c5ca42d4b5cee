// daqirid's life: take the instance lock, bring up the control plane, tell systemd, wait for
// a signal, drain, and leave nothing behind (socket, lock file) however start or stop went.
#pragma once

#include <memory>

#include "capture/capture_registry.hpp"
#include "config/config.hpp"
#include "control/access_policy.hpp"
#include "control/control_server.hpp"
#include "core/model.hpp"
#include "metrics/metrics_server.hpp"
#include "orchestrator/data_plane.hpp"
#include "session/session_server.hpp"
#include "system/instance_lock.hpp"
#include "system/service_notifier.hpp"

namespace daqiri {

class Daemon {
 public:
  // Startup only. On failure everything acquired so far is released again.
  static Result<std::unique_ptr<Daemon>> start(config::Config config);
  // Serves until SIGTERM or SIGINT; returns the process exit code.
  int run();

 private:
  Daemon() = default;

  system::ServiceNotifier notifier_;
  std::unique_ptr<core::Model> model_;
  std::unique_ptr<control::AccessPolicy> policy_;
  // Declared in start order: destruction runs backwards (control API, sessions, data plane,
  // lock), so nothing is torn down while something above it still uses it.
  std::unique_ptr<system::InstanceLock> lock_;
  std::unique_ptr<orchestrator::DataPlane> data_plane_;
  std::unique_ptr<session::SessionServer> sessions_;
  std::unique_ptr<capture_service::CaptureRegistry> captures_;  // before data_plane_ goes
  std::unique_ptr<metrics::MetricsServer> metrics_;             // null when daemon.metrics is off
  std::unique_ptr<control::CdiWriter> cdi_;  // null when daemon.cdi_spec is not given
  std::unique_ptr<control::ControlServer> control_;
};

}  // namespace daqiri
