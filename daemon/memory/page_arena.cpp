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

}  // namespace daqiri::memory
