#include "dataplane/handoff_ring.hpp"

#include <gtest/gtest.h>

#include <array>
#include <thread>
#include <vector>

namespace daqiri::dataplane {
namespace {

struct Item {
  uint32_t producer;
  uint32_t seq;
};

TEST(HandoffRing, HoldsItsCapacityInOrderAndRefusesMore) {
  HandoffRing<Item> ring(4);
  for (uint32_t i = 0; i < 4; ++i)
    ASSERT_TRUE(ring.push({0, i}));
  EXPECT_FALSE(ring.push({0, 4}));
  std::array<Item, 8> out{};
  ASSERT_EQ(ring.pop(out.data(), 3), 3u);
  EXPECT_EQ(out[2].seq, 2u);
  ASSERT_TRUE(ring.push({0, 4}));  // the cells taken are free again, round the ring
  ASSERT_EQ(ring.pop(out.data(), out.size()), 2u);
  EXPECT_EQ(out[0].seq, 3u);
  EXPECT_EQ(out[1].seq, 4u);
  EXPECT_EQ(ring.pop(out.data(), out.size()), 0u);
}

// Producers on threads of their own against one consumer: every value arrives once, each
// producer's in the order it pushed them (a full ring makes a producer try again).
TEST(HandoffRing, ManyProducersOneConsumerLoseNothingAndKeepEachOnesOrder) {
  constexpr uint32_t kProducers = 3, kEach = 20000;
  HandoffRing<Item> ring(64);
  std::vector<std::jthread> producers;
  for (uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&ring, p] {
      for (uint32_t i = 0; i < kEach;) {
        if (ring.push({p, i})) ++i;
      }
    });
  }
  std::array<uint32_t, kProducers> next{};
  uint32_t received = 0;
  std::array<Item, 32> out{};
  while (received < kProducers * kEach) {
    size_t n = ring.pop(out.data(), out.size());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_LT(out[i].producer, kProducers);
      ASSERT_EQ(out[i].seq, next[out[i].producer]) << "producer " << out[i].producer;
      ++next[out[i].producer];
    }
    received += static_cast<uint32_t>(n);
  }
  for (uint32_t p = 0; p < kProducers; ++p)
    EXPECT_EQ(next[p], kEach);
}

}  // namespace
}  // namespace daqiri::dataplane
