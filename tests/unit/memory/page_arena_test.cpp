// PageArena: pools of a share_pages region packed into slabs of whole pages.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "memory/buffer_pool.hpp"
#include "memory/page_arena.hpp"

namespace daqiri::dataplane {
namespace {

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

}  // namespace
}  // namespace daqiri::dataplane
