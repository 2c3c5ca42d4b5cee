#include "gpu/device_ring.hpp"

#include <cuda_runtime_api.h>

#include <cstring>

#include "daqiri/cuda/device_scope.hpp"

namespace daqiri::gpu {
namespace {

constexpr uint64_t kAlign = 256;  // slots and descriptors start on 256-byte boundaries

uint64_t align_up(uint64_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

Result<DeviceRing> DeviceRing::create(const GpuDevice& gpu, uint32_t slots, uint32_t slot_size,
                                      uint32_t header_size, bool legacy_ipc) {
  if (slots == 0 || (slots & (slots - 1)) != 0) {
    return fail(ErrorCode::kInvalidArgument, "GPU ring slots must be a power of two");
  }
  daqiri_gpu_ring_info info{};
  std::memcpy(info.device_uuid, gpu.uuid().data(), sizeof info.device_uuid);
  info.size = slots;
  info.slot_size = static_cast<uint32_t>(align_up(slot_size));
  info.gpu = static_cast<uint32_t>(gpu.ordinal());
  info.header_size = header_size;
  info.doorbell_offset = 0;
  info.desc_offset = kAlign;
  info.payload_offset = align_up(info.desc_offset + uint64_t{slots} * sizeof(daqiri_rx_desc));
  uint64_t bytes = info.payload_offset + uint64_t{slots} * info.slot_size;
  auto scope = cuda::ContextScope::enter(gpu.api(), gpu.context());
  if (!scope) return std::unexpected(scope.error());
  if (legacy_ipc) {
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
      return std::unexpected(runtime_error(e, "cudaMalloc of a GPU ring (cuda_ipc)"));
    }
    LegacyMemory legacy(p, CudaFree{gpu.ordinal()});
    info.alloc_size = bytes;
    if (cudaError_t e = cudaMemset(p, 0, bytes); e != cudaSuccess) {
      return std::unexpected(runtime_error(e, "cudaMemset of a GPU ring"));
    }
    return DeviceRing({}, std::move(legacy), info);
  }
  auto alloc = cuda::VmmAllocation::create(gpu.api(), gpu.device(), bytes);
  if (!alloc) return std::unexpected(alloc.error());
  info.alloc_size = alloc->size();
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the driver API's device addresses are integers
  if (cudaError_t e = cudaMemset(reinterpret_cast<void*>(alloc->ptr()), 0, alloc->size());
      e != cudaSuccess) {
    return std::unexpected(runtime_error(e, "cudaMemset of a GPU ring"));
  }
  return DeviceRing(std::move(*alloc), LegacyMemory(nullptr, CudaFree{}), info);
}

Result<std::string> DeviceRing::ipc_handle() const {
  cudaIpcMemHandle_t h{};
  if (!legacy_) return fail(ErrorCode::kFailedPrecondition, "not a cuda_ipc ring");
  cuda::DeviceScope scope(legacy_.get_deleter().device);
  cudaError_t e = cudaIpcGetMemHandle(&h, legacy_.get());
  if (e != cudaSuccess) return std::unexpected(runtime_error(e, "cudaIpcGetMemHandle"));
  return std::string(reinterpret_cast<const char*>(&h), sizeof h);
}

void DeviceRing::CudaFree::operator()(void* p) const {
  cuda::DeviceScope scope(device);
  cudaFree(p);
}

}  // namespace daqiri::gpu
