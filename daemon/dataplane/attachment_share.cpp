#include "dataplane/attachment_share.hpp"

#include <fcntl.h>

#include <string>

namespace daqiri::dataplane {

Result<UniqueFd> dup_for_client(int fd, const char* what) {
  UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!copy) return fail_errno(std::string("dup ") + what);
  return copy;
}

}  // namespace daqiri::dataplane
