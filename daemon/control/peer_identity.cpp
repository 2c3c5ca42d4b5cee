#include "control/peer_identity.hpp"

#include <pwd.h>
#include <sys/socket.h>

namespace daqiri::control {

std::string PeerIdentity::describe() const {
  if (transport == Transport::kTcp) return "tcp peer " + address;
  return "uid " + std::to_string(uid) + " (" + user + ")";
}

std::string user_name(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return pw.pw_name;
  }
  return std::to_string(uid);
}

Result<PeerIdentity> identify_unix_peer(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return fail_errno("getsockopt(SO_PEERCRED)");
  }
  PeerIdentity id;
  id.pid = cred.pid;
  id.uid = cred.uid;
  id.gid = cred.gid;
  std::vector<gid_t> groups(64);
  for (;;) {
    len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      break;
    }
    if (errno != ERANGE) return fail_errno("getsockopt(SO_PEERGROUPS)");
    groups.resize(len / sizeof(gid_t) + 1);  // the kernel said how many it has
  }
  id.groups = std::move(groups);
  id.user = user_name(id.uid);
  return id;
}

}  // namespace daqiri::control
