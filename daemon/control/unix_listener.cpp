#include "control/unix_listener.hpp"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "system/connection_acceptor.hpp"
#include "system/fd_headroom.hpp"
#include "system/socket_node.hpp"

namespace daqiri::control {

Result<std::unique_ptr<UnixListener>> UnixListener::bind(const std::string& path, mode_t mode,
                                                         std::optional<gid_t> group) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return fail_errno("socket(AF_UNIX)");
  ::unlink(path.c_str());  // stale: our caller holds the instance lock for this path
  if (auto ok = system::bind_socket_node(fd.get(), path, mode, group); !ok) {
    return std::unexpected(ok.error());
  }
  if (::listen(fd.get(), 128) != 0) {
    int e = errno;
    ::unlink(path.c_str());
    return fail_errno("listen " + path, e);
  }
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) {
    int e = errno;
    ::unlink(path.c_str());
    return fail_errno("eventfd", e);
  }
  return std::unique_ptr<UnixListener>(new UnixListener(path, std::move(fd), std::move(wake)));
}

UnixListener::UnixListener(std::string path, UniqueFd fd, UniqueFd wake)
    : path_(std::move(path)), fd_(std::move(fd)), wake_(std::move(wake)) {}

UnixListener::~UnixListener() {
  stop();
  ::unlink(path_.c_str());
}

Result<> UnixListener::start(AcceptFn on_accept) {
  thread_ = std::thread([this, fn = std::move(on_accept)] { accept_loop(fn); });
  return {};
}

void UnixListener::stop() {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof one);
  thread_.join();
}

void UnixListener::accept_loop(const AcceptFn& on_accept) {
  pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
  // gRPC's endpoint for an adopted fd expects a non-blocking socket.
  system::ConnectionAcceptor acceptor(path_, fd_.get(), SOCK_CLOEXEC | SOCK_NONBLOCK);
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("{}: poll: {}", path_, std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    UniqueFd conn = acceptor.accept();
    if (!conn) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED && errno != EMFILE &&
          errno != ENFILE) {
        spdlog::warn("{}: accept: {}", path_, std::strerror(errno));
      }
      continue;
    }
    if (!system::fds_to_spare(0)) {  // gRPC's own (system/fd_headroom.hpp)
      acceptor.count_refused();
      continue;
    }
    acceptor.kept();
    auto peer = identify_unix_peer(conn.get());
    if (!peer) {
      spdlog::warn("{}: dropping a connection: {}", path_, peer.error().message);
      continue;
    }
    spdlog::debug("{}: connection from {} pid {}", path_, peer->describe(), peer->pid);
    on_accept(std::move(conn), std::move(*peer));
  }
}

}  // namespace daqiri::control
