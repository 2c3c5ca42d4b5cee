#include "system/fd_headroom.hpp"

#include <sys/resource.h>

#include "system/fd_table.hpp"

namespace daqiri::system {

size_t free_fds() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  auto open = open_fd_count();
  if (!open) return 0;
  return r.rlim_cur > *open ? r.rlim_cur - *open : 0;
}

}  // namespace daqiri::system
