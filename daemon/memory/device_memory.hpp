// GPU memory that a NIC writes into, as the backends see it: an address range (not mapped on
// the host), a dma-buf fd through which the NIC's driver pins and maps it, and an owner that
// keeps both alive. The gpu module makes one (gpu::DevicePoolMemory); backends need no CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace daqiri::memory {

struct DeviceMemory {
  std::byte* base = nullptr;  // a device address
  uint64_t bytes = 0;
  int dmabuf_fd = -1;  // owned by `owner`
  std::shared_ptr<void> owner;
};

}  // namespace daqiri::memory
