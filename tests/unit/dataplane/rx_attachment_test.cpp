// RxAttachment: the loan ledger of one client's RX ring: descriptors pushed, releases checked
// against what was lent, every buffer back in order, violations named.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "daqiri/ring.hpp"
#include "dataplane/rx_attachment.hpp"
#include "memory/buffer_pool.hpp"
#include "test_pools.hpp"

namespace daqiri::dataplane {
namespace {

// A compact ring holds 16-byte descriptors, each naming its frame's region (its pool), offset,
// length, flow and flags; a client that opens it as a full ring is refused, and releases give
// the buffers back as on a full ring.
TEST(RxAttachment, CompactDescriptorsNameEachFramesPoolAndPlace) {
  auto a_pool = memory::BufferPool::create("a", 2048, 64, false);
  auto b_pool = memory::BufferPool::create("b", 1024, 64, false);
  ASSERT_TRUE(a_pool && b_pool);
  auto a = RxAttachment::create(1, 64, Backpressure::kDropNew, {&*a_pool, &*b_pool}, true);
  ASSERT_TRUE(a);
  EXPECT_TRUE((*a)->compact());
  EXPECT_FALSE(abi::RingView::open((*a)->rings().data(), (*a)->rings().size(), DAQIRI_RING_RX,
                                   sizeof(daqiri_rx_desc)));
  auto ring = abi::RingView::open((*a)->rings().data(), (*a)->rings().size(),
                                  DAQIRI_RING_RX_COMPACT, sizeof(daqiri_rx_desc_compact));
  ASSERT_TRUE(ring);
  uint32_t bufs[40];
  ASSERT_EQ(a_pool->alloc(bufs, 20), 20u);
  ASSERT_EQ(b_pool->alloc(bufs + 20, 20), 20u);
  RxAttachment::Run run(**a, &*b_pool);
  for (uint32_t i = 20; i < 40; ++i) {
    daqiri_rx_desc d = desc(*b_pool, bufs[i]);
    d.length = 60 + i;
    d.flow_id = 0x80000000u + i;
    d.flags = DAQIRI_DESC_TRUNCATED;
    d.payload_offset = 42;  // not carried
    d.timestamp_ns = 5;     // not carried
    ASSERT_TRUE(run.push<true>(d, bufs[i]));
  }
  run.finish();
  for (uint32_t i = 0; i < 20; ++i) {
    daqiri_rx_desc d = desc(*a_pool, bufs[i]);
    d.flow_id = i;
    (*a)->push(d, bufs[i], &*a_pool);
  }
  (*a)->publish();
  ASSERT_EQ(ring->load_producer(), 40u);
  for (uint32_t k = 0; k < 40; ++k) {
    const auto& d = *ring->slot<daqiri_rx_desc_compact>(k);
    bool second = k < 20;  // the Run pushed b's frames first
    uint32_t i = second ? k + 20 : k - 20;
    EXPECT_EQ(d.region, second ? 1u : 0u) << k;
    EXPECT_EQ(daqiri_rx_compact_offset(&d),
              second ? b_pool->offset(bufs[i]) : a_pool->offset(bufs[i]))
        << k;
    EXPECT_EQ(d.length, second ? 60 + i : 100u) << k;
    EXPECT_EQ(d.flow_id, second ? 0x80000000u + i : i) << k;
    EXPECT_EQ(d.flags, second ? DAQIRI_DESC_TRUNCATED : 0u) << k;
  }
  EXPECT_EQ((*a)->counters.bytes.load(), 20u * 100 + (60 + 20 + 60 + 39) * 10);
  ring->publish_consumer(40);
  ASSERT_TRUE((*a)->reclaim());
  EXPECT_EQ(a_pool->available(), 64u);
  EXPECT_EQ(b_pool->available(), 64u);
  // The layout reaches offsets past 4 GiB, and a region and flags of a byte.
  daqiri_rx_desc_compact slot{};
  daqiri_rx_desc far{};
  far.offset = 0x1234'5678'9abcull;
  far.length = 70000;
  far.flow_id = 0xdeadbeef;
  far.flags = DAQIRI_DESC_SPLIT | DAQIRI_DESC_HEADERS_SYNTHESIZED;
  store_rx_desc_compact(&slot, far, 3);
  EXPECT_EQ(daqiri_rx_compact_offset(&slot), 0x1234'5678'9abcull);
  EXPECT_EQ(slot.region, 3u);
  EXPECT_EQ(slot.flags, DAQIRI_DESC_SPLIT | DAQIRI_DESC_HEADERS_SYNTHESIZED);
  EXPECT_EQ(slot.length, 70000u);
  EXPECT_EQ(slot.flow_id, 0xdeadbeefu);
}

// An attachment whose pool returns its buffers to their owner: buffers pushed alone
// (Run::push_alone) go back as the objects they were lent with, without a look at their counts;
// those pushed by index, which other attachments may hold too, by their counts. Releases that cross
// from one kind to the other, and the ring's end, give each buffer back once, when its last holder
// lets go.
TEST(RxAttachment, BuffersLentAloneGoBackAsTheirObjectsAndSharedOnesByCount) {
  constexpr uint32_t kBufs = 64;
  PoolOfObjects owner(kBufs);
  auto& pool = owner.pool;
  ASSERT_TRUE(pool);
  ASSERT_EQ(pool->available(), 0u);  // every buffer handed out
  auto a = RxAttachment::create(1, 16, Backpressure::kDropNew, {&*pool});
  auto b = RxAttachment::create(2, 16, Backpressure::kDropNew, {&*pool});
  ASSERT_TRUE(a && b);
  EXPECT_TRUE((*a)->lends_objects());
  // A pool with a free queue of its own, or two pools: no objects.
  auto plain = memory::BufferPool::create("p", 2048, 4, false);
  ASSERT_TRUE(plain);
  EXPECT_FALSE((*RxAttachment::create(3, 16, Backpressure::kDropNew, {&*plain}))->lends_objects());
  EXPECT_FALSE(
      (*RxAttachment::create(4, 16, Backpressure::kDropNew, {&*pool, &*plain}))->lends_objects());

  uint32_t next = 0;  // buffers lent so far, in order
  auto alone = [&](uint32_t n) {
    RxAttachment::Run run(**a, &*pool);
    for (uint32_t i = 0; i < n; ++i, ++next)
      ASSERT_TRUE(run.push_alone<false>(desc(*pool, next), owner.object_of[next]));
    run.finish();
    (*a)->publish();
  };
  auto shared = [&](uint32_t n) {  // to both attachments, by index
    for (uint32_t i = 0; i < n; ++i, ++next) {
      (*a)->push(desc(*pool, next), next, &*pool);
      (*b)->push(desc(*pool, next), next, &*pool);
      pool->lend(next, 2);
    }
    (*a)->publish();
    (*b)->publish();
  };
  auto a_ring = client_ring(**a);
  auto b_ring = client_ring(**b);
  auto release = [](RxAttachment& at, abi::RingView& ring, uint32_t to) {
    ring.publish_consumer(to);
    EXPECT_TRUE(at.reclaim());
  };
  // Which buffers have come back, as a string of counts: "1100" = 0 and 1, once each.
  auto returned = [&] {
    std::string r;
    for (uint32_t i = 0; i < next; ++i)
      r += static_cast<char>('0' + owner.back[i]);
    return r;
  };

  alone(6);   // a's slots 0-5: buffers 0-5
  shared(4);  // a's 6-9, b's 0-3: buffers 6-9, two references each
  alone(3);   // a's 10-12: buffers 10-12
  release(**a, a_ring, 4);
  EXPECT_EQ(returned(), "1111000000000");
  release(**a, a_ring, 8);  // 4 and 5 alone, 6 and 7 still b's
  EXPECT_EQ(returned(), "1111110000000");
  release(**b, b_ring, 4);  // 6 and 7 were a's last; 8 and 9 a still holds
  EXPECT_EQ(returned(), "1111111100000");
  release(**a, a_ring, 13);  // by count up to 10, then as objects
  EXPECT_EQ(returned(), "1111111111111");
  alone(10);  // a's slots 13-15 and 0-6: across the ring's end
  release(**a, a_ring, 23);
  EXPECT_EQ(returned(), std::string(23, '1'));
  shared(2);                      // buffers 23 and 24, b's slots 4 and 5
  alone(2);                       // 25 and 26
  (*a)->release_all();            // a detached: what only it held comes back
  std::string expected(23, '1');  // built in steps: GCC 12 misreads `string(n, c) + "..."`
  expected += "0011";             // as an out-of-bounds copy (-Warray-bounds)
  EXPECT_EQ(returned(), expected);
  release(**b, b_ring, 6);
  EXPECT_EQ(returned(), std::string(27, '1'));
  for (uint32_t i = 0; i < kBufs; ++i)
    EXPECT_EQ(pool->refs(i), 1) << i;
  EXPECT_EQ(pool->available(), 0u);  // the free queue was not used
}

TEST(RxAttachment, ClientReleasesReturnBuffersInOrder) {
  auto pool = memory::BufferPool::create("t", 2048, 64, false);
  auto a = RxAttachment::create(1, 64, Backpressure::kDropNew, {&*pool});
  ASSERT_TRUE(pool && a);
  uint32_t bufs[10];
  ASSERT_EQ(pool->alloc(bufs, 10), 10u);
  for (uint32_t b : bufs)
    (*a)->push(desc(*pool, b), b, &*pool);
  (*a)->publish();
  EXPECT_EQ((*a)->counters.on_loan.load(), 10u);
  auto ring = client_ring(**a);
  EXPECT_EQ(ring.load_producer(), 10u);
  EXPECT_EQ(ring.slot<daqiri_rx_desc>(3)->offset, pool->offset(bufs[3]));
  ring.publish_consumer(4);
  ASSERT_TRUE((*a)->reclaim());
  EXPECT_EQ(pool->available(), 64u - 6u);
  EXPECT_EQ((*a)->counters.on_loan.load(), 6u);
  EXPECT_EQ((*a)->free_slots(), 64u - 6u);
}

// Frames the NIC split: their header bytes are kept beside the slots (for the GPU engine), and
// a frame that fit in its header lends no buffer, so releasing it returns nothing.
TEST(RxAttachment, SplitOffHeadersAreKeptBesideTheSlotsAndHeaderOnlyFramesLendNothing) {
  auto pool = memory::BufferPool::create("t", 2048, 64, false);
  auto a = RxAttachment::create(1, 4, Backpressure::kDropNew, {&*pool});
  ASSERT_TRUE(pool && a);
  (*a)->reserve_heads(8);
  uint32_t bufs[5];
  ASSERT_EQ(pool->alloc(bufs, 5), 5u);
  std::vector<std::byte> head(12);
  for (uint32_t i = 0; i < 6; ++i) {  // wraps the 4-slot ring once
    for (size_t k = 0; k < head.size(); ++k)
      head[k] = std::byte(i * 16 + k);
    bool lends = i % 2 == 0;
    (*a)->push(desc(*pool, lends ? bufs[i / 2] : 0), lends ? bufs[i / 2] : RxAttachment::kNoBuffer,
               &*pool, head);
    (*a)->publish();
    // Only the first head_size bytes, in this slot.
    EXPECT_EQ(std::memcmp((*a)->head(i), head.data(), 8), 0) << i;
    auto ring = client_ring(**a);
    ring.publish_consumer(i + 1);  // released at once
    ASSERT_TRUE((*a)->reclaim());
  }
  EXPECT_EQ(pool->available(), 64u - 5u + 3u) << "the three lent buffers, nothing else";
  EXPECT_EQ((*a)->counters.on_loan.load(), 0u);
}

// While its flow waits for releases, an attachment whose client holds buffers asks it to kick
// (NEED_KICK on the RX ring, where the client looks after each release); a release already
// made keeps the poller awake; one that holds nothing is not asked.
TEST(RxAttachment, AsksItsClientToKickOnlyWhileItHoldsBuffers) {
  auto pool = memory::BufferPool::create("t", 2048, 64, false);
  auto a = RxAttachment::create(1, 64, Backpressure::kBlock, {&*pool});
  ASSERT_TRUE(pool && a);
  auto ring = client_ring(**a);
  EXPECT_TRUE((*a)->arm_kick());
  EXPECT_FALSE(ring.producer_wants_kick()) << "asked a client that holds nothing";
  uint32_t bufs[10];
  ASSERT_EQ(pool->alloc(bufs, 10), 10u);
  for (uint32_t b : bufs)
    (*a)->push(desc(*pool, b), b, &*pool);
  (*a)->publish();
  EXPECT_TRUE((*a)->holds_buffers());
  EXPECT_TRUE((*a)->arm_kick());
  EXPECT_TRUE(ring.producer_wants_kick());
  // The client's side: a release that finds the flag writes the kick eventfd.
  ring.publish_consumer(4);
  EXPECT_TRUE(ring.kick_producer((*a)->kick_fd()));
  uint64_t kicks = 0;
  EXPECT_EQ(::read((*a)->kick_fd(), &kicks, sizeof kicks), ssize_t(sizeof kicks));
  EXPECT_EQ(kicks, 1u);
  (*a)->disarm_kick();
  EXPECT_FALSE(ring.producer_wants_kick());
  EXPECT_FALSE(ring.kick_producer((*a)->kick_fd())) << "kicked a poller that is awake";
  EXPECT_FALSE((*a)->arm_kick()) << "armed past a release not taken back yet";
  (*a)->disarm_kick();
  ASSERT_TRUE((*a)->reclaim());
  EXPECT_TRUE((*a)->arm_kick());
  (*a)->disarm_kick();
  ring.publish_consumer(10);
  ASSERT_TRUE((*a)->reclaim());
  EXPECT_FALSE((*a)->holds_buffers());
  EXPECT_TRUE((*a)->arm_kick());
  EXPECT_FALSE(ring.producer_wants_kick());
}

// publish() looks at NEED_WAKEUP without a fence, so a consumer may set it just after that
// look, having read the old producer index. The next reclaim() wakes it, once for that
// producer index; a consumer that caught up needs no wakeup.
uint64_t signals(int eventfd) {
  uint64_t v = 0;
  return ::read(eventfd, &v, sizeof v) == sizeof v ? v : 0;
}

TEST(RxAttachment, AConsumerThatFellAsleepJustAfterAPublishIsWokenByTheNextPoll) {
  auto pool = memory::BufferPool::create("t", 2048, 64, false);
  auto a = RxAttachment::create(1, 64, Backpressure::kDropNew, {&*pool});
  ASSERT_TRUE(pool && a);
  uint32_t bufs[3];
  ASSERT_EQ(pool->alloc(bufs, 3), 3u);
  (*a)->push(desc(*pool, bufs[0]), bufs[0], &*pool);
  ASSERT_TRUE((*a)->publish());
  EXPECT_EQ(signals((*a)->eventfd()), 0u) << "nobody asked to be woken";
  auto ring = client_ring(**a);
  ring.set_need_wakeup(true);  // ... too late for that publish
  ASSERT_TRUE((*a)->reclaim(false));
  EXPECT_EQ(signals((*a)->eventfd()), 1u);
  ASSERT_TRUE((*a)->reclaim(true));
  EXPECT_EQ(signals((*a)->eventfd()), 0u) << "woken once for one producer index";
  // A publish that sees the flag wakes at once; one the consumer has read needs nothing more.
  (*a)->push(desc(*pool, bufs[1]), bufs[1], &*pool);
  ASSERT_TRUE((*a)->publish());
  EXPECT_EQ(signals((*a)->eventfd()), 1u);
  ring.set_need_wakeup(false);
  (*a)->push(desc(*pool, bufs[2]), bufs[2], &*pool);
  ASSERT_TRUE((*a)->publish());
  ring.publish_consumer(3);
  ring.set_need_wakeup(true);
  ASSERT_TRUE((*a)->reclaim(true));
  EXPECT_EQ(signals((*a)->eventfd()), 0u) << "it has read everything";
  EXPECT_FALSE((*a)->publish()) << "nothing new";
}

TEST(RxAttachment, ImpossibleConsumerIndicesAreViolations) {
  for (uint32_t lie : {11u, 0xffffffffu, 1000000u}) {
    auto pool = memory::BufferPool::create("t", 2048, 64, false);
    auto a = RxAttachment::create(1, 64, Backpressure::kDropNew, {&*pool});
    uint32_t bufs[10];
    pool->alloc(bufs, 10);
    for (uint32_t b : bufs)
      (*a)->push(desc(*pool, b), b, &*pool);
    (*a)->publish();
    client_ring(**a).publish_consumer(lie);  // beyond what was published, or behind
    EXPECT_FALSE((*a)->reclaim()) << lie;
    EXPECT_TRUE((*a)->lifecycle.violated.load());
    EXPECT_EQ((*a)->counters.bad_index.load(), 1u);
    EXPECT_EQ(pool->available(), 54u);  // nothing was taken back on a lie
    (*a)->release_all();                // ... but everything is when it is cut off
    EXPECT_EQ(pool->available(), 64u);
    EXPECT_EQ(client_ring(**a).state(), uint32_t{DAQIRI_RING_DETACHED});
  }
}

TEST(RxAttachment, ReleasingUnpublishedSlotsIsAViolation) {
  auto pool = memory::BufferPool::create("t", 2048, 64, false);
  auto a = RxAttachment::create(1, 64, Backpressure::kDropNew, {&*pool});
  uint32_t bufs[4];
  pool->alloc(bufs, 4);
  for (uint32_t b : bufs)
    (*a)->push(desc(*pool, b), b, &*pool);  // pushed, not yet published
  client_ring(**a).publish_consumer(2);
  EXPECT_FALSE((*a)->reclaim());
}

}  // namespace
}  // namespace daqiri::dataplane
