// Receive timestamps (CLOCK_REALTIME, once a poll) for poller threads. clock_gettime through
// the vDSO costs 16-40 ns a call on our hosts and orders itself behind the poll's outstanding
// loads (RDTSCP, or LFENCE then RDTSC), more than a whole packet's share of a poll at 64 bytes.
// Where the kernel keeps time with the TSC, a poller thread instead extrapolates from a plain
// RDTSC: the real clock is read once a millisecond (kResyncNs), and the TSC's rate is learnt
// from those readings (a rate is taken only when two readings in a row agree on it). A thread's
// readings never go backwards unless the real clock stepped back by more than kResyncNs (then they
// follow it). Threads that did not call start_thread(), and hosts without a TSC clocksource, read
// the real clock every time.
#pragma once

#include <cstdint>

#include "dataplane/clock.hpp"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace daqiri::dataplane {

// One poller thread's extrapolation (ReceiveClock).
struct ReceiveClockState {
  bool enabled = false;
  uint64_t tsc0 = 0;  // the anchor: a TSC reading and the real time then
  uint64_t ns0 = 0;
  uint64_t limit = 0;    // TSC ticks after the anchor until the next reading (0: every call)
  uint64_t mult = 0;     // nanoseconds per tick, 32.32 fixed point (0: not learnt yet)
  uint64_t cal_tsc = 0;  // the reading the rate is measured from
  uint64_t cal_ns = 0;
  uint64_t candidate = 0;  // a rate measured once that differs from `mult`
  uint64_t last = 0;       // the latest value handed out
};

class ReceiveClock {
 public:
  static constexpr uint64_t kResyncNs = 1'000'000;

  // On a poller thread, before its loop: extrapolate from the TSC if the kernel's clocksource
  // is the TSC (read once per process from sysfs).
  static void start_thread();
  // Whether this thread extrapolates (it has learnt the TSC's rate).
  [[nodiscard]] static bool extrapolating() { return state_.limit != 0; }

  [[gnu::always_inline]] static uint64_t now_ns() {
#if defined(__x86_64__)
    State& s = state_;
    if (s.enabled) {
      uint64_t t = __rdtsc();
      uint64_t d = t - s.tsc0;
      if (d >= s.limit) [[unlikely]]
        return resync();
      uint64_t v = s.ns0 + scale(d, s.mult);
      v = v > s.last ? v : s.last;
      s.last = v;
      return v;
    }
#endif
    return realtime_ns();
  }

 private:
  using State = ReceiveClockState;
  static uint64_t scale(uint64_t ticks, uint64_t mult) {
    return uint64_t((static_cast<unsigned __int128>(ticks) * mult) >> 32);
  }
#if defined(__x86_64__)
  // Reads the real clock and re-anchors (and learns the rate); returns the stamp.
  static uint64_t resync();
#endif

  [[gnu::tls_model("initial-exec")]] static inline thread_local constinit State state_{};
};

}  // namespace daqiri::dataplane
