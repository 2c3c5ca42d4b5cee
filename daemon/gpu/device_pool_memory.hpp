// A flow's packet pool in GPU memory, for NICs that DMA straight into the GPU (GPUDirect RDMA):
// one VMM allocation made RDMA-capable, exported as a dma-buf for the NIC to register
// (ibv_reg_dmabuf_mr). Packets then reach GPU rings by a device-to-device gather instead of a
// copy from pinned host memory.
#pragma once

#include "daqiri/cuda/vmm_allocation.hpp"
#include "gpu/gpu_device.hpp"
#include "memory/device_memory.hpp"

namespace daqiri::gpu {

class DevicePoolMemory {
 public:
  // At least `bytes`, zero-filled, on `gpu`.
  static Result<memory::DeviceMemory> create(const GpuDevice& gpu, uint64_t bytes);

 private:
  DevicePoolMemory(cuda::VmmAllocation alloc, UniqueFd dmabuf)
      : alloc_(std::move(alloc)), dmabuf_(std::move(dmabuf)) {}

  cuda::VmmAllocation alloc_;
  UniqueFd dmabuf_;
};

}  // namespace daqiri::gpu
