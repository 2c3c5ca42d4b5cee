// The data plane's clocks, read through the vDSO (no syscall): CLOCK_REALTIME for receive
// timestamps clients compare with other hosts, CLOCK_MONOTONIC for durations.
#pragma once

#include <time.h>

#include <cstdint>

namespace daqiri::dataplane {

inline uint64_t clock_ns(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}
// Receive timestamps, once per batch.
inline uint64_t realtime_ns() {
  return clock_ns(CLOCK_REALTIME);
}
inline uint64_t monotonic_ns() {
  return clock_ns(CLOCK_MONOTONIC);
}

}  // namespace daqiri::dataplane
