#include "system/signal_watch.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>

namespace daqiri::system {
namespace {

sigset_t watched() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void SignalWatch::block_process_signals() {
  sigset_t set = watched();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client hanging up must not kill the daemon
}

Result<SignalWatch> SignalWatch::open() {
  sigset_t set = watched();
  UniqueFd fd(::signalfd(-1, &set, SFD_CLOEXEC));
  if (!fd) return fail_errno("signalfd");
  return SignalWatch(std::move(fd));
}

std::optional<int> SignalWatch::wait(std::optional<std::chrono::milliseconds> timeout) {
  pollfd p{fd_.get(), POLLIN, 0};
  int ms = timeout ? static_cast<int>(timeout->count()) : -1;
  for (;;) {
    int rc = ::poll(&p, 1, ms);
    if (rc == 0) return std::nullopt;
    if (rc < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    signalfd_siginfo info{};
    if (::read(fd_.get(), &info, sizeof info) == sizeof info)
      return static_cast<int>(info.ssi_signo);
  }
}

}  // namespace daqiri::system
