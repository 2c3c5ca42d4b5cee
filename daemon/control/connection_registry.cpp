#include "control/connection_registry.hpp"

#include <charconv>

#include "system/fd_table.hpp"

namespace daqiri::control {

void ConnectionRegistry::record(int fd, PeerIdentity peer) {
  uint64_t inode = system::socket_inode(fd);
  std::lock_guard lock(mutex_);
  by_fd_[fd] = {std::move(peer), inode};
}

size_t ConnectionRegistry::open_for(uid_t uid) {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (auto it = by_fd_.begin(); it != by_fd_.end();) {
    if (uint64_t now = system::socket_inode(it->first); now == 0 || now != it->second.inode) {
      it = by_fd_.erase(it);
      continue;
    }
    n += it->second.peer.uid == uid ? 1 : 0;
    ++it;
  }
  return n;
}

std::optional<PeerIdentity> ConnectionRegistry::lookup(std::string_view grpc_peer) const {
  if (grpc_peer.starts_with("fd:")) {
    int fd = -1;
    auto digits = grpc_peer.substr(3);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), fd);
    if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
    std::lock_guard lock(mutex_);
    auto it = by_fd_.find(fd);
    if (it == by_fd_.end()) return std::nullopt;
    return it->second.peer;
  }
  constexpr std::string_view kRelay = "ipv4:127.0.0.1:";
  if (grpc_peer.starts_with(kRelay)) {
    uint16_t port = 0;
    auto digits = grpc_peer.substr(kRelay.size());
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
    std::lock_guard lock(mutex_);
    auto it = tcp_by_port_.find(port);
    if (it == tcp_by_port_.end()) return std::nullopt;
    PeerIdentity peer;
    peer.transport = PeerIdentity::Transport::kTcp;
    peer.address = it->second;
    peer.user = "tcp";
    return peer;
  }
  return std::nullopt;
}

void ConnectionRegistry::record_tcp(uint16_t relay_port, std::string peer) {
  std::lock_guard lock(mutex_);
  tcp_by_port_[relay_port] = std::move(peer);
}

void ConnectionRegistry::forget_tcp(uint16_t relay_port) {
  std::lock_guard lock(mutex_);
  tcp_by_port_.erase(relay_port);
}

}  // namespace daqiri::control
