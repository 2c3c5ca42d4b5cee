// The DPDK environment abstraction layer, owned by the daemon: initialised once from the
// configuration, cleaned up on destruction (runtime directory included), so that a failed or
// finished daemon leaves no hugepage file and no socket behind.
#pragma once

#include <memory>
#include <string>

#include "config/config.hpp"
#include "daqiri/common/result.hpp"

namespace daqiri::backends::dpdk {

class Eal {
 public:
  static Result<std::unique_ptr<Eal>> start(const config::Config& c);
  ~Eal();
  Eal(const Eal&) = delete;
  Eal& operator=(const Eal&) = delete;

  [[nodiscard]] const std::string& file_prefix() const { return prefix_; }
  // Gives the calling thread an lcore id (mempool caches, per-lcore PMD state). Pollers call
  // it first thing; harmless to call twice.
  static void register_thread();

 private:
  explicit Eal(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string prefix_;
};

}  // namespace daqiri::backends::dpdk
