#include "dataplane/process_barrier.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace daqiri::dataplane {
namespace {

int membarrier(int command) {
  return static_cast<int>(::syscall(__NR_membarrier, command, 0, 0));
}

}  // namespace

bool process_barrier_available() {
  static const bool registered = [] {
    int commands = membarrier(MEMBARRIER_CMD_QUERY);
    if (commands < 0 || (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  }();
  return registered;
}

bool process_barrier() {
  return process_barrier_available() && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

}  // namespace daqiri::dataplane
