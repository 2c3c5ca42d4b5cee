// Packs the pools of one `share_pages` region into shared hugepage memfds ("slabs"), so that
// many small pools take one 2 MB page between them instead of a page each. The price is
// isolation: a client of any pool in a slab maps the whole slab (read-only), so it can read
// the other pools' packets. Only regions that opt in are packed (docs/configuration.md).
// Slabs are filled front to back and freed when their last pool goes; space a freed pool
// leaves inside a live slab is not reused. Control path only (flow creation), under the
// data plane's lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "memory/shared_memory.hpp"

namespace daqiri::memory {

// A pool's place: the slab that holds it and where in the slab it starts.
struct ArenaShare {
  std::shared_ptr<SharedMemory> slab;
  uint64_t offset = 0;
};

class PageArena {
 public:
  PageArena(std::string name, bool huge) : name_(std::move(name)), huge_(huge) {}

  // `bytes` at a 64-byte aligned offset in the current slab when it has room, else at the
  // start of a new slab of whole pages.
  Result<ArenaShare> take(uint64_t bytes);

  // Pages a region's `pools` pools of `pool_bytes` each take when packed this way. Inline: the
  // config validator counts pages with it and links no memory code.
  static constexpr uint64_t pages_for(uint64_t pools, uint64_t pool_bytes, uint64_t page_bytes) {
    if (pools == 0) return 0;
    uint64_t slab_pages = (pool_bytes + page_bytes - 1) / page_bytes;
    uint64_t aligned = (pool_bytes + 63) / 64 * 64;
    // Pools after the first go at 64-byte aligned offsets: the first takes pool_bytes, each
    // further one `aligned` more, while the slab's pages hold them.
    uint64_t per_slab = 1 + (slab_pages * page_bytes - pool_bytes) / aligned;
    return (pools + per_slab - 1) / per_slab * slab_pages;
  }

 private:
  std::string name_;
  bool huge_;
  std::weak_ptr<SharedMemory> current_;
  uint64_t used_ = 0;  // bytes taken from the front of current_
  uint32_t slabs_ = 0;
};

}  // namespace daqiri::memory
