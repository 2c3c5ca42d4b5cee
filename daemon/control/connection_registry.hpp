// Maps a gRPC call back to the kernel identity of its connection. The Unix listener records
// each accepted fd before gRPC adopts it; gRPC names such a connection "fd:N" in
// ServerContext::peer(). A number is reused only after gRPC closed the fd, and the listener
// overwrites the entry before the new connection carries any call. Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "control/peer_identity.hpp"

namespace daqiri::control {

class ConnectionRegistry {
 public:
  void record(int fd, PeerIdentity peer);
  // A TCP connection the gate (tcp_gate.hpp) relays from `peer` ("ipv4:10.0.0.2:5000") to
  // gRPC's loopback TLS listener from local port `relay_port`; forgotten when it closes.
  void record_tcp(uint16_t relay_port, std::string peer);
  void forget_tcp(uint16_t relay_port);
  // The identity behind a gRPC peer string: "fd:N" (Unix, from the registry) or
  // "ipv4:127.0.0.1:PORT" (TCP through the gate: the peer it relays). nullopt for anything
  // else, a loopback connection to the TLS listener that did not come through the gate too.
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
  std::unordered_map<uint16_t, std::string> tcp_by_port_;
};

}  // namespace daqiri::control
