#include "system/fd_headroom.hpp"

#include <dirent.h>
#include <sys/resource.h>

namespace daqiri::system {

size_t free_fds() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  size_t open = 0;
  while (const dirent* e = ::readdir(d))
    open += e->d_name[0] != '.' ? 1 : 0;
  ::closedir(d);
  return r.rlim_cur > open ? r.rlim_cur - open : 0;
}

}  // namespace daqiri::system
