// Filesystem access as another user, for the calling thread alone: what the daemon creates on a
// client's behalf (a capture file) is created only where that user could create it, and is
// theirs from the start. Raw syscalls: glibc's setgroups (and setfsuid's siblings setuid,
// setgid) apply to every thread of the process.
#pragma once

#include <sys/types.h>

#include <span>
#include <vector>

#include "daqiri/common/result.hpp"

namespace daqiri::system {

class ActingAs {
 public:
  // Switches the thread's filesystem uid and gid and its supplementary groups (needs
  // CAP_SETUID and CAP_SETGID); the destructor switches back.
  static Result<ActingAs> begin(uid_t uid, gid_t gid, std::span<const gid_t> groups);
  ~ActingAs();
  ActingAs(ActingAs&& other) noexcept;
  ActingAs(const ActingAs&) = delete;
  ActingAs& operator=(const ActingAs&) = delete;
  ActingAs& operator=(ActingAs&&) = delete;

 private:
  ActingAs(uid_t uid, gid_t gid, std::vector<gid_t> groups)
      : uid_(uid), gid_(gid), groups_(std::move(groups)) {}
  bool active_ = true;
  uid_t uid_;  // what to go back to
  gid_t gid_;
  std::vector<gid_t> groups_;
};

}  // namespace daqiri::system
