#include "control/access_policy.hpp"

#include <algorithm>

namespace daqiri::control {

const char* to_string(Role role) {
  switch (role) {
    case Role::kNone:
      return "none";
    case Role::kClient:
      return "client";
    case Role::kAdmin:
      return "admin";
  }
  return "?";
}

AccessPolicy::AccessPolicy(config::AccessPolicyConfig config,
                           std::optional<gid_t> default_client_group, bool tcp_admin)
    : config_(std::move(config)), tcp_admin_(tcp_admin) {
  if (config_.default_clients && default_client_group) {
    config_.clients.gids.push_back(*default_client_group);
  }
}

bool AccessPolicy::listed(const config::AccessList& list, const PeerIdentity& peer) {
  auto has = [](const auto& v, auto x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  if (has(list.uids, peer.uid)) return true;
  if (has(list.gids, peer.gid)) return true;
  return std::any_of(peer.groups.begin(), peer.groups.end(),
                     [&](gid_t g) { return has(list.gids, g); });
}

Role AccessPolicy::role_of(const PeerIdentity& peer) const {
  // TCP callers were already vetted by TLS; their role comes from daemon.tcp.role.
  if (peer.transport == PeerIdentity::Transport::kTcp) {
    return tcp_admin_ ? Role::kAdmin : Role::kClient;
  }
  if (peer.uid == 0 || listed(config_.admins, peer)) return Role::kAdmin;
  if (listed(config_.clients, peer)) return Role::kClient;
  return Role::kNone;
}

Result<> AccessPolicy::require(const PeerIdentity& peer, Role need, std::string_view action) const {
  Role have = role_of(peer);
  if (have >= need) return {};
  std::string msg = peer.describe() + " may not " + std::string(action) + ": it needs the " +
                    to_string(need) + " role";
  msg += have == Role::kNone ? " and is listed in neither daemon.access.admins nor "
                               "daemon.access.clients"
                             : " and has only the client role (daemon.access.admins grants admin)";
  return fail(ErrorCode::kPermissionDenied, std::move(msg));
}

}  // namespace daqiri::control
