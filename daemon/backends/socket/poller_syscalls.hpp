// The socket calls a poller makes, straight to the kernel. glibc's wrappers are cancellation
// points: in a process with more than one thread each call switches the thread's cancel type
// on and off around the syscall (two atomic read-modify-writes), a tenth of a poller's time at
// one datagram a call. Pollers are never cancelled.
#pragma once

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace daqiri::backends::socket {

inline int recvmmsg_now(int fd, mmsghdr* msgs, unsigned n, int flags) {
  return static_cast<int>(::syscall(SYS_recvmmsg, fd, msgs, n, flags, nullptr));
}

inline int sendmmsg_now(int fd, mmsghdr* msgs, unsigned n, int flags) {
  return static_cast<int>(::syscall(SYS_sendmmsg, fd, msgs, n, flags));
}

inline ssize_t sendmsg_now(int fd, const msghdr* msg, int flags) {
  return ::syscall(SYS_sendmsg, fd, msg, flags);
}

inline ssize_t recv_now(int fd, void* buf, size_t len, int flags) {
  return ::syscall(SYS_recvfrom, fd, buf, len, flags, nullptr, nullptr);
}

}  // namespace daqiri::backends::socket
