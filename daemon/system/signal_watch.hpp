// SIGTERM, SIGINT and SIGHUP as readable events on a signalfd instead of async handlers.
// block_process_signals() must run in main() before any thread starts, so that every thread
// inherits the mask and only the signalfd sees these signals.
#pragma once

#include <chrono>
#include <optional>

#include "daqiri/common/result.hpp"
#include "daqiri/common/unique_fd.hpp"

namespace daqiri::system {

class SignalWatch {
 public:
  static void block_process_signals();
  static Result<SignalWatch> open();

  // The next signal, or nullopt when `timeout` passed first (no timeout: wait forever).
  std::optional<int> wait(std::optional<std::chrono::milliseconds> timeout);

 private:
  explicit SignalWatch(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace daqiri::system
