// A Unix socket's filesystem node made with its final mode and group, so that nothing is
// changed by path afterwards: a chown or chmod by path follows a link that someone able to
// write the folder put there in the meantime.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "daqiri/common/result.hpp"

namespace daqiri::system {

// Binds `fd` (an AF_UNIX socket) to `path`, whose node is created with `mode` (through the
// umask) and, when `group` is set, owned by that group (the binding thread's filesystem gid,
// which setfsgid changes for that thread alone).
Result<> bind_socket_node(int fd, const std::string& path, mode_t mode, std::optional<gid_t> group);

}  // namespace daqiri::system
