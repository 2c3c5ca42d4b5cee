// The NIC's time of a client's send time (SendClock): the NIC's reading at the last sync plus
// the host time since, in the NIC's ticks; past times are sent at once. A paced queue's bursts
// on such a NIC (BurstPacer): each starts once the one before took its time at the cap.
#include <gtest/gtest.h>

#include "backends/dpdk/burst_pacer.hpp"
#include "backends/dpdk/send_clock.hpp"

namespace daqiri::backends::dpdk {
namespace {

TEST(SendClock, CarriesHostTimesIntoTheNicsTicks) {
  SendClock ns;  // a real-time NIC clock: nanoseconds, another epoch
  EXPECT_TRUE(ns.stale(1));
  ns.sync(1'000'000'000'000, 5'000);
  EXPECT_EQ(ns.nic_ticks(1'000'000'000'000 + 2'500), 7'500u);
  EXPECT_EQ(ns.nic_ticks(999'000'000'000), 5'000u);  // past: at once
  EXPECT_FALSE(ns.stale(1'000'000'000'000 + SendClock::kResync - 1));
  EXPECT_TRUE(ns.stale(1'000'000'000'000 + SendClock::kResync));

  SendClock ticks(156'250'000);  // a free-running clock of 156.25 MHz
  ticks.sync(2'000'000'000ULL, 0);
  EXPECT_EQ(ticks.nic_ticks(2'000'000'000ULL + 1'000'000'000), 156'250'000u);
  EXPECT_EQ(ticks.nic_ticks(2'000'000'000ULL + 64), 10u);
}

TEST(SendClock, CalibratesTicksPerSecond) {
  EXPECT_EQ(ticks_per_second(20'000'500, 20'000'000), 1'000'000'000u);  // within 0.1 %: ns
  EXPECT_EQ(ticks_per_second(3'125'000, 20'000'000), 156'250'000u);
  EXPECT_EQ(ticks_per_second(5, 0), 1'000'000'000u);
}

// 1000 Mb/s is 8 ns a byte: a burst of 1250 bytes takes 10 us. Bursts submitted back to back
// leave that far apart; a burst after an idle spell leaves at once, with no credit saved up;
// 3 Mb/s does not divide 8000 bytes a burst evenly, and the remainders add up to the exact rate.
TEST(BurstPacer, SpacesBurstsByTheirBytesAtTheCap) {
  BurstPacer gig(1000);
  EXPECT_EQ(gig.start(1'000'000, 1250), 1'000'000u);
  EXPECT_EQ(gig.start(1'000'100, 1250), 1'010'000u);
  EXPECT_EQ(gig.start(1'000'200, 1250), 1'020'000u);
  EXPECT_EQ(gig.start(9'000'000, 1250), 9'000'000u);  // idle: now, not earlier

  BurstPacer slow(3);
  uint64_t at = 0;
  for (int i = 0; i < 3; ++i)
    at = slow.start(0, 1);  // 8000/3 ns each: 2666, 2667, 2667
  EXPECT_EQ(at, 5333u);
  EXPECT_EQ(slow.start(0, 0), 8000u);  // three bytes at 3 Mb/s: exactly 8 us
  EXPECT_FALSE(BurstPacer().pacing());
}

}  // namespace
}  // namespace daqiri::backends::dpdk
