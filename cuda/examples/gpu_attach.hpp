// The GPU examples' and benchmarks' common start: a session with daqirid and a GPU ring (or a
// host ring mapped for the GPU) on one flow, or the reason on stderr.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "daqiri/gpu_rx_ring.hpp"
#include "daqiri/mapped_rx_ring.hpp"

namespace daqiri::example {

struct GpuAttachment {
  std::unique_ptr<Client> client;
  std::unique_ptr<GpuRxRing> ring;
};

// A host ring read by kernels where it is (daqiri/mapped_rx_ring.hpp), mapped for the current
// device. Members go in reverse order: the mapping before the stream's memory.
struct MappedAttachment {
  std::unique_ptr<Client> client;
  RxStream* stream = nullptr;  // the client's
  std::unique_ptr<MappedRxRing> ring;
};

inline std::unique_ptr<Client> connect_to(const std::string& socket, const std::string& name) {
  ClientOptions co;
  co.socket = socket;
  co.name = name;
  auto client = Client::connect(co);
  if (!client) {
    std::fprintf(stderr, "connect: %s\n", client.error().message.c_str());
    return nullptr;
  }
  return std::move(*client);
}

inline std::optional<GpuAttachment> attach_gpu_ring(const std::string& socket,
                                                    const std::string& name,
                                                    const RxOptions& options) {
  auto client = connect_to(socket, name);
  if (!client) return std::nullopt;
  auto ring = GpuRxRing::attach(*client, options);
  if (!ring) {
    std::fprintf(stderr, "attach: %s\n", ring.error().message.c_str());
    return std::nullopt;
  }
  return GpuAttachment{std::move(client), std::move(*ring)};
}

inline std::optional<MappedAttachment> attach_mapped_ring(const std::string& socket,
                                                          const std::string& name,
                                                          const RxOptions& options) {
  MappedAttachment a;
  a.client = connect_to(socket, name);
  if (!a.client) return std::nullopt;
  auto stream = a.client->attach_rx(options);
  if (!stream) {
    std::fprintf(stderr, "attach: %s\n", stream.error().message.c_str());
    return std::nullopt;
  }
  a.stream = *stream;
  auto ring = MappedRxRing::map(*a.stream);
  if (!ring) {
    std::fprintf(stderr, "map: %s\n", ring.error().message.c_str());
    return std::nullopt;
  }
  a.ring = std::move(*ring);
  return a;
}

}  // namespace daqiri::example
