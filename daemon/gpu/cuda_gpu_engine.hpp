// The GPU engine of a daqirid built with CUDA: opens each GPU on first use (its primary
// context retained), pins the host pools its rings read, and makes GpuRxTask rings and
// GpuTxTask copies.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "gpu/gpu_device.hpp"
#include "gpu/gpu_engine.hpp"
#include "gpu/host_registration.hpp"

namespace daqiri::gpu {

class CudaGpuEngine final : public GpuEngine {
 public:
  ~CudaGpuEngine() override;
  Result<memory::DeviceMemory> device_memory(const config::MemoryRegionConfig& region) override;
  Result<std::unique_ptr<GpuRing>> create_ring(dataplane::RxAttachment& source,
                                               const config::MemoryRegionConfig& region,
                                               uint32_t slots, uint32_t header_size, bool cuda_ipc,
                                               bool busy_poll) override;
  Result<dataplane::GpuTxBuffers> tx_buffers(const config::MemoryRegionConfig& region,
                                             uint32_t count, uint32_t header_size,
                                             bool nic_reads) override;
  Result<std::unique_ptr<GpuRing>> create_tx(std::unique_ptr<dataplane::TxAttachment> client,
                                             dataplane::TxAttachment& internal,
                                             const config::MemoryRegionConfig& region,
                                             bool busy_poll) override;
  void forget_pool(const memory::BufferPool* pool) override;
  // Empty without a GPU or a driver (cudaErrorNoDevice / InsufficientDriver).
  [[nodiscard]] std::vector<GpuInfo> devices() const override;

 private:
  // The region's GPU (its primary context retained on first use).
  Result<GpuDevice*> gpu_of(const config::MemoryRegionConfig& region);
  std::map<int, std::unique_ptr<GpuDevice>> gpus_;  // outlive everything below
  std::map<const memory::BufferPool*, HostRegistration> pinned_pools_;
};

}  // namespace daqiri::gpu
