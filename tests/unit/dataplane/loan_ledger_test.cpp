// LoanLedger's invariants on their own: what a stretch of released slots gives back is exactly
// what was lent in it, each buffer once, to its own pool, by index or as its object, across the
// ring's end, and nothing before the release.
#include "dataplane/loan_ledger.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "test_pools.hpp"

namespace daqiri::dataplane {
namespace {

// Lends `n` buffers of `pool` (region `region`) into slots [from, from + n); returns them.
std::vector<uint32_t> lend(LoanLedger& ledger, memory::BufferPool& pool, uint16_t region,
                           uint32_t from, uint32_t n, uint32_t ring_size) {
  std::vector<uint32_t> bufs(n);
  EXPECT_EQ(pool.alloc(bufs.data(), n), n);
  for (uint32_t i = 0; i < n; ++i)
    ledger.entries()[(from + i) & (ring_size - 1)] = LoanLedger::entry(region, bufs[i]);
  ledger.mark_by_index(from, from + n);
  return bufs;
}

TEST(LoanLedger, GivesBackExactlyTheStretchReleasedAndNothingBefore) {
  auto pool = memory::BufferPool::create("t", 256, 32, false);
  ASSERT_TRUE(pool);
  LoanLedger ledger(16, {&*pool});
  lend(ledger, *pool, 0, 0, 10, 16);
  EXPECT_EQ(pool->available(), 22u);
  ledger.give_back(4);
  EXPECT_EQ(ledger.returned(), 4u);
  EXPECT_EQ(pool->available(), 26u);
  ledger.give_back(4);  // nothing new released: nothing moves
  EXPECT_EQ(pool->available(), 26u);
  ledger.give_back(10);
  EXPECT_EQ(pool->available(), 32u);
}

TEST(LoanLedger, EachRegionsBuffersGoBackToTheirOwnPoolAcrossTheRingsEnd) {
  auto a = memory::BufferPool::create("a", 256, 16, false);
  auto b = memory::BufferPool::create("b", 256, 16, false);
  ASSERT_TRUE(a && b);
  LoanLedger ledger(8, {&*a, &*b});
  // Slots 0..5 from a, then 6..11 (wrapping past 8) from b, after 0..5 came back.
  lend(ledger, *a, 0, 0, 6, 8);
  ledger.give_back(6);
  EXPECT_EQ(a->available(), 16u);
  lend(ledger, *b, 1, 6, 6, 8);
  EXPECT_EQ(b->available(), 10u);
  ledger.give_back(12);
  EXPECT_EQ(a->available(), 16u);
  EXPECT_EQ(b->available(), 16u);
}

TEST(LoanLedger, ASlotThatLendsNothingGivesNothingBack) {
  auto pool = memory::BufferPool::create("t", 256, 8, false);
  ASSERT_TRUE(pool);
  LoanLedger ledger(8, {&*pool});
  uint32_t buf = 0;
  ASSERT_EQ(pool->alloc(&buf, 1), 1u);
  ledger.entries()[0] = LoanLedger::entry(0, LoanLedger::kNoBuffer);
  ledger.entries()[1] = LoanLedger::entry(0, buf);
  ledger.mark_by_index(0, 2);
  ledger.give_back(2);
  EXPECT_EQ(pool->available(), 8u);
  EXPECT_EQ(pool->refs(buf), 1u);  // a free buffer's count
}

TEST(LoanLedger, ABufferLentToTwoClientsIsFreeOnlyWhenBothGiveItBack) {
  auto pool = memory::BufferPool::create("t", 256, 8, false);
  ASSERT_TRUE(pool);
  LoanLedger first(8, {&*pool});
  LoanLedger second(8, {&*pool});
  uint32_t buf = 0;
  ASSERT_EQ(pool->alloc(&buf, 1), 1u);
  pool->lend(buf, 2);
  for (LoanLedger* l : {&first, &second}) {
    l->entries()[0] = LoanLedger::entry(0, buf);
    l->mark_by_index(0, 1);
  }
  first.give_back(1);
  EXPECT_EQ(pool->available(), 7u);
  second.give_back(1);
  EXPECT_EQ(pool->available(), 8u);
}

// A pool whose buffers belong to another allocator (a DPDK mempool): slots lent alone go back
// as their objects, slots lent by index by their counts, each exactly once however the two
// kinds interleave.
TEST(LoanLedger, ObjectsLentAloneAndBuffersLentByIndexEachComeBackOnce) {
  PoolOfObjects pool(64);
  ASSERT_TRUE(pool.pool);
  ASSERT_EQ(pool.pool->mode(), memory::BufferPool::Mode::kReturnedToOwner);
  LoanLedger ledger(16, {&*pool.pool});
  ASSERT_TRUE(ledger.lends_objects());
  // Slots 0..3 alone (objects 0..3), 4..5 by index (buffers 4, 5), 6..7 alone (6, 7), then
  // around the ring: 8..19 alone after 0..7 came back.
  for (uint32_t s = 0; s < 4; ++s)
    ledger.objects()[s] = pool.object_of[s];
  for (uint32_t s = 4; s < 6; ++s)
    ledger.entries()[s] = LoanLedger::entry(0, s);
  ledger.mark_by_index(4, 6);
  for (uint32_t s = 6; s < 8; ++s)
    ledger.objects()[s] = pool.object_of[s];
  ledger.give_back(3);
  EXPECT_EQ(pool.returned(), 3u);
  ledger.give_back(8);
  EXPECT_EQ(pool.returned(), 8u);
  for (uint32_t s = 8; s < 20; ++s)
    ledger.objects()[s & 15] = pool.object_of[s];
  ledger.give_back(20);
  EXPECT_EQ(pool.returned(), 20u);
  for (uint32_t i = 0; i < 20; ++i)
    EXPECT_EQ(pool.back[i], 1) << i;
  for (uint32_t i = 20; i < 64; ++i)
    EXPECT_EQ(pool.back[i], 0) << i;
}

}  // namespace
}  // namespace daqiri::dataplane
