// One datagram with file descriptors attached (SCM_RIGHTS), over a SOCK_SEQPACKET socket.
// Header-only; used by the daemon's session server and the client library.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <span>
#include <vector>

#include "daqiri/common/result.hpp"
#include "daqiri/common/unique_fd.hpp"

namespace daqiri {

inline constexpr size_t kMaxPassedFds = 8;

inline Result<> send_with_fds(int sock, const void* data, size_t len, std::span<const int> fds) {
  if (fds.size() > kMaxPassedFds) return fail(ErrorCode::kInternal, "too many fds to pass");
  iovec iov{const_cast<void*>(data), len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  if (n < 0) return fail_errno("sendmsg");
  if (static_cast<size_t>(n) != len) return fail(ErrorCode::kInternal, "short sendmsg");
  return {};
}

// Receives one datagram into `buf`; fds that came with it land in `fds` (owned). Returns the
// datagram's length; 0 means the peer closed. A truncated datagram is an error.
inline Result<size_t> recv_with_fds(int sock, void* buf, size_t cap, std::vector<UniqueFd>& fds,
                                    int flags = 0) {
  iovec iov{buf, cap};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
  if (n < 0) return fail_errno("recvmsg");
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
  }
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    return fail(ErrorCode::kInvalidArgument, "message too large");
  }
  return static_cast<size_t>(n);
}

}  // namespace daqiri
