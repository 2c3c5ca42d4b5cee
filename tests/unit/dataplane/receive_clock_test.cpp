// ReceiveClock: the pollers' receive stamps against the real clock.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "dataplane/poller.hpp"
#include "dataplane/receive_clock.hpp"

namespace daqiri::dataplane {
namespace {

// A poller thread's stamps stay between two readings of the real clock taken around them
// (within what extrapolating from the TSC may be off by), and never go backwards. A thread
// that did not start as a poller reads the real clock.
TEST(ReceiveClock, PollerStampsFollowTheRealClockAndNeverGoBack) {
  uint64_t worst = 0;
  uint64_t calls = 0;
  bool extrapolated = false;
  std::thread poller([&] {
    ReceiveClock::start_thread();
    uint64_t prev = 0;
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (std::chrono::steady_clock::now() < end) {
      uint64_t before = realtime_ns();
      uint64_t v = ReceiveClock::now_ns();
      uint64_t after = realtime_ns();
      ASSERT_GE(v, prev);
      prev = v;
      uint64_t off = v < before ? before - v : v > after ? v - after : 0;
      worst = std::max(worst, off);
      ++calls;
    }
    extrapolated = ReceiveClock::extrapolating();
  });
  poller.join();
  // A rate learnt wrong by a tenth would be off by up to 100 us a millisecond.
  EXPECT_LT(worst, 20'000u) << "over " << calls << " readings";
  EXPECT_FALSE(ReceiveClock::extrapolating());  // this thread did not start as a poller
  std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  source >> name;
#if defined(__x86_64__)
  EXPECT_EQ(extrapolated, name == "tsc") << "clocksource " << name;
#endif
  std::printf("clocksource %s: extrapolated %d, worst %llu ns off over %llu readings\n",
              name.c_str(), int(extrapolated), static_cast<unsigned long long>(worst),
              static_cast<unsigned long long>(calls));
}

}  // namespace
}  // namespace daqiri::dataplane
