#include "system/socket_node.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

namespace daqiri::system {

Result<> bind_socket_node(int fd, const std::string& path, mode_t mode,
                          std::optional<gid_t> group) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    return fail(ErrorCode::kInvalidArgument, "socket path too long: " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  // The raw syscall: glibc's setfsgid is per thread too, but says nothing of a failure.
  long old_fsgid = group ? ::syscall(SYS_setfsgid, *group) : -1;
  mode_t old_mask = ::umask(~mode & 0777);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int err = errno;
  ::umask(old_mask);
  if (group) ::syscall(SYS_setfsgid, old_fsgid);
  if (rc != 0) return fail_errno("bind " + path, err);
  struct stat st {};
  if (group && (::lstat(path.c_str(), &st) != 0 || st.st_gid != *group)) {
    ::unlink(path.c_str());
    return fail(ErrorCode::kFailedPrecondition,
                "socket " + path + " was not created with group " + std::to_string(*group));
  }
  return {};
}

}  // namespace daqiri::system
