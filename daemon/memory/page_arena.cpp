#include "memory/page_arena.hpp"

namespace daqiri::memory {

Result<ArenaShare> PageArena::take(uint64_t bytes) {
  uint64_t at = (used_ + 63) / 64 * 64;
  if (auto slab = current_.lock(); slab && at + bytes <= slab->size()) {
    used_ = at + bytes;
    return ArenaShare{std::move(slab), at};
  }
  auto mem = SharedMemory::create(name_ + "-slab" + std::to_string(slabs_), bytes, huge_);
  if (!mem) return std::unexpected(mem.error());
  auto slab = std::make_shared<SharedMemory>(std::move(*mem));
  ++slabs_;
  current_ = slab;
  used_ = bytes;
  return ArenaShare{std::move(slab), 0};
}

uint64_t PageArena::pages_for(uint64_t pools, uint64_t pool_bytes, uint64_t page_bytes) {
  if (pools == 0) return 0;
  uint64_t slab_pages = (pool_bytes + page_bytes - 1) / page_bytes;
  uint64_t aligned = (pool_bytes + 63) / 64 * 64;
  // Pools after the first go at 64-byte aligned offsets: the first takes pool_bytes, each
  // further one `aligned` more, while the slab's pages hold them.
  uint64_t per_slab = 1 + (slab_pages * page_bytes - pool_bytes) / aligned;
  return (pools + per_slab - 1) / per_slab * slab_pages;
}

}  // namespace daqiri::memory
