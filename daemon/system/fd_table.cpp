#include "system/fd_table.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string_view>

#include "daqiri/common/unique_fd.hpp"

namespace daqiri::system {

namespace {

struct ProcFdDir {
  UniqueFd dir{::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  int error = dir ? 0 : errno;
  std::mutex reading;  // one read position
};

ProcFdDir& proc_fd_dir() {
  static ProcFdDir d;
  return d;
}

}  // namespace

Result<> open_fd_table() {
  ProcFdDir& d = proc_fd_dir();
  if (!d.dir) return fail_errno("open /proc/self/fd", d.error);
  return {};
}

std::optional<size_t> open_fd_count() {
  ProcFdDir& d = proc_fd_dir();
  if (!d.dir) return std::nullopt;
  std::lock_guard lock(d.reading);
  if (::lseek(d.dir.get(), 0, SEEK_SET) != 0) return std::nullopt;
  alignas(dirent64) std::array<char, 8192> buf;
  size_t open = 0;
  for (;;) {
    ssize_t n = ::getdents64(d.dir.get(), buf.data(), buf.size());
    if (n < 0) return std::nullopt;
    if (n == 0) return open;
    for (size_t at = 0; at < static_cast<size_t>(n);) {
      uint16_t reclen = 0;  // records are 8-byte aligned: read the field, not the record
      std::memcpy(&reclen, buf.data() + at + offsetof(dirent64, d_reclen), sizeof reclen);
      open += buf[at + offsetof(dirent64, d_name)] != '.' ? 1 : 0;
      at += reclen;
    }
  }
}

uint64_t socket_inode(int fd) {
  ProcFdDir& d = proc_fd_dir();
  if (!d.dir || fd < 0) return 0;
  std::array<char, 16> name{};
  std::to_chars(name.data(), name.data() + name.size() - 1, fd);
  std::array<char, 64> link{};
  ssize_t n = ::readlinkat(d.dir.get(), name.data(), link.data(), link.size());
  constexpr std::string_view kPrefix = "socket:[";
  if (n <= 0) return 0;
  std::string_view target(link.data(), static_cast<size_t>(n));
  if (!target.starts_with(kPrefix) || !target.ends_with(']')) return 0;
  uint64_t inode = 0;
  auto digits = target.substr(kPrefix.size(), target.size() - kPrefix.size() - 1);
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), inode);
  return ec == std::errc() && ptr == digits.data() + digits.size() ? inode : 0;
}

}  // namespace daqiri::system
