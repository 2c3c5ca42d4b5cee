// Who is on the other end of a connection, as the kernel says (SO_PEERCRED, SO_PEERGROUPS),
// never as the peer claims.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "daqiri/common/result.hpp"

namespace daqiri::control {

struct PeerIdentity {
  enum class Transport { kUnix, kTcp };
  Transport transport = Transport::kUnix;
  pid_t pid = 0;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::vector<gid_t> groups;  // supplementary groups at connect time
  std::string user;           // login name, or the uid as a number
  std::string address;        // TCP: the peer address

  // "uid 1001 (alice)" or "tcp peer ipv4:10.0.0.2:5000"
  [[nodiscard]] std::string describe() const;
};

Result<PeerIdentity> identify_unix_peer(int fd);
std::string user_name(uid_t uid);

}  // namespace daqiri::control
