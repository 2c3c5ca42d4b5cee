// A GPU ring's device memory: doorbell, descriptors and payload slots in one VMM allocation
// that clients import (layout: daqiri_gpu_ring_info in daqiri/abi.h).
#pragma once

#include "daqiri/abi.h"
#include "daqiri/cuda/vmm_allocation.hpp"
#include "gpu/gpu_device.hpp"

namespace daqiri::gpu {

class DeviceRing {
 public:
  // Zero-filled. `slots` a power of two; `slot_size` rounded up to 256 bytes.
  // `header_size`: recorded in info() for clients (header-data split), 0 without.
  static Result<DeviceRing> create(const GpuDevice& gpu, uint32_t slots, uint32_t slot_size,
                                   uint32_t header_size = 0);

  [[nodiscard]] const daqiri_gpu_ring_info& info() const { return info_; }
  // The driver API hands out device addresses as integers.
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  [[nodiscard]] uint8_t* base() const { return reinterpret_cast<uint8_t*>(alloc_.ptr()); }
  [[nodiscard]] CUdeviceptr doorbell() const { return alloc_.ptr() + info_.doorbell_offset; }
  [[nodiscard]] daqiri_rx_desc* descs() const {
    return reinterpret_cast<daqiri_rx_desc*>(base() + info_.desc_offset);
  }
  [[nodiscard]] uint64_t slot_offset(uint32_t counter) const {
    return info_.payload_offset + uint64_t{counter & (info_.size - 1)} * info_.slot_size;
  }
  [[nodiscard]] Result<UniqueFd> export_fd() const { return alloc_.export_fd(); }

 private:
  DeviceRing(cuda::VmmAllocation alloc, daqiri_gpu_ring_info info)
      : alloc_(std::move(alloc)), info_(info) {}

  cuda::VmmAllocation alloc_;
  daqiri_gpu_ring_info info_{};
};

}  // namespace daqiri::gpu
