#include "dataplane/receive_clock.hpp"

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>

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
namespace {

// The real clock and the TSC at one moment: the tightest of three readings, each the real clock
// between two TSC readings. A thread preempted between the two would otherwise pair times up to
// a time slice apart.
std::pair<uint64_t, uint64_t> read_pair() {
  std::pair<uint64_t, uint64_t> best{};
  uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 3; ++i) {
    uint64_t before = __rdtsc();
    uint64_t ns = realtime_ns();
    uint64_t gap = __rdtsc() - before;
    if (gap < best_gap) {
      best_gap = gap;
      best = {before + gap / 2, ns};
    }
  }
  return best;
}

bool within_a_thousandth(uint64_t a, uint64_t b) {
  return (a > b ? a - b : b - a) <= b / 1000;
}

}  // namespace

uint64_t ReceiveClock::resync() {
  State& s = state_;
  auto [tsc, ns] = read_pair();
  if (s.cal_tsc == 0 || ns < s.cal_ns || tsc <= s.cal_tsc) {
    s.cal_tsc = tsc;  // the first reading, or the real clock stepped back: measure afresh
    s.cal_ns = ns;
  } else if (ns - s.cal_ns >= kResyncNs) {
    uint64_t measured =
        uint64_t((static_cast<unsigned __int128>(ns - s.cal_ns) << 32) / (tsc - s.cal_tsc));
    if (s.mult != 0 && within_a_thousandth(measured, s.mult)) {
      // Smoothed: one reading's jitter (tens of ns in a millisecond) would otherwise move the
      // rate by several ppm.
      s.mult =
          measured > s.mult ? s.mult + (measured - s.mult) / 8 : s.mult - (s.mult - measured) / 8;
      s.candidate = 0;
    } else if (s.candidate != 0 && within_a_thousandth(measured, s.candidate)) {
      s.mult = measured;  // a new rate, seen twice in a row (the first, or the old was wrong)
      s.candidate = 0;
    } else {
      // Once is not enough: a step of the real clock (NTP slews it by at most 500 ppm, so
      // more is a step) or a reading the thread was preempted across looks the same.
      s.candidate = measured;
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
