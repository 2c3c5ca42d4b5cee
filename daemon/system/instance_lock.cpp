#include "system/instance_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>

namespace daqiri::system {
namespace {

Result<> ensure_directory(const std::filesystem::path& dir, std::optional<gid_t> group) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return fail(ErrorCode::kFailedPrecondition, dir.string() + " is not a directory");
    }
    return {};
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail(ErrorCode::kInternal, "cannot create " + dir.string() + ": " + ec.message());
  // Group members must reach the socket inside; others need not see it.
  ::chmod(dir.c_str(), group ? 0750 : 0755);
  if (group && ::chown(dir.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    return fail_errno("chown " + dir.string());
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<InstanceLock>> InstanceLock::acquire(const std::string& socket_path,
                                                            std::optional<gid_t> group) {
  std::filesystem::path sock(socket_path);
  if (auto ok = ensure_directory(sock.parent_path(), group); !ok)
    return std::unexpected(ok.error());
  std::string path = socket_path + ".lock";
  // The owner may unlink the file while we open it: retry until we lock the file that is
  // still at the path.
  for (int attempt = 0; attempt < 8; ++attempt) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd) return fail_errno("open " + path);
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return fail_errno("flock " + path);
      char buf[32] = {};
      ssize_t n = ::pread(fd.get(), buf, sizeof buf - 1, 0);
      std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' '))
        pid.pop_back();
      return fail(ErrorCode::kAlreadyExists,
                  "another daqirid (pid " + pid + ") is serving " + socket_path +
                      "; stop it first or give this one another --socket");
    }
    struct stat held {};
    struct stat now {};
    if (::fstat(fd.get(), &held) != 0) return fail_errno("fstat " + path);
    if (::stat(path.c_str(), &now) != 0 || now.st_ino != held.st_ino || now.st_dev != held.st_dev) {
      continue;  // we locked a file its owner had just removed
    }
    std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd.get(), 0) != 0 ||
        ::pwrite(fd.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
      int e = errno;
      ::unlink(path.c_str());  // ours while we hold the lock, as in the destructor
      return fail_errno("write " + path, e);
    }
    return std::unique_ptr<InstanceLock>(new InstanceLock(path, std::move(fd)));
  }
  return fail(ErrorCode::kUnavailable, "could not lock " + path + ": it keeps being replaced");
}

InstanceLock::~InstanceLock() {
  // Unlink while still holding the lock, so no one can lock the old file and think it current.
  ::unlink(path_.c_str());
}

}  // namespace daqiri::system
