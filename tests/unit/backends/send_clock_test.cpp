// The NIC's time of a client's send time (SendClock): the NIC's reading at the last sync plus
// the host time since, in the NIC's ticks; past times are sent at once.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace daqiri::backends::dpdk
