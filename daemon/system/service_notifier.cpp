#include "system/service_notifier.hpp"

#include <systemd/sd-daemon.h>

#include <string>

namespace daqiri::system {

void ServiceNotifier::ready(std::string_view status) const {
  std::string msg = "READY=1\nSTATUS=" + std::string(status);
  sd_notify(0, msg.c_str());
}

void ServiceNotifier::status(std::string_view status) const {
  std::string msg = "STATUS=" + std::string(status);
  sd_notify(0, msg.c_str());
}

void ServiceNotifier::stopping() const {
  sd_notify(0, "STOPPING=1\nSTATUS=stopping");
}

void ServiceNotifier::watchdog() const {
  sd_notify(0, "WATCHDOG=1");
}

std::optional<std::chrono::milliseconds> ServiceNotifier::watchdog_interval() const {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::nullopt;
  return std::chrono::milliseconds(std::max<uint64_t>(usec / 2000, 1));
}

}  // namespace daqiri::system
