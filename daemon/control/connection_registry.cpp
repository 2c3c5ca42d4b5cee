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
  if (grpc_peer.starts_with("ipv4:") || grpc_peer.starts_with("ipv6:")) {
    PeerIdentity peer;
    peer.transport = PeerIdentity::Transport::kTcp;
    peer.address = std::string(grpc_peer);
    peer.user = "tcp";
    return peer;
  }
  return std::nullopt;
}

}  // namespace daqiri::control
