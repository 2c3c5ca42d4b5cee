// Maps a gRPC call back to the kernel identity of its connection. The Unix listener records
// each accepted fd before gRPC adopts it; gRPC names such a connection "fd:N" in
// ServerContext::peer(). A number is reused only after gRPC closed the fd, and the listener
// overwrites the entry before the new connection carries any call. Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
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
  // Recorded connections of `uid` still open. gRPC closes them without telling us, so an
  // entry is live while its fd number still names the socket it was recorded with (the same
  // inode, read from /proc/self/fd without touching the fd: system/fd_table.hpp); the others
  // are forgotten here.
  size_t open_for(uid_t uid);

 private:
  struct Entry {
    PeerIdentity peer;
    uint64_t inode = 0;
  };
  mutable std::mutex mutex_;
  std::unordered_map<int, Entry> by_fd_;
};

}  // namespace daqiri::control
