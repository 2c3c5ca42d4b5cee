// Daemon memory (a client-shared memfd mapping, or GPU memory of gpudirect queues) made known
// to DPDK: registered as external memory, DMA-mapped for a PCI device when there is one, and
// optionally cut into a pktmbuf pool whose mbufs carry their data in that memory
// (rte_pktmbuf_pool_create_extbuf): what a NIC writes there is what a client maps, or what the
// gpu engine reads. RAII: undone in reverse on destruction.
#pragma once

#include <rte_dev.h>
#include <rte_mbuf.h>

#include <memory>
#include <string>

#include "daqiri/common/result.hpp"
#include "memory/shared_memory.hpp"

namespace daqiri::backends::dpdk {

// GPU pages, as the NIC's peer-memory driver pins them (DPDK's gpudev uses the same).
inline constexpr size_t kGpuPageSize = size_t{1} << 16;

class ExternalMemory {
 public:
  // `dma_device`: the PCI device that will DMA to it, or null for virtual devices.
  static Result<std::unique_ptr<ExternalMemory>> register_memory(const memory::SharedMemory& memory,
                                                                 rte_device* dma_device);
  // Any range DPDK never touches itself: `page_size` is what the IOMMU (or the NIC's peer-memory
  // driver, for GPU memory) maps at a time. DPDK keeps only the range; nothing is read or written.
  static Result<std::unique_ptr<ExternalMemory>> register_range(std::byte* base, size_t size,
                                                                size_t page_size,
                                                                rte_device* dma_device);
  ~ExternalMemory();
  ExternalMemory(const ExternalMemory&) = delete;
  ExternalMemory& operator=(const ExternalMemory&) = delete;

  [[nodiscard]] std::byte* base() const { return base_; }
  [[nodiscard]] size_t size() const { return size_; }
  // IOVA as VA (the Eal refuses to start otherwise).
  [[nodiscard]] rte_iova_t iova(const std::byte* p) const {
    return static_cast<rte_iova_t>(reinterpret_cast<uintptr_t>(p));
  }

 private:
  ExternalMemory(std::byte* base, size_t size, rte_device* dma)
      : base_(base), size_(size), dma_(dma) {}
  std::byte* base_;
  size_t size_;
  rte_device* dma_;
};

class ExternalMbufPool {
 public:
  // `count` mbufs whose data buffers are consecutive `elt_size` slices of the memory. Without a
  // per-core cache (`cached` false) buffers come back in the order they were freed.
  static Result<std::unique_ptr<ExternalMbufPool>> create(const std::string& name,
                                                          std::unique_ptr<ExternalMemory> memory,
                                                          uint16_t elt_size, uint32_t count,
                                                          int socket, bool cached = true);
  ~ExternalMbufPool();
  ExternalMbufPool(const ExternalMbufPool&) = delete;
  ExternalMbufPool& operator=(const ExternalMbufPool&) = delete;

  [[nodiscard]] rte_mempool* mempool() const { return pool_; }
  [[nodiscard]] const ExternalMemory& memory() const { return *memory_; }

 private:
  ExternalMbufPool(std::unique_ptr<ExternalMemory> memory, rte_mempool* pool)
      : memory_(std::move(memory)), pool_(pool) {}
  std::unique_ptr<ExternalMemory> memory_;
  rte_mempool* pool_;
};

// Mempool cache per lcore: as large as DPDK allows for `count` objects, at most 256.
unsigned mempool_cache_size(uint32_t count);

}  // namespace daqiri::backends::dpdk
