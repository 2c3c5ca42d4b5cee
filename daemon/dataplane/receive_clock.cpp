#include "dataplane/receive_clock.hpp"

#include <fstream>
#include <string>

namespace daqiri::dataplane {
namespace {

// The kernel picks the TSC as its clocksource only when it found it invariant and in step
// across CPUs; otherwise extrapolating from it could drift or differ between cores.
bool kernel_keeps_time_with_tsc() {
#if defined(__x86_64__)
  std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  return (in >> source) && source == "tsc";
#else
  return false;
#endif
}

}  // namespace

void ReceiveClock::start_thread() {
  static const bool usable = kernel_keeps_time_with_tsc();
  state_ = State{};
  state_.enabled = usable;
}

#if defined(__x86_64__)
uint64_t ReceiveClock::resync(uint64_t tsc) {
  State& s = state_;
  uint64_t ns = realtime_ns();
  tsc += (__rdtsc() - tsc) / 2;  // the real clock was read between the two TSC readings
  if (s.cal_tsc == 0 || ns < s.cal_ns || tsc <= s.cal_tsc) {
    s.cal_tsc = tsc;  // the first reading, or the real clock stepped back: measure afresh
    s.cal_ns = ns;
  } else if (ns - s.cal_ns >= kResyncNs) {
    uint64_t measured =
        uint64_t((static_cast<unsigned __int128>(ns - s.cal_ns) << 32) / (tsc - s.cal_tsc));
    uint64_t off = measured > s.mult ? measured - s.mult : s.mult - measured;
    if (s.mult == 0) {
      s.mult = measured;
    } else if (off <= s.mult / 1000) {
      // Smoothed: one reading's jitter (tens of ns in a millisecond) would otherwise move the
      // rate by several ppm. NTP slews the real clock by at most 500 ppm, so a larger change
      // is a step of the clock, not a new rate, and is left out.
      s.mult = measured > s.mult ? s.mult + off / 8 : s.mult - off / 8;
    }
    s.cal_tsc = tsc;
    s.cal_ns = ns;
  }
  s.tsc0 = tsc;
  s.ns0 = ns;
  s.limit = s.mult == 0 ? 0 : uint64_t((static_cast<unsigned __int128>(kResyncNs) << 32) / s.mult);
  if (ns + kResyncNs < s.last) s.last = 0;  // stepped back for real: follow it
  uint64_t v = ns > s.last ? ns : s.last;
  s.last = v;
  return v;
}
#endif

}  // namespace daqiri::dataplane
