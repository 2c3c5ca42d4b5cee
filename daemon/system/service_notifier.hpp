// systemd's notify protocol (sd_notify): READY, STATUS, WATCHDOG, STOPPING. Without
// NOTIFY_SOCKET in the environment every call is a no-op. Thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace daqiri::system {

class ServiceNotifier {
 public:
  void ready(std::string_view status) const;
  void status(std::string_view status) const;
  void stopping() const;
  void watchdog() const;
  // How often to call watchdog(): half of WATCHDOG_USEC, if systemd asked for pings.
  [[nodiscard]] std::optional<std::chrono::milliseconds> watchdog_interval() const;
};

}  // namespace daqiri::system
