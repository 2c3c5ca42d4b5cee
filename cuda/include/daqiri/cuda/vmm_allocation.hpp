// One CUDA virtual-memory allocation on a device, mapped read-write for that device: created
// exportable as a POSIX fd (the daemon's GPU rings), or imported from such an fd (a client's
// view of one). The physical memory is freed when every process holding it lets go.
// Callers make a context current around create/import (ContextScope).
#pragma once

#include <cuda.h>

#include <cstddef>

#include "daqiri/common/result.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "daqiri/cuda/driver_api.hpp"

namespace daqiri::cuda {

class VmmAllocation {
 public:
  // `bytes` rounded up to the device's allocation granularity. `rdma`: memory a NIC may DMA
  // into (GPUDirect RDMA capable; fails on devices without it).
  static Result<VmmAllocation> create(const DriverApi& api, CUdevice device, size_t bytes,
                                      bool rdma = false);
  // Maps `bytes` of an allocation another process exported (the fd is not consumed).
  static Result<VmmAllocation> import(const DriverApi& api, CUdevice device, int fd, size_t bytes);

  VmmAllocation() = default;
  VmmAllocation(VmmAllocation&& other) noexcept { *this = std::move(other); }
  VmmAllocation& operator=(VmmAllocation&& other) noexcept;
  VmmAllocation(const VmmAllocation&) = delete;
  VmmAllocation& operator=(const VmmAllocation&) = delete;
  ~VmmAllocation() { reset(); }

  [[nodiscard]] CUdeviceptr ptr() const { return ptr_; }
  [[nodiscard]] size_t size() const { return size_; }
  // A new POSIX fd for the allocation, to pass to another process.
  [[nodiscard]] Result<UniqueFd> export_fd() const;
  // A dma-buf fd for the whole mapping, for a NIC to register (ibv_reg_dmabuf_mr): needs a
  // driver and kernel with dma-buf support (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED).
  [[nodiscard]] Result<UniqueFd> export_dmabuf() const;

 private:
  static Result<VmmAllocation> map(const DriverApi& api, CUdevice device,
                                   CUmemGenericAllocationHandle handle, size_t bytes);
  void reset();

  const DriverApi* api_ = nullptr;
  CUmemGenericAllocationHandle handle_ = 0;
  CUdeviceptr ptr_ = 0;
  size_t size_ = 0;
};

}  // namespace daqiri::cuda
