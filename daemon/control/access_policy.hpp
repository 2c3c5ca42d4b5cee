// Roles from kernel identity: admins may mutate, clients may read and attach, anyone else is
// refused. uid 0 is always an admin. Immutable after construction: safe from any thread.
#pragma once

#include <optional>
#include <string_view>

#include "config/config.hpp"
#include "control/peer_identity.hpp"

namespace daqiri::control {

enum class Role { kNone, kClient, kAdmin };

const char* to_string(Role role);

class AccessPolicy {
 public:
  // default_client_group: group whose members are clients when the config lists no clients.
  AccessPolicy(config::AccessPolicyConfig config, std::optional<gid_t> default_client_group,
               bool tcp_admin);

  [[nodiscard]] Role role_of(const PeerIdentity& peer) const;
  // PERMISSION_DENIED naming the caller and what it lacks, unless peer holds `need`.
  [[nodiscard]] Result<> require(const PeerIdentity& peer, Role need,
                                 std::string_view action) const;

 private:
  [[nodiscard]] static bool listed(const config::AccessList& list, const PeerIdentity& peer);

  config::AccessPolicyConfig config_;
  bool tcp_admin_;
};

}  // namespace daqiri::control
