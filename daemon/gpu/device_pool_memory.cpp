#include "gpu/device_pool_memory.hpp"

#include <cuda_runtime_api.h>

namespace daqiri::gpu {

Result<memory::DeviceMemory> DevicePoolMemory::create(const GpuDevice& gpu, uint64_t bytes) {
  auto scope = cuda::ContextScope::enter(gpu.api(), gpu.context());
  if (!scope) return std::unexpected(scope.error());
  auto alloc = cuda::VmmAllocation::create(gpu.api(), gpu.device(), bytes, /*rdma=*/true);
  if (!alloc) return std::unexpected(alloc.error());
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the driver API's device addresses are integers
  if (cudaError_t e = cudaMemset(reinterpret_cast<void*>(alloc->ptr()), 0, alloc->size());
      e != cudaSuccess) {
    return std::unexpected(runtime_error(e, "cudaMemset of a GPU packet pool"));
  }
  auto dmabuf = alloc->export_dmabuf();
  if (!dmabuf) return std::unexpected(dmabuf.error());
  std::shared_ptr<DevicePoolMemory> owner(
      new DevicePoolMemory(std::move(*alloc), std::move(*dmabuf)));
  memory::DeviceMemory m;
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  m.base = reinterpret_cast<std::byte*>(owner->alloc_.ptr());
  m.bytes = owner->alloc_.size();
  m.dmabuf_fd = owner->dmabuf_.get();
  m.owner = std::move(owner);
  return m;
}

}  // namespace daqiri::gpu
