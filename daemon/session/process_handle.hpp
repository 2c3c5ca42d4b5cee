// A client process held by a pidfd: readable (in epoll) once the process has exited. Its whole
// life is raw syscalls on purpose. pidfd_open(2) has no glibc wrapper that ThreadSanitizer
// intercepts, so to TSan the number still belongs to whatever fd it last saw there, often one
// gRPC accepted and closed in its own uninstrumented threads; an intercepted epoll_ctl or close
// on it would then look like a race with that fd. Kept out of TSan's view entirely, the pidfd
// is consistent: created, watched and closed where TSan does not look.
#pragma once

#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <utility>

namespace daqiri::session {

class ProcessHandle {
 public:
  ProcessHandle() = default;
  // Invalid (get() < 0, errno set) when the process is gone or pidfds are not supported.
  static ProcessHandle open(pid_t pid) {
    return ProcessHandle(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  }
  ~ProcessHandle() { reset(); }
  ProcessHandle(ProcessHandle&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  ProcessHandle& operator=(ProcessHandle&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ProcessHandle(const ProcessHandle&) = delete;
  ProcessHandle& operator=(const ProcessHandle&) = delete;

  [[nodiscard]] int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  // Adds it to (EPOLLIN, data.fd = the pidfd) or removes it from an epoll set.
  // `tag` comes back in the event's data.u64.
  int watch(int epoll, uint64_t tag) const {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    return static_cast<int>(::syscall(SYS_epoll_ctl, epoll, EPOLL_CTL_ADD, fd_, &ev));
  }
  int unwatch(int epoll) const {
    return static_cast<int>(::syscall(SYS_epoll_ctl, epoll, EPOLL_CTL_DEL, fd_, nullptr));
  }

 private:
  explicit ProcessHandle(int fd) : fd_(fd) {}
  void reset() {
    if (fd_ >= 0) ::syscall(SYS_close, fd_);
    fd_ = -1;
  }
  int fd_ = -1;
};

}  // namespace daqiri::session
