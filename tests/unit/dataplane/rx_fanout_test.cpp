// RxFanout: one buffer to many clients by reference, full rings dropping alone, releases
// taken back once a poll.
#include <gtest/gtest.h>

#include "daqiri/frame.hpp"
#include "dataplane/rx_attachment.hpp"
#include "dataplane/rx_fanout.hpp"
#include "memory/buffer_pool.hpp"
#include "test_pools.hpp"

namespace daqiri::dataplane {
namespace {

TEST(RxFanout, OneBufferManyReferencesFullRingsDropAlone) {
  auto pool = memory::BufferPool::create("t", 2048, 256, false);
  auto roomy = RxAttachment::create(1, 128, Backpressure::kDropNew, {&*pool});
  auto tight = RxAttachment::create(2, 64, Backpressure::kDropNew, {&*pool});
  Epoch epoch;
  epoch.set_stopped();  // no poller thread here: replace() need not wait
  RxFanout fanout;
  ASSERT_TRUE(fanout.add(roomy->get(), epoch));
  ASSERT_TRUE(fanout.add(tight->get(), epoch));
  ASSERT_EQ(fanout.begin(), 2u);
  for (int i = 0; i < 100; ++i) {
    uint32_t b = 0;
    ASSERT_EQ(pool->alloc(&b, 1), 1u);
    uint16_t refs = fanout.deliver(desc(*pool, b), b, &*pool);
    EXPECT_EQ(refs, i < 64 ? 2 : 1) << i;
    pool->set_refs(b, refs);
  }
  fanout.publish();
  EXPECT_EQ((*tight)->counters.dropped_ring_full.load(), 36u);
  EXPECT_EQ((*roomy)->counters.packets.load(), 100u);
  // Both release everything: every buffer is back.
  client_ring(**roomy).publish_consumer(100);
  client_ring(**tight).publish_consumer(64);
  fanout.begin();
  EXPECT_EQ(pool->available(), 256u);
  // Closing one hands back its share and leaves the other running.
  (*tight)->lifecycle.closing.store(true);
  EXPECT_EQ(fanout.begin(), 1u);
  EXPECT_TRUE((*tight)->lifecycle.released.load());
}

// A socket poller reclaims after its first receive, or at the end of a poll that received
// nothing: only the first reclaim() after gather() takes releases back.
TEST(RxFanout, ReclaimsOnceAPoll) {
  auto pool = memory::BufferPool::create("t", 2048, 16, false);
  auto a = RxAttachment::create(1, 16, Backpressure::kDropNew, {&*pool});
  ASSERT_TRUE(pool && a);
  Epoch epoch;
  epoch.set_stopped();
  RxFanout fanout;
  ASSERT_TRUE(fanout.add(a->get(), epoch));
  ASSERT_EQ(fanout.begin(), 1u);
  uint32_t bufs[4];
  ASSERT_EQ(pool->alloc(bufs, 4), 4u);
  for (uint32_t b : bufs)
    pool->set_refs(b, fanout.deliver(desc(*pool, b), b, &*pool));
  fanout.publish();
  ASSERT_EQ(fanout.gather(), 1u);
  client_ring(**a).publish_consumer(2);
  EXPECT_EQ(fanout.reclaim(), 1u);
  EXPECT_EQ(pool->available(), 16u - 2u);
  client_ring(**a).publish_consumer(4);
  EXPECT_EQ(fanout.reclaim(), 1u);
  EXPECT_EQ(pool->available(), 16u - 2u) << "the same poll: already reclaimed";
  ASSERT_EQ(fanout.begin(), 1u);
  EXPECT_EQ(pool->available(), 16u);
}

constexpr uint32_t kBurst = 32;

// A lone client fed by polls that publish has its consumer index read once a few bursts are on
// loan, or when a burst might not fit; a poll after one that published nothing always reads it.
TEST(RxFanout, ALoneClientsReleasesAreTakenBackEveryFewBursts) {
  PoolOfObjects lent(1024);
  auto& pool = lent.pool;
  ASSERT_TRUE(pool);
  ASSERT_EQ(pool->available(), 0u);  // every buffer handed out
  const auto& object_of = lent.object_of;
  auto a = RxAttachment::create(1, 1024, Backpressure::kDropNew, {&*pool});
  ASSERT_TRUE(a);
  Epoch epoch;
  epoch.set_stopped();
  RxFanout fanout;
  ASSERT_TRUE(fanout.add(a->get(), epoch));
  auto ring = client_ring(**a);
  uint32_t next = 0;
  auto poll = [&](uint32_t frames, uint32_t burst = kBurst) {
    RxAttachment* got = fanout.begin_single(burst);
    EXPECT_EQ(got, a->get());
    if (got == nullptr) return;
    RxAttachment::Run run(*got, &*pool);
    for (uint32_t i = 0; i < frames; ++i, ++next)
      ASSERT_TRUE(run.push_alone<false>(desc(*pool, next), object_of[next]));
    run.finish();
    fanout.publish();
  };
  poll(kBurst);
  ring.publish_consumer(next);  // the client releases each burst at once
  poll(kBurst);                 // the last poll published: the index is left unread
  EXPECT_EQ(lent.returned(), 0u);
  ring.publish_consumer(next);
  poll(kBurst);
  poll(kBurst);
  EXPECT_EQ(lent.returned(), 0u);
  EXPECT_EQ((*a)->counters.on_loan.load(), 4 * kBurst);
  poll(0);  // 128 on loan: read, and 64 come back
  EXPECT_EQ(lent.returned(), 2 * kBurst);
  EXPECT_EQ((*a)->counters.on_loan.load(), 2 * kBurst);
  // A poll that published nothing: the next reads the index.
  ring.publish_consumer(next);
  poll(0);
  EXPECT_EQ(lent.returned(), 4 * kBurst);
  // Whatever is on loan, a burst that might not fit has the index read first.
  poll(1);
  ring.publish_consumer(next);
  poll(0, 1024);
  EXPECT_EQ(lent.returned(), 4 * kBurst + 1);
  // A lie is caught once the index is read: then no lone client is left to poll.
  poll(1);
  ring.publish_consumer(next + 5);
  poll(1);
  poll(0);
  EXPECT_FALSE((*a)->lifecycle.violated.load());
  EXPECT_EQ(fanout.begin_single(kBurst), nullptr) << "no publish since: read, and a lie";
  EXPECT_TRUE((*a)->lifecycle.violated.load());
  EXPECT_EQ(lent.returned(), 4 * kBurst + 1);
}

}  // namespace
}  // namespace daqiri::dataplane
