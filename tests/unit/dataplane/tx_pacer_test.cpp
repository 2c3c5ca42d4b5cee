#include "dataplane/tx_pacer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace daqiri::dataplane {
namespace {

constexpr uint64_t kMs = 1'000'000;

// A queue with frames always waiting, polled every `poll_ns` for `seconds`: the bytes it starts.
uint64_t sent_in(TxPacer& pacer, uint64_t start_ns, uint64_t poll_ns, double seconds,
                 uint32_t frame) {
  uint64_t sent = 0;
  auto end = start_ns + static_cast<uint64_t>(seconds * 1e9);
  for (uint64_t t = start_ns; t <= end; t += poll_ns) {
    pacer.refill(t);
    uint64_t started = 0;
    while (pacer.budget() != 0) {  // a frame starts while any budget is left
      pacer.spend(frame);
      started += frame;
    }
    sent += started;
  }
  return sent;
}

TEST(TxPacer, UnpacedQueuesHaveNoLimit) {
  TxPacer unpaced(0, 1518);
  unpaced.refill();
  unpaced.spend(1'000'000);
  EXPECT_EQ(unpaced.budget(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(unpaced.first_served(3), 0u);
  EXPECT_EQ(unpaced.first_served(3), 0u);
}

// 80 Mb/s is 10 MB/s: over a second, polled every 10 us or every millisecond, it starts 10 MB
// give or take the bucket (two 9018-byte frames) and one frame, whatever the frame size.
TEST(TxPacer, TheLongRunRateIsTheCap) {
  for (uint32_t frame : {64u, 1000u, 9000u}) {
    for (uint64_t poll : {uint64_t{10'000}, kMs}) {
      const uint64_t depth = 2 * 9018;
      TxPacer pacer(80, 9018, 0);
      uint64_t sent = sent_in(pacer, 0, poll, 1.0, frame);
      EXPECT_LE(sent, 10'000'000 + depth + frame) << frame << " B every " << poll << " ns";
      EXPECT_GE(sent, 10'000'000 - frame) << frame << " B every " << poll << " ns";
    }
  }
}

// A queue quiet for a long time may then send its bucket at once, and no more.
TEST(TxPacer, AnIdleQueueSavesNoMoreThanItsBucket) {
  TxPacer pacer(8, 2048, 0);  // 1 MB/s; the bucket: two 2048-byte frames
  pacer.refill(0);
  EXPECT_EQ(pacer.budget(), 4096u);
  pacer.spend(4096);
  EXPECT_EQ(pacer.budget(), 0u);
  pacer.refill(0);
  EXPECT_EQ(pacer.budget(), 0u);
  uint64_t t = 3600ull * 1'000'000'000;  // an hour later
  pacer.refill(t);
  EXPECT_EQ(pacer.budget(), 4096u);
  // Fractions of a byte are kept: at 1 byte a microsecond, a byte owed is repaid by ten polls
  // 100 ns apart, and only then may the next frame start.
  pacer.spend(4096 + 1);
  for (int i = 0; i < 10; ++i) {
    pacer.refill(t += 100);
    EXPECT_EQ(pacer.budget(), 0u) << i;
  }
  pacer.refill(t += 100);
  EXPECT_EQ(pacer.budget(), 1u);
}

// Whoever has frames waiting, the first served moves on each poll.
TEST(TxPacer, PacedQueuesServeTheirClientsInTurn) {
  TxPacer pacer(8, 2048, 0);
  EXPECT_EQ(pacer.first_served(3), 0u);
  EXPECT_EQ(pacer.first_served(3), 1u);
  EXPECT_EQ(pacer.first_served(3), 2u);
  EXPECT_EQ(pacer.first_served(3), 0u);
  EXPECT_EQ(pacer.first_served(0), 0u);
  EXPECT_EQ(served(2, 0, 3), 2u);
  EXPECT_EQ(served(2, 1, 3), 0u);
  EXPECT_EQ(served(2, 2, 3), 1u);
}

}  // namespace
}  // namespace daqiri::dataplane
