// The GPU examples' and benchmarks' common start: a session with daqirid and a GPU ring on one
// flow, or the reason on stderr.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "daqiri/gpu_rx_ring.hpp"

namespace daqiri::example {

struct GpuAttachment {
  std::unique_ptr<Client> client;
  std::unique_ptr<GpuRxRing> ring;
};

inline std::optional<GpuAttachment> attach_gpu_ring(const std::string& socket,
                                                    const std::string& name,
                                                    const RxOptions& options) {
  ClientOptions co;
  co.socket = socket;
  co.name = name;
  auto client = Client::connect(co);
  if (!client) {
    std::fprintf(stderr, "connect: %s\n", client.error().message.c_str());
    return std::nullopt;
  }
  auto ring = GpuRxRing::attach(**client, options);
  if (!ring) {
    std::fprintf(stderr, "attach: %s\n", ring.error().message.c_str());
    return std::nullopt;
  }
  return GpuAttachment{std::move(*client), std::move(*ring)};
}

}  // namespace daqiri::example
