// The process's fd table as /proc/self/fd shows it, read through one directory fd kept open
// from the first use. Counting fds that way takes no fd number of its own, and naming the file
// behind a number reads its link in the table, not the fd itself: gRPC closes the connection
// fds we hand it without telling us, and a call on such a number (an fstat, or an opendir
// whose fd takes it over) raced with whoever reused it (ThreadSanitizer saw both).
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "daqiri/common/result.hpp"

namespace daqiri::system {

// Opens the directory fd, once for the process's life: at start, so that a daemon that cannot
// count its fds (and would refuse every client for want of them) does not start.
Result<> open_fd_table();

// Open fds, the table's own among them; nullopt when /proc/self/fd cannot be read.
std::optional<size_t> open_fd_count();

// The inode of the socket `fd` names now ("socket:[INODE]"); 0 when it names nothing or no
// socket.
uint64_t socket_inode(int fd);

}  // namespace daqiri::system
