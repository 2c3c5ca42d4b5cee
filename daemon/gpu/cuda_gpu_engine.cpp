#include "gpu/cuda_gpu_engine.hpp"

#include <cuda_runtime_api.h>

#include "gpu/device_pool_memory.hpp"
#include "gpu/gpu_rx_task.hpp"
#include "gpu/gpu_tx_buffers.hpp"
#include "gpu/gpu_tx_task.hpp"

namespace daqiri::gpu {

CudaGpuEngine::~CudaGpuEngine() {
  pinned_pools_.clear();  // before the GPUs' contexts go
}

Result<GpuDevice*> CudaGpuEngine::gpu_of(const config::MemoryRegionConfig& region) {
  int ordinal = region.gpu < 0 ? 0 : region.gpu;
  auto dev = gpus_.find(ordinal);
  if (dev == gpus_.end()) {
    auto opened = GpuDevice::open(ordinal);
    if (!opened) return std::unexpected(opened.error());
    dev = gpus_.emplace(ordinal, std::move(*opened)).first;
  }
  return dev->second.get();
}

Result<memory::DeviceMemory> CudaGpuEngine::device_memory(
    const config::MemoryRegionConfig& region) {
  auto gpu = gpu_of(region);
  if (!gpu) return std::unexpected(gpu.error());
  return DevicePoolMemory::create(**gpu, region.total_bytes());
}

Result<std::unique_ptr<GpuRing>> CudaGpuEngine::create_ring(
    dataplane::RxAttachment& source, const config::MemoryRegionConfig& region, uint32_t slots,
    uint32_t header_size, bool cuda_ipc, bool busy_poll) {
  auto dev = gpu_of(region);
  if (!dev) return std::unexpected(dev.error());
  if (auto ok = (*dev)->make_current(); !ok) return std::unexpected(ok.error());
  std::vector<uint64_t> addresses;
  for (memory::BufferPool* pool : source.pools()) {
    if (pool->on_device()) {
      // GPUDirect: the NIC wrote it into GPU memory; the engine copies device to device.
      addresses.push_back(reinterpret_cast<uintptr_t>(pool->data()));
      continue;
    }
    auto reg = pinned_pools_.find(pool);
    if (reg == pinned_pools_.end()) {
      auto r = HostRegistration::create(pool->memory().data(), pool->memory().size());
      if (!r) return std::unexpected(r.error());
      reg = pinned_pools_.emplace(pool, std::move(*r)).first;
    }
    addresses.push_back(reg->second.device_address());
  }
  auto task = GpuRxTask::create(**dev, source, std::move(addresses), slots, region.buf_size,
                                header_size, cuda_ipc);
  if (!task) return std::unexpected(task.error());
  if (busy_poll) (*task)->spin_while_attached();
  return std::unique_ptr<GpuRing>(std::move(*task));
}

Result<dataplane::GpuTxBuffers> CudaGpuEngine::tx_buffers(const config::MemoryRegionConfig& region,
                                                          uint32_t count, uint32_t header_size,
                                                          bool nic_reads) {
  auto dev = gpu_of(region);
  if (!dev) return std::unexpected(dev.error());
  return make_gpu_tx_buffers(**dev, count, region.buf_size, header_size, nic_reads);
}

Result<std::unique_ptr<GpuRing>> CudaGpuEngine::create_tx(
    std::unique_ptr<dataplane::TxAttachment> client, dataplane::TxAttachment& internal,
    const config::MemoryRegionConfig& region, bool busy_poll) {
  auto dev = gpu_of(region);
  if (!dev) return std::unexpected(dev.error());
  auto task = GpuTxTask::create(**dev, std::move(client), internal);
  if (!task) return std::unexpected(task.error());
  if (busy_poll) (*task)->spin_while_attached();
  return std::unique_ptr<GpuRing>(std::move(*task));
}

void CudaGpuEngine::forget_pool(const memory::BufferPool* pool) {
  if (pool == nullptr) {
    pinned_pools_.clear();
  } else {
    pinned_pools_.erase(pool);
  }
}

std::vector<GpuInfo> CudaGpuEngine::devices() const {
  std::vector<GpuInfo> gpus;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: report none
    return gpus;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    char bus[32] = {};
    cudaDeviceGetPCIBusId(bus, sizeof bus, i);
    gpus.push_back({static_cast<uint32_t>(i), prop.name, prop.totalGlobalMem, bus});
  }
  return gpus;
}

}  // namespace daqiri::gpu
