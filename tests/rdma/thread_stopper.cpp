// daqiri-thread-stopper: stops one thread of a process until told to let it go, the rest of
// the process running on (tests/integration/thread_stop.hpp), for the tests in the Soft-RoCE
// VM: a poller that does not come round, as a wedged verbs call would leave it.
//   daqiri-thread-stopper PID THREAD SECONDS
//       stops PID's thread named THREAD, prints "stopped", and lets it go on SIGTERM or SIGINT
//       or after SECONDS, whichever comes first. Exit 0 when the thread was stopped.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "integration/thread_stop.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s PID THREAD SECONDS\n", argv[0]);
    return 2;
  }
  pid_t pid = std::atoi(argv[1]);
  pid_t tid = daqiri::test::ThreadStop::find(pid, argv[2]);
  if (tid < 0) {
    std::fprintf(stderr, "no thread %s in process %d\n", argv[2], pid);
    return 1;
  }
  // Blocked before the stop, so that a signal sent once "stopped" is out is waited for.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  daqiri::test::ThreadStop stop(tid);
  if (!stop.ok()) {
    std::fprintf(stderr, "could not stop thread %d (%s)\n", tid, argv[2]);
    return 1;
  }
  std::printf("stopped\n");
  std::fflush(stdout);
  timespec limit{std::atoi(argv[3]), 0};
  sigtimedwait(&set, nullptr, &limit);
  stop.resume();
  std::printf("resumed\n");
  return 0;
}
