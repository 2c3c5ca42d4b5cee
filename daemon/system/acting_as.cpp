#include "system/acting_as.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace daqiri::system {
namespace {

// setfsuid/setfsgid return the previous id and cannot report a failure; asking again with an
// impossible id (-1) returns the id in force, which tells whether the switch took.
long set_fsuid(uid_t uid) {
  return ::syscall(SYS_setfsuid, uid);
}
long set_fsgid(gid_t gid) {
  return ::syscall(SYS_setfsgid, gid);
}
long set_groups(std::span<const gid_t> groups) {
  return ::syscall(SYS_setgroups, groups.size(), groups.data());
}

}  // namespace

Result<ActingAs> ActingAs::begin(uid_t uid, gid_t gid, std::span<const gid_t> groups) {
  int n = ::getgroups(0, nullptr);
  std::vector<gid_t> old_groups(n > 0 ? static_cast<size_t>(n) : 0);
  if (n > 0 && ::getgroups(n, old_groups.data()) != n) return fail_errno("getgroups");
  if (set_groups(groups) != 0) return fail_errno("setgroups (the unit must grant CAP_SETGID)");
  auto old_gid = static_cast<gid_t>(set_fsgid(gid));
  auto old_uid = static_cast<uid_t>(set_fsuid(uid));
  ActingAs acting(old_uid, old_gid, std::move(old_groups));
  if (static_cast<uid_t>(set_fsuid(static_cast<uid_t>(-1))) != uid ||
      static_cast<gid_t>(set_fsgid(static_cast<gid_t>(-1))) != gid) {
    return fail(ErrorCode::kPermissionDenied,
                "cannot act as uid " + std::to_string(uid) +
                    " (the unit must grant CAP_SETUID and CAP_SETGID)");
  }
  return acting;
}

ActingAs::ActingAs(ActingAs&& other) noexcept
    : uid_(other.uid_), gid_(other.gid_), groups_(std::move(other.groups_)) {
  other.active_ = false;
}

ActingAs::~ActingAs() {
  if (!active_) return;
  set_fsuid(uid_);  // first: back to root's filesystem capabilities for the rest
  set_fsgid(gid_);
  set_groups(groups_);
}

}  // namespace daqiri::system
