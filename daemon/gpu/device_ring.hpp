// A GPU ring's device memory: doorbell, descriptors and payload slots in one VMM allocation
// that clients import (layout: daqiri_gpu_ring_info in daqiri/abi.h).
#pragma once

#include <memory>
#include <string>

#include "daqiri/abi.h"
#include "daqiri/cuda/vmm_allocation.hpp"
#include "gpu/gpu_device.hpp"

namespace daqiri::gpu {

class DeviceRing {
 public:
  // Zero-filled. `slots` a power of two; `slot_size` rounded up to 256 bytes.
  // `header_size`: recorded in info() for clients (header-data split), 0 without.
  // `legacy_ipc`: cudaMalloc'd, shared by cudaIpcMemHandle_t instead of a VMM fd (VMM memory
  // has no legacy handle).
  static Result<DeviceRing> create(const GpuDevice& gpu, uint32_t slots, uint32_t slot_size,
                                   uint32_t header_size = 0, bool legacy_ipc = false);

  [[nodiscard]] const daqiri_gpu_ring_info& info() const { return info_; }
  [[nodiscard]] uint8_t* base() const {
    if (legacy_) return static_cast<uint8_t*>(legacy_.get());
    // The driver API hands out device addresses as integers.
    return reinterpret_cast<uint8_t*>(alloc_.ptr());  // NOLINT(performance-no-int-to-ptr)
  }
  [[nodiscard]] CUdeviceptr doorbell() const {
    return reinterpret_cast<CUdeviceptr>(base()) + info_.doorbell_offset;
  }
  [[nodiscard]] daqiri_rx_desc* descs() const {
    return reinterpret_cast<daqiri_rx_desc*>(base() + info_.desc_offset);
  }
  [[nodiscard]] uint64_t slot_offset(uint32_t counter) const {
    return info_.payload_offset + uint64_t{counter & (info_.size - 1)} * info_.slot_size;
  }
  [[nodiscard]] Result<UniqueFd> export_fd() const { return alloc_.export_fd(); }
  [[nodiscard]] bool legacy_ipc() const { return legacy_ != nullptr; }
  // The cudaIpcMemHandle_t bytes of a legacy_ipc ring.
  [[nodiscard]] Result<std::string> ipc_handle() const;

 private:
  // cudaFree on the ring's own device, the caller's current device put back.
  struct CudaFree {
    int device = 0;
    void operator()(void* p) const;
  };
  using LegacyMemory = std::unique_ptr<void, CudaFree>;
  DeviceRing(cuda::VmmAllocation alloc, LegacyMemory legacy, daqiri_gpu_ring_info info)
      : alloc_(std::move(alloc)), legacy_(std::move(legacy)), info_(info) {}

  cuda::VmmAllocation alloc_;
  LegacyMemory legacy_;
  daqiri_gpu_ring_info info_{};
};

}  // namespace daqiri::gpu
