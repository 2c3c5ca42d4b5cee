// TxAttachment: a client's TX ring: descriptors copied, checked, taken and completed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "daqiri/frame.hpp"
#include "daqiri/ring.hpp"
#include "dataplane/receive_clock.hpp"
#include "dataplane/tx_attachment.hpp"

namespace daqiri::dataplane {
namespace {

constexpr TxRules kUdpRules{frame::kUdpHeaders, false};

TEST(TxAttachment, ValidDescriptorsAreTakenAndCompleted) {
  auto a = TxAttachment::create(1, 2048, 16, 64, false, kUdpRules);
  ASSERT_TRUE(a);
  auto tx = *abi::RingView::open((*a)->rings().data(), (*a)->completion_offset(), DAQIRI_RING_TX,
                                 sizeof(daqiri_tx_desc));
  auto comp = *abi::RingView::open((*a)->rings().data() + (*a)->completion_offset(),
                                   (*a)->rings().size() - (*a)->completion_offset(),
                                   DAQIRI_RING_COMPLETION, sizeof(uint32_t));
  *tx.slot<daqiri_tx_desc>(0) = {3, 100, 0, 0};
  *tx.slot<daqiri_tx_desc>(1) = {7, 2048, 0, 0};
  tx.publish_producer(2);
  daqiri_tx_desc out[8];
  ASSERT_EQ((*a)->take(out, 8), 2u);
  EXPECT_EQ(out[1].buffer, 7u);
  EXPECT_EQ(tx.load_consumer(), 2u);
  (*a)->complete(out, 2);
  EXPECT_EQ(comp.load_producer(), 2u);
  EXPECT_EQ(*comp.slot<uint32_t>(0), 3u);
  EXPECT_FALSE((*a)->lifecycle.violated.load());
}

// Before the poller sleeps the attachment sets NEED_WAKEUP on its TX ring, where the client
// looks after each submit; a submission already waiting keeps the poller awake.
TEST(TxAttachment, ArmsTheClientsKickAndSaysWhenASubmissionWaits) {
  auto a = TxAttachment::create(1, 2048, 16, 64, false, kUdpRules);
  ASSERT_TRUE(a);
  auto tx = *abi::RingView::open((*a)->rings().data(), (*a)->completion_offset(), DAQIRI_RING_TX,
                                 sizeof(daqiri_tx_desc));
  EXPECT_FALSE(tx.consumer_wants_wakeup());
  EXPECT_TRUE((*a)->arm_wakeup());
  EXPECT_TRUE(tx.consumer_wants_wakeup());
  // The client's side: a submit that finds the flag writes the kick eventfd.
  *tx.slot<daqiri_tx_desc>(0) = {3, 100, 0, 0};
  tx.publish_producer(1);
  EXPECT_TRUE(tx.wake_consumer((*a)->kick_fd()));
  uint64_t kicks = 0;
  EXPECT_EQ(::read((*a)->kick_fd(), &kicks, sizeof kicks), ssize_t(sizeof kicks));
  EXPECT_EQ(kicks, 1u);
  (*a)->disarm_wakeup();
  EXPECT_FALSE(tx.consumer_wants_wakeup());
  EXPECT_FALSE(tx.wake_consumer((*a)->kick_fd())) << "kicked a poller that is awake";
  EXPECT_FALSE((*a)->arm_wakeup()) << "armed past a waiting submission";
  daqiri_tx_desc out[8];
  ASSERT_EQ((*a)->take(out, 8), 1u);
  EXPECT_TRUE((*a)->arm_wakeup());
  // A client cut off has nothing to wait for, whatever its ring says.
  tx.publish_producer(5);
  EXPECT_FALSE((*a)->arm_wakeup());
  (*a)->lifecycle.violated.store(true);
  EXPECT_TRUE((*a)->arm_wakeup());
}

TEST(TxAttachment, BadDescriptorsAreViolations) {
  const daqiri_tx_desc bad[] = {
      {16, 100, 0, 0},  // no such buffer
      {1, 41, 0, 0},    // shorter than the headers of a UDP frame
      {1, 2049, 0, 0},  // longer than a buffer
      {1, 100, 1, 0},   // undefined flags
      {1, 100, 0, 3},   // a remote slot, on a queue without RDMA
  };
  for (const auto& d : bad) {
    auto a = TxAttachment::create(1, 2048, 16, 64, false, kUdpRules);
    auto tx = *abi::RingView::open((*a)->rings().data(), (*a)->completion_offset(), DAQIRI_RING_TX,
                                   sizeof(daqiri_tx_desc));
    *tx.slot<daqiri_tx_desc>(0) = d;
    tx.publish_producer(1);
    daqiri_tx_desc out[4];
    EXPECT_EQ((*a)->take(out, 4), 0u);
    EXPECT_TRUE((*a)->lifecycle.violated.load());
    EXPECT_EQ((*a)->counters.bad_descriptor.load(), 1u);
  }
  // The same buffer twice while the daemon has it.
  auto a = TxAttachment::create(1, 2048, 16, 64, false, kUdpRules);
  auto tx = *abi::RingView::open((*a)->rings().data(), (*a)->completion_offset(), DAQIRI_RING_TX,
                                 sizeof(daqiri_tx_desc));
  *tx.slot<daqiri_tx_desc>(0) = {5, 100, 0, 0};
  *tx.slot<daqiri_tx_desc>(1) = {5, 100, 0, 0};
  tx.publish_producer(2);
  daqiri_tx_desc out[4];
  EXPECT_EQ((*a)->take(out, 4), 1u);
  EXPECT_TRUE((*a)->lifecycle.violated.load());
  // A producer index that runs ahead by more than the ring is a violation too.
  auto b = TxAttachment::create(2, 2048, 16, 64, false, kUdpRules);
  auto tx2 = *abi::RingView::open((*b)->rings().data(), (*b)->completion_offset(), DAQIRI_RING_TX,
                                  sizeof(daqiri_tx_desc));
  tx2.publish_producer(65);
  EXPECT_EQ((*b)->take(out, 4), 0u);
  EXPECT_EQ((*b)->counters.bad_index.load(), 1u);
}

TEST(TxAttachment, RdmaQueuesTakeOperationsAndNothingElse) {
  const TxRules rdma{1, true};
  const uint32_t conn2 = 2u << DAQIRI_TX_CONNECTION_SHIFT;
  const daqiri_tx_desc good[] = {{0, 1, DAQIRI_RDMA_SEND, 0},
                                 {1, 2048, DAQIRI_RDMA_WRITE | conn2, 9},
                                 {2, 64, DAQIRI_RDMA_WRITE_IMM, 1},
                                 {3, 64, DAQIRI_RDMA_READ | conn2, 0}};
  auto a = TxAttachment::create(1, 2048, 16, 64, false, rdma);
  ASSERT_TRUE(a);
  auto tx = *abi::RingView::open((*a)->rings().data(), (*a)->completion_offset(), DAQIRI_RING_TX,
                                 sizeof(daqiri_tx_desc));
  for (uint32_t i = 0; i < 4; ++i)
    *tx.slot<daqiri_tx_desc>(i) = good[i];
  tx.publish_producer(4);
  daqiri_tx_desc out[8];
  EXPECT_EQ((*a)->take(out, 8), 4u);
  EXPECT_FALSE((*a)->lifecycle.violated.load());
  const daqiri_tx_desc bad[] = {
      {0, 0, DAQIRI_RDMA_SEND, 0},  // empty
      {0, 8, 4, 0},                 // no such operation
      {0, 8, 0x100, 0},             // bits between the operation and the connection
  };
  for (const auto& d : bad) {
    auto b = TxAttachment::create(1, 2048, 16, 64, false, rdma);
    auto t = *abi::RingView::open((*b)->rings().data(), (*b)->completion_offset(), DAQIRI_RING_TX,
                                  sizeof(daqiri_tx_desc));
    *t.slot<daqiri_tx_desc>(0) = d;
    t.publish_producer(1);
    EXPECT_EQ((*b)->take(out, 4), 0u);
    EXPECT_TRUE((*b)->lifecycle.violated.load());
  }
}

// TCP queues: a message names its connection, and nothing else rides along.
TEST(TxAttachment, TcpQueuesTakeAConnectionAndNothingElse) {
  const TxRules tcp{.min_length = 1, .connections = true};
  const daqiri_tx_desc good[] = {{0, 1, 0, 0}, {1, 2048, 0xffffu << DAQIRI_TX_CONNECTION_SHIFT, 0}};
  auto a = TxAttachment::create(1, 2048, 16, 64, false, tcp);
  ASSERT_TRUE(a);
  auto tx = *abi::RingView::open((*a)->rings().data(), (*a)->completion_offset(), DAQIRI_RING_TX,
                                 sizeof(daqiri_tx_desc));
  for (uint32_t i = 0; i < 2; ++i)
    *tx.slot<daqiri_tx_desc>(i) = good[i];
  tx.publish_producer(2);
  daqiri_tx_desc out[8];
  EXPECT_EQ((*a)->take(out, 8), 2u);
  EXPECT_FALSE((*a)->lifecycle.violated.load());
  const daqiri_tx_desc bad[] = {
      {0, 0, 0, 0},                                 // empty
      {0, 8, DAQIRI_RDMA_WRITE, 0},                 // an RDMA operation
      {0, 8, DAQIRI_TX_AT, 0},                      // a send time
      {0, 8, 1u << DAQIRI_TX_CONNECTION_SHIFT, 7},  // a remote slot
  };
  for (const auto& d : bad) {
    auto b = TxAttachment::create(1, 2048, 16, 64, false, tcp);
    auto t = *abi::RingView::open((*b)->rings().data(), (*b)->completion_offset(), DAQIRI_RING_TX,
                                  sizeof(daqiri_tx_desc));
    *t.slot<daqiri_tx_desc>(0) = d;
    t.publish_producer(1);
    EXPECT_EQ((*b)->take(out, 4), 0u);
    EXPECT_TRUE((*b)->lifecycle.violated.load());
  }
}

// accurate_send where the NIC schedules sends: a frame whose time is to come goes to the queue
// at once, its time in its descriptor, for the NIC to hold.
TEST(TxAttachment, SendTimesTheNicSchedulesAreTakenAtOnce) {
  const TxRules nic{.min_length = frame::kUdpHeaders, .send_times = true, .nic_schedules = true};
  auto a = TxAttachment::create(1, 2048, 16, 64, false, nic);
  ASSERT_TRUE(a);
  auto tx = *abi::RingView::open((*a)->rings().data(), (*a)->completion_offset(), DAQIRI_RING_TX,
                                 sizeof(daqiri_tx_desc));
  const uint64_t at = ReceiveClock::now_ns() + 10'000'000'000;
  daqiri_tx_desc later{1, 100, 0, 0}, after{2, 100, 0, 0};
  daqiri_tx_desc_set_time(&later, at);
  *tx.slot<daqiri_tx_desc>(0) = later;
  *tx.slot<daqiri_tx_desc>(1) = after;
  tx.publish_producer(2);
  daqiri_tx_desc out[8];
  ASSERT_EQ((*a)->take(out, 8), 2u);
  EXPECT_EQ(daqiri_tx_desc_time(&out[0], ReceiveClock::now_ns()), at);
  EXPECT_FALSE((*a)->lifecycle.violated.load());
}

// accurate_send: a frame whose time is to come stays in the ring, and holds back the ones
// after it, until its time; stray flag bits beside the send time, or a send time on a queue
// without accurate_send, cut the client off.
TEST(TxAttachment, SendTimesHoldFramesInOrderAndNothingElseRides) {
  const TxRules timed{frame::kUdpHeaders, false, true};
  auto a = TxAttachment::create(1, 2048, 16, 64, false, timed);
  ASSERT_TRUE(a);
  auto tx = *abi::RingView::open((*a)->rings().data(), (*a)->completion_offset(), DAQIRI_RING_TX,
                                 sizeof(daqiri_tx_desc));
  const uint64_t now = ReceiveClock::now_ns();
  daqiri_tx_desc past{1, 100, 0, 0}, soon{2, 100, 0, 0}, after{3, 100, 0, 0};
  daqiri_tx_desc_set_time(&past, now - 1'000'000);
  daqiri_tx_desc_set_time(&soon, now + 50'000'000);
  *tx.slot<daqiri_tx_desc>(0) = past;
  *tx.slot<daqiri_tx_desc>(1) = soon;
  *tx.slot<daqiri_tx_desc>(2) = after;
  tx.publish_producer(3);
  daqiri_tx_desc out[8];
  ASSERT_EQ((*a)->take(out, 8), 1u);
  EXPECT_EQ(out[0].buffer, 1u);
  EXPECT_EQ((*a)->take(out, 8), 0u);  // `soon` holds `after` back
  EXPECT_EQ(tx.load_consumer(), 1u);  // both still the client's ring's
  EXPECT_FALSE((*a)->arm_wakeup());   // and the poller stays up for them
  (*a)->disarm_wakeup();
  while (ReceiveClock::now_ns() < now + 50'000'000) {
  }
  ASSERT_EQ((*a)->take(out, 8), 2u);
  EXPECT_EQ(out[0].buffer, 2u);
  EXPECT_EQ(out[1].buffer, 3u);
  EXPECT_FALSE((*a)->lifecycle.violated.load());

  daqiri_tx_desc stray = past;
  stray.buffer = 4;
  stray.flags |= 0x1;  // an RDMA operation's bit beside the send time
  *tx.slot<daqiri_tx_desc>(3) = stray;
  tx.publish_producer(4);
  EXPECT_EQ((*a)->take(out, 8), 0u);
  EXPECT_TRUE((*a)->lifecycle.violated.load());

  auto untimed = TxAttachment::create(2, 2048, 16, 64, false, kUdpRules);
  ASSERT_TRUE(untimed);
  auto utx = *abi::RingView::open((*untimed)->rings().data(), (*untimed)->completion_offset(),
                                  DAQIRI_RING_TX, sizeof(daqiri_tx_desc));
  *utx.slot<daqiri_tx_desc>(0) = past;
  utx.publish_producer(1);
  EXPECT_EQ((*untimed)->take(out, 8), 0u);
  EXPECT_TRUE((*untimed)->lifecycle.violated.load());
}

}  // namespace
}  // namespace daqiri::dataplane
