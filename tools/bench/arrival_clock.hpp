// When a benchmark reader's packets came, for its rate (rx-bench, xsk-bench).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace daqiri::bench {

using Clock = std::chrono::steady_clock;

// When a run's packets came, for its rate: the clock is read at the first packet, then only on
// polls that bring nothing and at the end, not once a burst (at 60 million packets a second
// that read took a sixth of the DPDK client's core, VM, burst 32).
class ArrivalClock {
 public:
  // After each poll, with what it brought; false once a second has passed without anything
  // after something came (the sender is done).
  bool after_poll(uint64_t n) {
    if (n > 0) {
      if (!started_) first_ = Clock::now();
      started_ = flowing_ = true;
      return true;
    }
    auto now = Clock::now();
    if (flowing_) {
      last_ = now;  // the last arrival was before this look
      flowing_ = false;
    }
    return !started_ || now - last_ <= std::chrono::seconds(1);
  }
  void report(uint64_t packets, uint64_t bytes) {
    if (flowing_) last_ = Clock::now();
    double s = std::chrono::duration<double>(last_ - first_).count();
    std::printf("packets %llu bytes %llu seconds %.6f\n", static_cast<unsigned long long>(packets),
                static_cast<unsigned long long>(bytes), s);
  }

 private:
  Clock::time_point first_{}, last_{};
  bool started_ = false, flowing_ = false;
};

}  // namespace daqiri::bench
