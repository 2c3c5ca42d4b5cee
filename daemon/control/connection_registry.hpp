// Maps a gRPC call back to the kernel identity of its connection. The Unix listener records
// each accepted fd before gRPC adopts it; gRPC names such a connection "fd:N" in
// ServerContext::peer(). A number is reused only after gRPC closed the fd, and the listener
// overwrites the entry before the new connection carries any call. Thread-safe.
#pragma once

#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "control/peer_identity.hpp"

namespace daqiri::control {

class ConnectionRegistry {
 public:
  void record(int fd, PeerIdentity peer);
  // The identity behind a gRPC peer string: "fd:N" (Unix, from the registry) or
  // "ipv4:…"/"ipv6:…" (TCP through TLS). nullopt for anything else.
  [[nodiscard]] std::optional<PeerIdentity> lookup(std::string_view grpc_peer) const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<int, PeerIdentity> by_fd_;
};

}  // namespace daqiri::control
