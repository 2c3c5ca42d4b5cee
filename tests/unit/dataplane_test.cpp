// The data plane's pieces on their own: the loan ledger, index and descriptor validation,
// fan-out references, memory seals, frames, ring checks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/frame.hpp"
#include "daqiri/ring.hpp"
#include "daqiri/test_pattern.hpp"
#include "dataplane/clock.hpp"
#include "dataplane/poller.hpp"
#include "dataplane/receive_clock.hpp"
#include "dataplane/rx_attachment.hpp"
#include "dataplane/rx_fanout.hpp"
#include "dataplane/tx_attachment.hpp"
#include "memory/buffer_pool.hpp"

namespace daqiri::dataplane {
namespace {

daqiri_rx_desc desc(memory::BufferPool& pool, uint32_t buf) {
  daqiri_rx_desc d{};
  d.offset = pool.offset(buf);
  d.length = 100;
  return d;
}

// The client's side of an RX ring, as a client would see it through its own mapping.
abi::RingView client_ring(RxAttachment& a) {
  return *abi::RingView::open(a.rings().data(), a.rings().size(), DAQIRI_RING_RX,
                              sizeof(daqiri_rx_desc));
}

// A pool whose buffers are all handed out, as a DPDK queue's are to its mbufs, and whose
// Returner (BufferPool::return_to) counts each buffer's object as it comes back.
struct PoolOfObjects {
  explicit PoolOfObjects(uint32_t n)
      : pool(memory::BufferPool::create("t", 2048, n, false)), objects(n), back(n, 0) {
    for (auto& o : objects)
      object_of.push_back(&o);
    if (!pool) return;
    std::vector<uint32_t> all(n);
    pool->alloc(all.data(), n);
    pool->return_to({object_of.data(),
                     [](void* self, void* const* objs, uint32_t count) {
                       auto* p = static_cast<PoolOfObjects*>(self);
                       for (uint32_t i = 0; i < count; ++i)
                         ++p->back[static_cast<int*>(objs[i]) - p->objects.data()];
                     },
                     this});
  }
  PoolOfObjects(const PoolOfObjects&) = delete;
  PoolOfObjects& operator=(const PoolOfObjects&) = delete;
  // Buffers that came back, in all.
  [[nodiscard]] uint32_t returned() const {
    return static_cast<uint32_t>(std::accumulate(back.begin(), back.end(), 0));
  }
  Result<memory::BufferPool> pool;
  std::vector<int> objects;
  std::vector<void*> object_of;
  std::vector<int> back;  // times each buffer came back
};

TEST(BufferPool, AllocatesReferencesAndFrees) {
  auto pool = memory::BufferPool::create("t", 2048, 8, false);
  ASSERT_TRUE(pool);
  uint32_t got[10];
  EXPECT_EQ(pool->alloc(got, 10), 8u);
  EXPECT_EQ(pool->available(), 0u);
  pool->set_refs(got[0], 2);
  pool->unref(got[0]);
  EXPECT_EQ(pool->available(), 0u);
  pool->unref(got[0]);
  EXPECT_EQ(pool->available(), 1u);
  pool->set_refs(got[1], 0);
  EXPECT_EQ(pool->available(), 2u);
}

// A pool whose free buffers another allocator keeps (a DPDK queue's mempool): each buffer goes
// back to it once, as its object, when its last reference goes, in runs of at most kReturnRun,
// and the free queue stays empty.
TEST(BufferPool, ReturnsFreedBuffersToTheirOwner) {
  constexpr uint32_t kBufs = 2 * memory::BufferPool::kReturnRun + 76;
  auto pool = memory::BufferPool::create("t", 256, kBufs, false);
  ASSERT_TRUE(pool);
  std::vector<uint32_t> all(kBufs);
  ASSERT_EQ(pool->alloc(all.data(), kBufs), kBufs);
  std::vector<int> objects(kBufs);  // stand-ins for the owner's objects: their addresses
  std::vector<void*> object_of(kBufs);
  for (uint32_t i = 0; i < kBufs; ++i)
    object_of[i] = &objects[i];
  struct Owner {
    std::vector<void*> back;
    uint32_t calls = 0;
    uint32_t longest = 0;
  } owner;
  pool->return_to({object_of.data(),
                   [](void* o, void* const* objs, uint32_t n) {
                     auto* w = static_cast<Owner*>(o);
                     w->back.insert(w->back.end(), objs, objs + n);
                     ++w->calls;
                     w->longest = std::max(w->longest, n);
                   },
                   &owner});
  pool->set_refs(3, 2);  // a buffer two readers hold
  // Every buffer once, then 3 again (its second reader), and indices that name none.
  std::vector<uint32_t> released;
  for (uint32_t i = 0; i < kBufs; ++i)
    released.push_back(i);
  released.push_back(kBufs);
  released.push_back(UINT32_MAX);
  pool->unref_many(released.data(), static_cast<uint32_t>(released.size()));
  ASSERT_EQ(owner.back.size(), kBufs - 1);  // all but 3, still held
  EXPECT_EQ(pool->refs(3), 1);
  EXPECT_EQ(owner.longest, memory::BufferPool::kReturnRun);
  EXPECT_EQ(owner.calls, 3u);
  uint32_t at = 0;
  for (uint32_t i = 0; i < kBufs; ++i) {
    if (i == 3) continue;
    EXPECT_EQ(owner.back[at++], &objects[i]) << "buffer " << i;
  }
  pool->unref(3);  // the last reference, one at a time
  ASSERT_EQ(owner.back.size(), kBufs);
  EXPECT_EQ(owner.back.back(), &objects[3]);
  EXPECT_EQ(pool->refs(3), 1);  // as alloc() hands it out again
  pool->set_refs(7, 0);
  ASSERT_EQ(owner.back.size(), kBufs + 1);
  EXPECT_EQ(owner.back.back(), &objects[7]);
  EXPECT_EQ(pool->available(), 0u);
}

// A buffer's index from its address (how the DPDK queue names an mbuf's buffer), for sizes
// with and without odd factors, up to the last buffer.
TEST(BufferPool, NamesTheBufferAtAnAddress) {
  for (uint32_t size : {2048u, 9216u, 1500u, 64u, 3u}) {
    auto pool = memory::BufferPool::create("t", size, 3000, false);
    ASSERT_TRUE(pool) << size;
    for (uint32_t i : {0u, 1u, 2u, 1499u, 2999u})
      EXPECT_EQ(pool->index_at(pool->buffer(i)), i) << size;
  }
}

// A run of releases at once, as an attachment returns a client's burst: buffers come back
// when their last reference goes, in order; indices that name no buffer are passed over.
TEST(BufferPool, ReleasesARunOfBuffersAndSkipsWhatNamesNone) {
  auto pool = memory::BufferPool::create("t", 2048, 8, false);
  ASSERT_TRUE(pool);
  uint32_t got[8];
  ASSERT_EQ(pool->alloc(got, 6), 6u);
  pool->set_refs(got[2], 2);
  const uint32_t run[] = {got[0], got[1], 8u, got[2], 0x0fffffffu, got[3]};
  pool->unref_many(run, 6);
  EXPECT_EQ(pool->available(), 2u + 3u);
  EXPECT_EQ(pool->refs(got[2]), 1u);
  ASSERT_EQ(pool->alloc(got, 8), 5u);
  EXPECT_EQ(std::vector<uint32_t>(got, got + 5), (std::vector<uint32_t>{6, 7, 0, 1, 3}));
}

// Buffers released in the order they were handed out come back in that order, so the next
// bursts land in consecutive buffers again (one strided array for a client), across the wrap.
TEST(BufferPool, ReusesBuffersInTheOrderTheyWereFreed) {
  auto pool = memory::BufferPool::create("t", 2048, 8, false);
  ASSERT_TRUE(pool);
  uint32_t got[8];
  ASSERT_EQ(pool->alloc(got, 5), 5u);
  EXPECT_EQ(std::vector<uint32_t>(got, got + 5), (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  for (uint32_t i = 0; i < 5; ++i)
    pool->unref(got[i]);
  ASSERT_EQ(pool->alloc(got, 8), 8u);
  EXPECT_EQ(std::vector<uint32_t>(got, got + 8), (std::vector<uint32_t>{5, 6, 7, 0, 1, 2, 3, 4}));
  pool->unref(got[3]);
  pool->unref(got[0]);
  ASSERT_EQ(pool->alloc(got, 8), 2u);
  EXPECT_EQ(got[0], 0u);
  EXPECT_EQ(got[1], 5u);
  EXPECT_EQ(pool->available(), 0u);
}

// oldest_free() + take(): what alloc() hands out, read in place, one run of the queue at a
// time where it wraps.
TEST(BufferPool, OldestFreeIsAllocInPlaceOneRunAtATime) {
  auto pool = memory::BufferPool::create("t", 2048, 8, false);
  ASSERT_TRUE(pool);
  uint32_t got[8];
  ASSERT_EQ(pool->alloc(got, 6), 6u);
  for (uint32_t i = 0; i < 6; ++i)
    pool->unref(got[i]);  // the queue: 6 7 | 0 1 2 3 4 5, head at 6
  auto run = pool->oldest_free(5);
  EXPECT_EQ(std::vector<uint32_t>(run.begin(), run.end()), (std::vector<uint32_t>{6, 7}));
  EXPECT_EQ(pool->available(), 8u) << "nothing taken yet";
  pool->take(1);
  run = pool->oldest_free(5);
  EXPECT_EQ(std::vector<uint32_t>(run.begin(), run.end()), (std::vector<uint32_t>{7}));
  pool->take(1);
  run = pool->oldest_free(3);
  EXPECT_EQ(std::vector<uint32_t>(run.begin(), run.end()), (std::vector<uint32_t>{0, 1, 2}));
  pool->take(3);
  EXPECT_EQ(pool->available(), 3u);
  ASSERT_EQ(pool->alloc(got, 8), 3u);
  EXPECT_EQ(std::vector<uint32_t>(got, got + 3), (std::vector<uint32_t>{3, 4, 5}));
  EXPECT_TRUE(pool->oldest_free(8).empty());
}

// lend(): a buffer alloc() handed out goes to one reader without a count of its own, to
// several with one, or to none and straight back; each comes back exactly when its last
// reader lets go, and a buffer that went round once is lent again the same way.
TEST(BufferPool, LentBuffersComeBackWhenTheirLastReaderLetsGo) {
  auto pool = memory::BufferPool::create("t", 2048, 4, false);
  ASSERT_TRUE(pool);
  for (int round = 0; round < 2; ++round) {
    uint32_t got[4];
    ASSERT_EQ(pool->alloc(got, 4), 4u) << round;
    pool->lend(got[0], 1);
    pool->lend(got[1], 3);
    pool->lend(got[2], 0);
    pool->lend(got[3], 2);
    EXPECT_EQ(pool->available(), 1u);  // got[2], which nobody took
    pool->unref(got[0]);
    EXPECT_EQ(pool->available(), 2u);
    const uint32_t run[] = {got[1], got[3], got[1]};
    pool->unref_many(run, 3);
    EXPECT_EQ(pool->refs(got[1]), 1u);
    EXPECT_EQ(pool->refs(got[3]), 1u);
    EXPECT_EQ(pool->available(), 2u);
    const uint32_t last[] = {got[3], got[1]};
    pool->unref_many(last, 2);
    EXPECT_EQ(pool->available(), 4u);
  }
}

// share_pages: pools fill a slab front to back at 64-byte aligned offsets, the next slab
// starts when one is full, and a slab whose pools are all gone is not handed out again.
TEST(PageArena, PacksPoolsIntoSlabsOfWholePages) {
  size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  memory::PageArena arena("t", false);
  std::vector<memory::BufferPool> pools;
  for (int i = 0; i < 5; ++i) {
    auto pool = memory::BufferPool::create("unused", 100, 10, false, &arena);  // 1000 bytes
    ASSERT_TRUE(pool);
    pools.push_back(std::move(*pool));
  }
  // 4 KiB pages: pools at 0, 1024, 2048, 3072 in the first slab, the fifth in a second.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(&pools[i].memory(), &pools[0].memory());
    EXPECT_EQ(pools[i].base(), uint64_t(i) * 1024);
    EXPECT_EQ(pools[i].offset(3), uint64_t(i) * 1024 + 300);
    EXPECT_EQ(pools[i].buffer(3), pools[0].memory().data() + pools[i].offset(3));
  }
  EXPECT_NE(&pools[4].memory(), &pools[0].memory());
  EXPECT_EQ(pools[4].base(), 0u);
  EXPECT_EQ(pools[0].memory().size(), page);
  EXPECT_EQ(memory::PageArena::pages_for(5, 1000, page), 2u);
  EXPECT_EQ(memory::PageArena::pages_for(4, 1000, page), 1u);
  EXPECT_EQ(memory::PageArena::pages_for(3, 5000, page), 6u);  // a pool over a page: no packing
  // The slab is read-only to everyone else and sized for good, like a pool of its own.
  EXPECT_EQ(::fcntl(pools[0].memory().read_only_fd()->get(), F_GET_SEALS) & F_SEAL_GROW,
            F_SEAL_GROW);
  // Writes through one pool land at its own place in the shared slab.
  std::memset(pools[1].buffer(0), 0xab, 100);
  EXPECT_EQ(pools[0].memory().data()[1024], std::byte{0xab});
  EXPECT_EQ(pools[0].memory().data()[1023], std::byte{0});
  pools.pop_back();  // the second slab's only pool: the next pool starts a new slab
  auto next = memory::BufferPool::create("unused", 100, 10, false, &arena);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->base(), 0u);
  EXPECT_NE(&next->memory(), &pools[0].memory());
}

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

// An attachment whose pool has a Returner: buffers pushed alone (Run::push_alone) go back as
// the objects they were lent with, without a look at their counts; those pushed by index, which
// other attachments may hold too, by their counts. Releases that cross from one kind to the
// other, and the ring's end, give each buffer back once, when its last holder lets go.
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
  // A pool without a Returner, or two pools: no objects.
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
  shared(2);            // buffers 23 and 24, b's slots 4 and 5
  alone(2);             // 25 and 26
  (*a)->release_all();  // a detached: what only it held comes back
  EXPECT_EQ(returned(), std::string(23, '1') + "0011");
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

constexpr TxRules kUdpRules{frame::kUdpHeaders, false};

// An idle poller parks; one told to spin (a busy_poll queue) never does.
TEST(Poller, ParksWhenIdleUnlessToldToSpin) {
  auto idle = Poller::start("idle", -1);
  auto spinning = Poller::start("spinning", -1);
  ASSERT_TRUE(idle && spinning);
  (*spinning)->spin_always();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*idle)->parks() < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GE((*idle)->parks(), 1u);
  // The thread may have parked before spin_always() landed (this thread can be descheduled
  // for milliseconds on a loaded host); after the park in progress, none.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  uint64_t settled = (*spinning)->parks();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ((*spinning)->parks(), settled);
}

// Whether any epoll set of this process watches `fd` (its fdinfo lists a "tfd:" line for it).
bool watched_by_an_epoll(int fd) {
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(e.path(), ec).string() != "anon_inode:[eventpoll]") continue;
    std::ifstream info("/proc/self/fdinfo/" + e.path().filename().string());
    for (std::string word; info >> word;) {
      int target = -1;
      if (word == "tfd:" && info >> target && target == fd) return true;
    }
  }
  return false;
}

// A task whose poll() reports work while told to, that needs timed wake-ups while told to,
// and counts its calls.
struct SwitchTask final : PollTask {
  bool poll() override {
    polls.fetch_add(1);
    return busy.load();
  }
  [[nodiscard]] bool needs_timed_wakeup() const override { return timed.load(); }
  [[nodiscard]] bool wakes_on_fds() const override { return fds_wake.load(); }
  std::atomic<bool> busy{false};
  std::atomic<bool> timed{true};
  std::atomic<bool> fds_wake{true};
  std::atomic<uint64_t> polls{0};
};

// Adds `task` to `poller` with a new eventfd as its wake fd; returns the fd (-1: none).
int add_with_eventfd(Poller& poller, PollTask& task) {
  int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd >= 0) poller.add_task(&task, {efd});
  return efd;
}

// A task's fd is in the poller's epoll set while the poller is parked and out of it while it
// polls: a socket left in an epoll set costs every datagram's sender an epoll wake-up
// callback, though a busy poller never waits on it.
TEST(Poller, WatchesTaskFdsOnlyWhileParked) {
  auto poller = Poller::start("parking", -1);
  ASSERT_TRUE(poller);
  SwitchTask task;
  int efd = add_with_eventfd(**poller, task);
  ASSERT_GE(efd, 0);
  // Idle, it is parked nearly all the time (one poll between quiet parks).
  bool seen = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    seen = (*poller)->parks() > 0 && watched_by_an_epoll(efd);
  }
  EXPECT_TRUE(seen) << "never watched while parked";
  // Busy: once a poll has seen it, the park before that poll is over (its fds went out of
  // the set before the loop polled again) and no other park comes.
  task.busy.store(true);
  uint64_t polls = task.polls.load();
  while (task.polls.load() < polls + 2)
    std::this_thread::yield();
  uint64_t parks = (*poller)->parks();
  EXPECT_FALSE(watched_by_an_epoll(efd)) << "watched while busy";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(watched_by_an_epoll(efd)) << "watched while busy";
  EXPECT_EQ((*poller)->parks(), parks);
  // Idle again, then removed: out of the set for good, so the fd may be closed.
  task.busy.store(false);
  (*poller)->remove_task(&task, {efd});
  EXPECT_FALSE(watched_by_an_epoll(efd));
  ::close(efd);
}

// A task whose fds are readable with work it cannot take (a flow that waits for its clients'
// releases) says so, and the poller sleeps without them: on its timer, not woken at once by
// them in a spin. Once the task takes their readiness again, they end its sleeps.
TEST(Poller, LeavesOutTheFdsOfATaskThatCannotActOnThem) {
  auto poller = Poller::start("left-out", -1);
  ASSERT_TRUE(poller);
  SwitchTask task;
  task.fds_wake.store(false);
  int efd = add_with_eventfd(**poller, task);
  ASSERT_GE(efd, 0);
  uint64_t one = 1;
  ASSERT_EQ(::write(efd, &one, sizeof one), ssize_t(sizeof one));  // readable from now on
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*poller)->wakeups().timer < 20 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  PollerWakeups w = (*poller)->wakeups();
  EXPECT_GE(w.timer, 20u);
  EXPECT_EQ(w.io, 0u) << "woken by an fd the task said to leave out";
  EXPECT_FALSE(watched_by_an_epoll(efd));
  task.fds_wake.store(true);
  while ((*poller)->wakeups().io < 20 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GE((*poller)->wakeups().io, 20u);
  (*poller)->remove_task(&task, {efd});
  ::close(efd);
}

// A task that says nothing reaches it but a wake-up (no clients, no timers) lets its poller
// sleep up to a second instead of a millisecond; its fd still ends the sleep at once.
TEST(Poller, SleepsLongWhenNoTaskNeedsATimedWakeup) {
  auto poller = Poller::start("untimed", -1);
  ASSERT_TRUE(poller);
  SwitchTask task;
  int efd = add_with_eventfd(**poller, task);
  ASSERT_GE(efd, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*poller)->parks() < 20 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_GE((*poller)->parks(), 20u) << "timed: a park a millisecond";
  task.timed.store(false);
  // Once the park in progress (a millisecond) is over, the next lasts up to a second.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  uint64_t parks = (*poller)->parks();
  uint64_t polls = task.polls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LE((*poller)->parks(), parks + 1) << "untimed: a park a second";
  // The fd readable: the poller wakes and polls on (2048 polls before it parks again).
  uint64_t one = 1;
  ASSERT_EQ(::write(efd, &one, sizeof one), 8);
  while (task.polls.load() < polls + 2048 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_GE(task.polls.load(), polls + 2048);
  ASSERT_EQ(::read(efd, &one, sizeof one), 8);
  (*poller)->remove_task(&task, {efd});
  ::close(efd);
}

// A task that needs no timer but has something falling due (a client flow's next dial): the
// poller sleeps until then, neither a millisecond at a time nor a whole second past it.
struct DueTask final : PollTask {
  bool poll() override {
    uint64_t now = dataplane::monotonic_ns();
    if (now >= due.load()) {
      polled_due_at.store(now);
      due.store(kNoWakeupDue);  // done: nothing else falls due
    }
    return false;
  }
  [[nodiscard]] bool needs_timed_wakeup() const override { return false; }
  [[nodiscard]] uint64_t wakeup_due_ns() const override { return due.load(); }
  std::atomic<uint64_t> due{kNoWakeupDue};
  std::atomic<uint64_t> polled_due_at{0};
};

TEST(Poller, SleepsUntilATasksWakeupFallsDue) {
  auto poller = Poller::start("due", -1);
  ASSERT_TRUE(poller);
  DueTask task;
  uint64_t start = dataplane::monotonic_ns();
  task.due.store(start + 150'000'000);
  (*poller)->add_task(&task, {});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (task.polled_due_at.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  uint64_t at = task.polled_due_at.load();
  ASSERT_NE(at, 0u) << "not polled within 3 s";
  EXPECT_GE(at, start + 150'000'000);
  // Not a second's sleep past it (the margin is for a loaded machine).
  EXPECT_LT(at, start + 700'000'000) << (at - start) / 1000 << " us after the start";
  // The park to the due time and the long one after it (a millisecond at a time: about 150).
  EXPECT_LE((*poller)->parks(), 6u);
  (*poller)->remove_task(&task, {});
}

// A control change wakes the poller and waits for its next two loops, never for a sleep to
// time out: woken, the poller runs its idle spins and may be asleep again, a long sleep if no
// task needs a timer, before the waiting thread looks (so it must read the loop count before
// it wakes the poller). A second is what one such sleep lasts; a change takes microseconds.
TEST(Poller, ControlChangesWaitForLoopsNotForLongSleeps) {
  for (int i = 0; i < 10; ++i) {
    auto poller = Poller::start("changes", -1);
    ASSERT_TRUE(poller);
    SwitchTask visitor;  // needs timed wake-ups: parks of a millisecond while it is there
    (*poller)->add_task(&visitor, {});
    uint64_t parks = (*poller)->parks();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((*poller)->parks() < parks + 20 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto start = std::chrono::steady_clock::now();
    (*poller)->remove_task(&visitor, {});  // then no task: the next sleeps are long
    auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, std::chrono::milliseconds(900)) << "waited for a long sleep to time out";
  }
}

// Quiet, a poller polls about once a park: the 2048 empty polls come only after a park that
// something ended (here the waits of add_task and remove_task).
TEST(Poller, PollsOnceBetweenQuietParks) {
  auto poller = Poller::start("quiet", -1);
  ASSERT_TRUE(poller);
  SwitchTask task;
  (*poller)->add_task(&task, {});
  // The wake add_task sent may end the park under way: its spins are over two parks later.
  uint64_t settled = (*poller)->parks() + 2;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*poller)->parks() < settled && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  uint64_t parks = (*poller)->parks();
  uint64_t polls = task.polls.load();
  while ((*poller)->parks() < parks + 50 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  uint64_t more_parks = (*poller)->parks() - parks;
  uint64_t more_polls = task.polls.load() - polls;
  EXPECT_GE(more_parks, 50u);
  EXPECT_LE(more_polls, 2 * more_parks + 2)
      << more_polls << " polls for " << more_parks << " parks";
  (*poller)->remove_task(&task, {});
}

// A task that counts how the poller asks for and drops wake-ups, and says work came in as it
// armed while told to.
struct ArmingTask final : PollTask {
  bool poll() override { return false; }
  bool arm_wakeups() override {
    arms.fetch_add(1);
    return !work_as_armed.load();
  }
  void disarm_wakeups() override { disarms.fetch_add(1); }
  std::atomic<bool> work_as_armed{false};
  std::atomic<uint64_t> arms{0};
  std::atomic<uint64_t> disarms{0};
};

// Before each park the poller arms its tasks' wake-ups and after it disarms them; a task
// that had work by the time it armed keeps the poller from parking at all.
TEST(Poller, ArmsWakeupsAroundEachParkAndSkipsTheParkWhenWorkCameIn) {
  auto poller = Poller::start("arming", -1);
  ASSERT_TRUE(poller);
  ArmingTask task;
  (*poller)->add_task(&task, {});
  // Parks before the task came did not arm it; the one in progress at this reading may have
  // armed before it (a park counts itself after arming).
  uint64_t parks_before = (*poller)->parks();
  uint64_t arms_before = task.arms.load();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*poller)->parks() < parks_before + 5 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Read in this order, each count can only have grown since the one before it was read.
  uint64_t parks = (*poller)->parks() - parks_before;
  uint64_t arms = task.arms.load();
  uint64_t disarms = task.disarms.load();
  EXPECT_GE(parks, 5u);
  EXPECT_GE(arms - arms_before + 1, parks) << "a park without arming";
  EXPECT_GE(disarms + 1, arms) << "armed " << arms << " times, disarmed " << disarms;
  task.work_as_armed.store(true);
  // Once it has armed twice more, the park that was in progress is over: none follows.
  arms = task.arms.load();
  while (task.arms.load() < arms + 2)
    std::this_thread::yield();
  parks = (*poller)->parks();
  arms = task.arms.load();
  while (task.arms.load() < arms + 100)
    std::this_thread::yield();
  EXPECT_EQ((*poller)->parks(), parks) << "parked although a task had work as it armed";
  task.work_as_armed.store(false);
  (*poller)->remove_task(&task, {});
}

// A watched doorbell (a TX client's kick eventfd) ends a park; the poller drains it and
// counts what was written; once unwatched it is out of the epoll set and counts nothing.
TEST(Poller, DrainsAndCountsAWatchedDoorbell) {
  std::atomic<uint64_t> rung{0};  // outlives the poller, whatever fails
  auto poller = Poller::start("doorbell", -1);
  ASSERT_TRUE(poller);
  SwitchTask task;  // needs timed wake-ups: parks of a millisecond
  (*poller)->add_task(&task, {});
  int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(efd, 0);
  (*poller)->watch(efd, &rung);
  EXPECT_TRUE(watched_by_an_epoll(efd));
  uint64_t three = 3;
  ASSERT_EQ(::write(efd, &three, sizeof three), ssize_t(sizeof three));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rung.load() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(rung.load(), 3u);
  uint64_t left = 0;
  EXPECT_EQ(::read(efd, &left, sizeof left), -1) << "not drained: " << left;
  (*poller)->unwatch(efd);
  EXPECT_FALSE(watched_by_an_epoll(efd));
  ASSERT_EQ(::write(efd, &three, sizeof three), ssize_t(sizeof three));
  uint64_t parks = (*poller)->parks();
  while ((*poller)->parks() < parks + 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(rung.load(), 3u);
  (*poller)->remove_task(&task, {});
  ::close(efd);
}

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

TEST(BufferPool, OwnerManagedPoolsNeverReturnBuffersToTheFreeQueue) {
  auto p = memory::BufferPool::create("window", 256, 4, false);
  ASSERT_TRUE(p);
  p->make_owner_managed();
  uint32_t b = 0;
  EXPECT_EQ(p->alloc(&b, 1), 0u);
  p->set_refs(2, 2);
  p->unref(2);
  EXPECT_EQ(p->refs(2), 1u);
  p->unref(2);
  EXPECT_EQ(p->refs(2), 0u);
  EXPECT_EQ(p->available(), 0u);
  EXPECT_EQ(p->alloc(&b, 1), 0u);
}

TEST(SharedMemory, ReadOnlyFdsCannotBecomeWritable) {
  auto m = memory::SharedMemory::create("t", 4096, false);
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->seal_read_only_for_others());
  m->data()[0] = std::byte{1};  // the daemon's own mapping still writes
  auto ro = m->read_only_fd();
  ASSERT_TRUE(ro);
  void* w = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ro->get(), 0);
  EXPECT_EQ(w, MAP_FAILED);
  // Even a fresh read-write open of the same memfd cannot map it writable.
  std::string path = "/proc/self/fd/" + std::to_string(ro->get());
  UniqueFd rw(::open(path.c_str(), O_RDWR));
  if (rw) {
    void* w2 = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw.get(), 0);
    EXPECT_EQ(w2, MAP_FAILED);
  }
  void* r = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, ro->get(), 0);
  ASSERT_NE(r, MAP_FAILED);
  EXPECT_EQ(static_cast<std::byte*>(r)[0], std::byte{1});
  ::munmap(r, 4096);
}

TEST(Frame, WriteParseRoundTripWithValidChecksum) {
  std::byte buf[200] = {};
  size_t h = frame::write_udp_headers(buf, {0x7f000001, 1234}, {0x0a000002, 4096}, 100);
  ASSERT_EQ(h, 42u);
  auto f = frame::parse_udp({buf, 142});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->src.port, 1234);
  EXPECT_EQ(f->dst.ipv4, 0x0a000002u);
  EXPECT_EQ(f->payload_offset, 42u);
  EXPECT_EQ(f->payload_length, 100u);
  EXPECT_EQ(frame::internet_checksum(buf + 14, 20), 0);  // a valid header sums to zero
  EXPECT_FALSE(frame::parse_udp({buf, 100}));            // shorter than its IP length
  buf[23] = std::byte{6};                                // TCP
  EXPECT_FALSE(frame::parse_udp({buf, 142}));
}

TEST(Pattern, DetectsCorruption) {
  std::vector<std::byte> p(256);
  pattern::fill(p, 7, 42);
  pattern::Header h{};
  EXPECT_EQ(pattern::check(p, h), pattern::Check::kOk);
  EXPECT_EQ(h.sequence, 42u);
  p[200] ^= std::byte{1};
  EXPECT_EQ(pattern::check(p, h), pattern::Check::kCorrupt);
}

TEST(RingView, OpenRejectsWhatTheDaemonDidNotWrite) {
  std::vector<std::byte> mem(abi::RingView::bytes_for(64, 32));
  abi::RingView::create(mem.data(), DAQIRI_RING_RX, 64, 32);
  EXPECT_TRUE(abi::RingView::open(mem.data(), mem.size(), DAQIRI_RING_RX, 32));
  EXPECT_FALSE(abi::RingView::open(mem.data(), mem.size(), DAQIRI_RING_TX, 32));
  EXPECT_FALSE(abi::RingView::open(mem.data(), mem.size() - 64, DAQIRI_RING_RX, 32));
  reinterpret_cast<daqiri_ring_header*>(mem.data())->size = 63;
  EXPECT_FALSE(abi::RingView::open(mem.data(), mem.size(), DAQIRI_RING_RX, 32));
}

}  // namespace
}  // namespace daqiri::dataplane
