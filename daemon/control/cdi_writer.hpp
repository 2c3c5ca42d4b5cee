// daemon.cdi_spec: the daemon's CDI spec (daqiri/common/cdi_spec.hpp) kept current for the
// container runtimes that read it: written as the daemon starts serving, again after each flow
// created or deleted, and removed when the daemon stops, so that no container is handed
// a flow that is gone or a socket nobody serves.
#pragma once

#include <mutex>
#include <string>

#include "core/model.hpp"

namespace daqiri::control {

class CdiWriter {
 public:
  // Writes the spec of `model`'s flows to `path` now.
  CdiWriter(std::string path, std::string socket, const core::Model& model);
  ~CdiWriter();
  CdiWriter(const CdiWriter&) = delete;
  CdiWriter& operator=(const CdiWriter&) = delete;

  // Rewrites it from the flows as they are now (any thread; a failure is logged, and the
  // flow change that asked for it stands).
  void refresh();

 private:
  std::string path_;
  std::string socket_;
  const core::Model& model_;
  std::mutex mutex_;  // one writer at a time, each writing the flows as they are then
};

}  // namespace daqiri::control
