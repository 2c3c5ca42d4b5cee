#include "daemon.hpp"

#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <vector>

#include "build_info.hpp"
#include "system/fd_table.hpp"
#include "system/signal_watch.hpp"

namespace daqiri {
namespace {

constexpr const char* kDefaultGroup = "daqiri";

std::optional<gid_t> lookup_group(const std::string& name) {
  std::vector<char> buf(65536);
  group gr{};
  group* found = nullptr;
  if (getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || !found) {
    return std::nullopt;
  }
  return gr.gr_gid;
}

// Control threads go where control_cores says; by default anywhere but the cores of pinned
// queues (a scrape or a gRPC call landing on a poller's core costs that poller packets).
Result<> pin_control_thread(const config::Config& config) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (!config.daemon.control_cores.empty()) {
    for (int c : config.daemon.control_cores)
      CPU_SET(c, &set);
  } else {
    if (sched_getaffinity(0, sizeof set, &set) != 0) return fail_errno("sched_getaffinity");
    cpu_set_t rest = set;
    for (const auto& itf : config.interfaces) {
      for (const auto* queues : {&itf.rx_queues, &itf.tx_queues}) {
        for (const auto& q : *queues) {
          if (q.core >= 0 && q.core < CPU_SETSIZE) CPU_CLR(q.core, &rest);
        }
      }
    }
    if (CPU_COUNT(&rest) == 0 || CPU_EQUAL(&rest, &set)) return {};  // nothing to keep clear
    set = rest;
  }
  // Threads started after this (gRPC's, the listener's) inherit the mask.
  if (sched_setaffinity(0, sizeof set, &set) != 0) return fail_errno("sched_setaffinity");
  return {};
}

}  // namespace

Result<std::unique_ptr<Daemon>> Daemon::start(config::Config config) {
  std::unique_ptr<Daemon> d(new Daemon());
  const config::DaemonConfig& dc = config.daemon;

  std::optional<gid_t> group;
  if (dc.socket_group) {
    group = lookup_group(*dc.socket_group);
    if (!group) {
      return fail(ErrorCode::kFailedPrecondition,
                  "daemon.socket_group: no group named \"" + *dc.socket_group + "\"");
    }
  } else {
    group = lookup_group(kDefaultGroup);
    if (!group) {
      spdlog::warn(
          "group \"{}\" does not exist: only root can reach {} (create the group or set "
          "daemon.socket_group)",
          kDefaultGroup, dc.socket_path);
    }
  }
  if (auto ok = pin_control_thread(config); !ok) return std::unexpected(ok.error());
  if (auto ok = system::open_fd_table(); !ok) return std::unexpected(ok.error());

  auto lock = system::InstanceLock::acquire(dc.socket_path, group);
  if (!lock) return std::unexpected(lock.error());
  d->lock_ = std::move(*lock);

  d->policy_ = std::make_unique<control::AccessPolicy>(dc.access, lookup_group(kDefaultGroup),
                                                       dc.tcp && dc.tcp->admin);
  d->model_ = std::make_unique<core::Model>(std::move(config));
  const config::DaemonConfig& kept = d->model_->config().daemon;

  auto dp = orchestrator::DataPlane::start(d->model_->config());
  if (!dp) return std::unexpected(dp.error());
  d->data_plane_ = std::move(*dp);
  for (const auto& flow : d->model_->flows()) {
    if (auto ok = d->data_plane_->add_flow(flow); !ok) {
      return fail(ok.error().code, "flow " + flow.name + ": " + ok.error().message);
    }
  }
  for (const auto& reorder : d->model_->config().reorders) {
    if (auto ok = d->data_plane_->add_reorder(reorder); !ok) {
      return fail(ok.error().code, "reorder " + reorder.name + ": " + ok.error().message);
    }
  }
  auto sessions = session::SessionServer::start(session::session_socket_path(kept.socket_path),
                                                kept.limits, group, *d->data_plane_);
  if (!sessions) return std::unexpected(sessions.error());
  d->sessions_ = std::move(*sessions);
  d->captures_ =
      std::make_unique<capture_service::CaptureRegistry>(*d->data_plane_, kept.capture_dirs);

  control::ControlServerOptions control_options;
  control_options.socket_path = kept.socket_path;
  control_options.socket_group = group;
  control_options.tcp = kept.tcp;
  control_options.connections_per_user = kept.limits.control_connections_per_user;
  control_options.tcp_limits = {kept.limits.tcp_connections_per_peer,
                                kept.limits.tcp_connections_total};
  if (!kept.metrics_address.empty()) {
    auto m = metrics::MetricsServer::start(kept.metrics_address, *d->data_plane_, *d->sessions_);
    if (!m) return std::unexpected(m.error());
    d->metrics_ = std::move(*m);
    control_options.interceptors.push_back(d->metrics_->interceptor_factory());
    spdlog::info("metrics on http://{}/metrics", kept.metrics_address);
  }
  if (!kept.cdi_spec.empty()) {
    d->cdi_ = std::make_unique<control::CdiWriter>(kept.cdi_spec, kept.socket_path, *d->model_);
    spdlog::info("CDI spec of the flows at {}", kept.cdi_spec);
  }
  auto control = control::ControlServer::start(
      std::move(control_options),
      {*d->model_, *d->policy_, *d->data_plane_, *d->sessions_, *d->captures_, d->cdi_.get()});
  if (!control) return std::unexpected(control.error());
  d->control_ = std::move(*control);
  return d;
}

namespace {
constexpr std::chrono::milliseconds kHealthTick{500};
// An idle poller parks a second at most: five without a loop is a poller that is stuck.
constexpr std::chrono::milliseconds kPollerStallLimit{5000};
}  // namespace

int Daemon::run() {
  auto signals = system::SignalWatch::open();
  if (!signals) {
    spdlog::critical("{}", signals.error().message);
    return 1;
  }
  const config::Config& c = model_->config();
  std::string status = "serving " + std::to_string(c.interfaces.size()) + " interfaces, " +
                       std::to_string(model_->flows().size()) + " flows on " + c.daemon.socket_path;
  notifier_.ready(status);
  spdlog::info("daqirid {} ready: {} (config: {})", build::kVersion, status, c.source);

  // A health tick: NOT_SERVING while attachments are parked, flows linger or a poller is
  // stalled, and the systemd watchdog unfed while a poller is stalled (systemd then restarts
  // the daemon).
  auto watchdog = notifier_.watchdog_interval();
  auto tick = std::min(watchdog.value_or(kHealthTick), kHealthTick);
  auto last_ping = std::chrono::steady_clock::now();
  bool serving = true;
  for (;;) {
    auto sig = signals->wait(tick);
    if (!sig) {
      auto stalled = data_plane_->stalled_pollers(kPollerStallLimit);
      data_plane_->reap_parked();
      size_t parked = data_plane_->parked();
      size_t lingering = data_plane_->lingering_flows();
      bool healthy = stalled.empty() && parked == 0 && lingering == 0;
      if (healthy != serving) {
        serving = healthy;
        control_->set_serving(healthy);
        if (healthy) {
          spdlog::info("healthy again: SERVING");
        } else {
          std::string names;
          for (const auto& n : stalled)
            names += (names.empty() ? "" : ", ") + n;
          spdlog::error(
              "NOT_SERVING: {} attachment(s) parked; {} flow(s) lingering; poller(s) stalled for "
              "over {} s: {}",
              parked, lingering, kPollerStallLimit.count() / 1000, names.empty() ? "none" : names);
        }
      }
      auto now = std::chrono::steady_clock::now();
      if (watchdog && stalled.empty() && now - last_ping >= *watchdog) {
        notifier_.watchdog();
        last_ping = now;
      }
      continue;
    }
    if (*sig == SIGHUP) {
      spdlog::warn(
          "SIGHUP: configuration reload is not supported yet; restart daqirid to apply "
          "a changed file (flows can change at runtime through the control API)");
      continue;
    }
    spdlog::info("{}: draining", strsignal(*sig));
    break;
  }
  notifier_.stopping();
  control_->shutdown(std::chrono::seconds(2));
  control_.reset();
  cdi_.reset();  // no container is handed this daemon's flows from here on
  metrics_.reset();
  captures_.reset();  // captures close their files and their attachments
  sessions_.reset();  // every client's attachments end; their rings say DETACHED
  data_plane_.reset();
  lock_.reset();
  spdlog::info("daqirid stopped");
  return 0;
}

}  // namespace daqiri
