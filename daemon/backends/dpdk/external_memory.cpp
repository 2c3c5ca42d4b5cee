#include "backends/dpdk/external_memory.hpp"

#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_memory.h>
#include <rte_mempool.h>

#include <algorithm>

namespace daqiri::backends::dpdk {

Result<std::unique_ptr<ExternalMemory>> ExternalMemory::register_memory(
    const memory::SharedMemory& memory, rte_device* dma_device) {
  return register_range(memory.data(), memory.size(), memory.page_size(), dma_device);
}

Result<std::unique_ptr<ExternalMemory>> ExternalMemory::register_range(std::byte* base, size_t size,
                                                                       size_t page_size,
                                                                       rte_device* dma_device) {
  if (rte_extmem_register(base, size, nullptr, 0, page_size) != 0) {
    return fail(ErrorCode::kInternal,
                std::string("rte_extmem_register: ") + rte_strerror(rte_errno));
  }
  if (dma_device != nullptr) {
    auto iova = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(base));
    if (rte_dev_dma_map(dma_device, base, iova, size) != 0) {
      int err = rte_errno;
      rte_extmem_unregister(base, size);
      return fail(ErrorCode::kInternal, std::string("rte_dev_dma_map: ") + rte_strerror(err));
    }
  }
  return std::unique_ptr<ExternalMemory>(new ExternalMemory(base, size, dma_device));
}

ExternalMemory::~ExternalMemory() {
  if (dma_ != nullptr) {
    rte_dev_dma_unmap(dma_, base_, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(base_)),
                      size_);
  }
  rte_extmem_unregister(base_, size_);
}

unsigned mempool_cache_size(uint32_t count) {
  // DPDK: cache_size <= RTE_MEMPOOL_CACHE_MAX_SIZE and cache_size * 1.5 <= count.
  return std::min<unsigned>({256u, RTE_MEMPOOL_CACHE_MAX_SIZE, count * 2 / 3});
}

Result<std::unique_ptr<ExternalMbufPool>> ExternalMbufPool::create(
    const std::string& name, std::unique_ptr<ExternalMemory> memory, uint16_t elt_size,
    uint32_t count, int socket, bool cached) {
  if (uint64_t{elt_size} * count > memory->size()) {
    return fail(ErrorCode::kInternal, "external memory too small for its mbufs");
  }
  rte_pktmbuf_extmem ext{};
  ext.buf_ptr = memory->base();
  ext.buf_iova = memory->iova(memory->base());
  ext.buf_len = memory->size();
  ext.elt_size = elt_size;
  rte_mempool* mp = rte_pktmbuf_pool_create_extbuf(
      name.c_str(), count, cached ? mempool_cache_size(count) : 0, 0, elt_size, socket, &ext, 1);
  if (mp == nullptr) {
    return fail(ErrorCode::kResourceExhausted,
                "mbuf pool " + name + " over client-shared memory: " + rte_strerror(rte_errno) +
                    " (mbuf headers come from the EAL heap: raise dpdk.memory_mb)");
  }
  return std::unique_ptr<ExternalMbufPool>(new ExternalMbufPool(std::move(memory), mp));
}

ExternalMbufPool::~ExternalMbufPool() {
  rte_mempool_free(pool_);
}

}  // namespace daqiri::backends::dpdk
