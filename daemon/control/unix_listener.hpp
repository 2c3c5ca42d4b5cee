// A listening Unix stream socket at a path, with an accept thread that identifies each peer by
// SO_PEERCRED and hands the connection on. The caller must own the path (InstanceLock): a
// stale socket file there is replaced. The file is removed again on destruction.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "control/peer_identity.hpp"
#include "daqiri/common/unique_fd.hpp"

namespace daqiri::control {

class UnixListener {
 public:
  using AcceptFn = std::function<void(UniqueFd, PeerIdentity)>;

  // Binds `path` with `mode`, group-owned by `group` when given. Startup only.
  static Result<std::unique_ptr<UnixListener>> bind(const std::string& path, mode_t mode,
                                                    std::optional<gid_t> group);
  ~UnixListener();
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  // Starts the accept thread; `on_accept` runs on it.
  Result<> start(AcceptFn on_accept);
  // Stops accepting; idempotent. Connections already handed on are not touched.
  void stop();
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  UnixListener(std::string path, UniqueFd fd, UniqueFd wake);
  void accept_loop(const AcceptFn& on_accept);

  std::string path_;
  UniqueFd fd_;
  UniqueFd wake_;  // eventfd that interrupts poll() on stop
  std::thread thread_;
};

}  // namespace daqiri::control
