// BufferPool: allocation, references, the free FIFO's order, and buffers handed back to the
// allocator that owns them.
#include <gtest/gtest.h>

#include <vector>

#include "memory/buffer_pool.hpp"

namespace daqiri::dataplane {
namespace {

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
  struct Owner final : memory::BufferPool::Owner {
    std::vector<void*> back;
    uint32_t calls = 0;
    uint32_t longest = 0;
    void give_back(void* const* objs, uint32_t n) override {
      back.insert(back.end(), objs, objs + n);
      ++calls;
      longest = std::max(longest, n);
    }
  } owner;
  pool->return_to(object_of.data(), owner);
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

}  // namespace
}  // namespace daqiri::dataplane
