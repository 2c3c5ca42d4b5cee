// spdlog to stderr: colours only on a terminal; under systemd (JOURNAL_STREAM names our
// stderr) no timestamp and a "<N>" syslog priority prefix, which journald turns into the
// entry's priority.
#pragma once

#include "config/config.hpp"

namespace daqiri::system {

void setup_logging(config::LogLevel level);
void set_log_level(config::LogLevel level);

}  // namespace daqiri::system
