// Who may attach to a flow or a TX queue besides the daemon's admins (its `clients`).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace daqiri::core {

// The users and groups named, by the ids they had when the list was made (a container's
// process is known by the uid and gids the kernel reports for it); empty: every client.
struct ClientList {
  std::vector<std::string> users;  // as given: names or numbers
  std::vector<std::string> groups;
  std::vector<uint32_t> uids;
  std::vector<uint32_t> gids;
  [[nodiscard]] bool restricted() const { return !uids.empty() || !gids.empty(); }
  // A process of `uid`, primary group `gid` and supplementary groups `in`.
  [[nodiscard]] bool allows(uint32_t uid, uint32_t gid, const std::vector<uint32_t>& in) const {
    auto has = [](const std::vector<uint32_t>& v, uint32_t x) {
      return std::find(v.begin(), v.end(), x) != v.end();
    };
    return !restricted() || has(uids, uid) || has(gids, gid) ||
           std::any_of(in.begin(), in.end(), [&](uint32_t g) { return has(gids, g); });
  }
};

}  // namespace daqiri::core
