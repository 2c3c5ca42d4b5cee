#include "gpu/gpu_tx_buffers.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>

#include "daqiri/cuda/device_scope.hpp"
#include "daqiri/cuda/vmm_allocation.hpp"

namespace daqiri::gpu {
namespace {

struct Allocation {
  cuda::VmmAllocation alloc;
  UniqueFd fd;
};

}  // namespace

Result<dataplane::GpuTxBuffers> make_gpu_tx_buffers(const GpuDevice& gpu, uint32_t count,
                                                    uint32_t slot_size, uint32_t header_size,
                                                    bool nic_reads) {
  auto scope = cuda::ContextScope::enter(gpu.api(), gpu.context());
  if (!scope) return std::unexpected(scope.error());
  auto alloc =
      cuda::VmmAllocation::create(gpu.api(), gpu.device(), uint64_t{count} * slot_size, nic_reads);
  if (!alloc) return std::unexpected(alloc.error());
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the driver API's device addresses are integers
  auto* base = reinterpret_cast<std::byte*>(alloc->ptr());
  if (cudaError_t e = cudaMemset(base, 0, alloc->size()); e != cudaSuccess) {
    return std::unexpected(runtime_error(e, "cudaMemset of GPU TX buffers"));
  }
  auto fd = alloc->export_fd();
  if (!fd) return std::unexpected(fd.error());
  dataplane::GpuTxBuffers b;
  std::memcpy(b.info.device_uuid, gpu.uuid().data(), sizeof b.info.device_uuid);
  b.info.size = count;
  // The region's buf_size exactly: a frame is at most a header and a GPU buffer, as the client
  // reads it (TxStream::buf_size()) and the daemon checks it.
  b.info.slot_size = slot_size;
  b.info.gpu = static_cast<uint32_t>(gpu.ordinal());
  b.info.header_size = header_size;
  b.info.alloc_size = alloc->size();
  b.memory.base = base;
  b.memory.bytes = alloc->size();
  b.vmm_fd = fd->get();
  b.memory.owner = std::make_shared<Allocation>(Allocation{std::move(*alloc), std::move(*fd)});
  return b;
}

}  // namespace daqiri::gpu
