// accept() for a listening socket that keeps working when the process is out of fds.
// accept() failing with EMFILE leaves the connection queued and the socket readable, so a
// poll loop around it spins at full speed and the client waits forever. An acceptor keeps
// one fd in reserve: on EMFILE it gives that up for a moment, accepts the connection, lets the
// caller say why it is refused, closes it (the client sees a hang-up, not a hang) and takes
// the reserve back, as libuv and nginx do. One thread uses an acceptor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "daqiri/common/unique_fd.hpp"

namespace daqiri::system {

class ConnectionAcceptor {
 public:
  // `name` is for the log; `flags` go to accept4.
  ConnectionAcceptor(std::string name, int listen_fd, int flags);

  // A connection, or an invalid fd (errno says why) when there was none to take or it was
  // refused for want of fds; `refuse` gets the refused connection first, to tell its client.
  UniqueFd accept(const std::function<void(int)>& refuse = {});
  // The caller kept the connection accept() gave it: ends a streak of refusals (logged).
  void kept();
  // Counts a connection the caller refused for want of fds after taking it (it ran out while
  // setting the connection up): logged in the same streak as accept()'s own refusals.
  void count_refused();

 private:
  std::string name_;
  int listen_fd_;
  int flags_;
  UniqueFd reserve_;
  uint64_t streak_ = 0;  // refused since the last connection taken
};

}  // namespace daqiri::system
