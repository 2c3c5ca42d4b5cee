#include "system/connection_acceptor.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace daqiri::system {
namespace {

UniqueFd open_reserve() {
  return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

uint64_t fd_limit() {
  rlimit r{};
  return ::getrlimit(RLIMIT_NOFILE, &r) == 0 ? r.rlim_cur : 0;
}

}  // namespace

ConnectionAcceptor::ConnectionAcceptor(std::string name, int listen_fd, int flags)
    : name_(std::move(name)), listen_fd_(listen_fd), flags_(flags), reserve_(open_reserve()) {}

UniqueFd ConnectionAcceptor::accept(const std::function<void(int)>& refuse) {
  UniqueFd conn(::accept4(listen_fd_, nullptr, nullptr, flags_));
  if (conn) {
    if (!reserve_) reserve_ = open_reserve();  // lost to a thread that took the fd meanwhile
    return conn;
  }
  if (errno != EMFILE && errno != ENFILE) return conn;
  int err = errno;
  reserve_.reset();
  UniqueFd refused(::accept4(listen_fd_, nullptr, nullptr, flags_));
  if (refused) {
    if (refuse) refuse(refused.get());
    refused.reset();
    count_refused();
  } else {
    // No reserve to give (a thread took the fd meanwhile): wait a little rather than spin.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  reserve_ = open_reserve();
  errno = err;
  return {};
}

void ConnectionAcceptor::kept() {
  if (streak_ == 0) return;
  spdlog::info("{}: accepting connections again, after refusing {} for want of fds", name_,
               streak_);
  streak_ = 0;
}

void ConnectionAcceptor::count_refused() {
  if (streak_++ == 0) {
    spdlog::warn(
        "{}: out of file descriptors ({} open at most): refusing connections until some "
        "close",
        name_, fd_limit());
  }
}

}  // namespace daqiri::system
