// Pools and rings as the data plane's unit tests use them.
#pragma once

#include <numeric>
#include <vector>

#include "daqiri/ring.hpp"
#include "dataplane/rx_attachment.hpp"
#include "memory/buffer_pool.hpp"

namespace daqiri::dataplane {

// A descriptor of buffer `buf` of `pool`, 100 bytes long.
inline daqiri_rx_desc desc(memory::BufferPool& pool, uint32_t buf) {
  daqiri_rx_desc d{};
  d.offset = pool.offset(buf);
  d.length = 100;
  return d;
}

// The client's side of an RX ring, as a client would see it through its own mapping.
inline abi::RingView client_ring(RxAttachment& a) {
  return *abi::RingView::open(a.rings().data(), a.rings().size(), DAQIRI_RING_RX,
                              sizeof(daqiri_rx_desc));
}

// A pool whose buffers are all handed out, as a DPDK queue's are to its mbufs, and whose
// owner (BufferPool::return_to) counts each buffer's object as it comes back.
struct PoolOfObjects final : memory::BufferPool::Owner {
  explicit PoolOfObjects(uint32_t n)
      : pool(memory::BufferPool::create("t", 2048, n, false)), objects(n), back(n, 0) {
    for (auto& o : objects)
      object_of.push_back(&o);
    if (!pool) return;
    std::vector<uint32_t> all(n);
    pool->alloc(all.data(), n);
    pool->return_to(object_of.data(), *this);
  }
  void give_back(void* const* objs, uint32_t count) override {
    for (uint32_t i = 0; i < count; ++i)
      ++back[static_cast<int*>(objs[i]) - objects.data()];
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

}  // namespace daqiri::dataplane
