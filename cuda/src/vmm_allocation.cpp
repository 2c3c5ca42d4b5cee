#include "daqiri/cuda/vmm_allocation.hpp"

#include <cstdint>

namespace daqiri::cuda {
namespace {

CUmemAllocationProp device_prop(CUdevice device, bool rdma = false) {
  CUmemAllocationProp prop{};
  prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

}  // namespace

Result<VmmAllocation> VmmAllocation::create(const DriverApi& api, CUdevice device, size_t bytes,
                                            bool rdma) {
  if (rdma) {
    int capable = 0;
    api.device_get_attribute(&capable, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                             device);
    if (capable == 0) {
      return fail(ErrorCode::kFailedPrecondition,
                  "GPU " + std::to_string(device) +
                      " does not support GPUDirect RDMA on CUDA VMM memory "
                      "(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED is 0)");
    }
  }
  CUmemAllocationProp prop = device_prop(device, rdma);
  size_t granularity = 0;
  if (CUresult r = api.mem_get_allocation_granularity(&granularity, &prop,
                                                      CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
      r != CUDA_SUCCESS) {
    return std::unexpected(driver_error(api, r, "cuMemGetAllocationGranularity"));
  }
  bytes = (bytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle = 0;
  if (CUresult r = api.mem_create(&handle, bytes, &prop, 0); r != CUDA_SUCCESS) {
    return std::unexpected(driver_error(
        api, r, "cuMemCreate of " + std::to_string(bytes) + " bytes",
        r == CUDA_ERROR_OUT_OF_MEMORY ? ErrorCode::kResourceExhausted : ErrorCode::kInternal));
  }
  return map(api, device, handle, bytes);
}

Result<VmmAllocation> VmmAllocation::import(const DriverApi& api, CUdevice device, int fd,
                                            size_t bytes) {
  CUmemGenericAllocationHandle handle = 0;
  // The POSIX fd handle type takes the fd itself, cast to a pointer (CUDA driver API docs).
  void* fd_handle =
      reinterpret_cast<void*>(static_cast<intptr_t>(fd));  // NOLINT(performance-no-int-to-ptr)
  if (CUresult r = api.mem_import_from_shareable_handle(&handle, fd_handle,
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      r != CUDA_SUCCESS) {
    return std::unexpected(driver_error(api, r, "cuMemImportFromShareableHandle"));
  }
  return map(api, device, handle, bytes);
}

Result<VmmAllocation> VmmAllocation::map(const DriverApi& api, CUdevice device,
                                         CUmemGenericAllocationHandle handle, size_t bytes) {
  VmmAllocation a;
  a.api_ = &api;
  a.handle_ = handle;  // released by reset() from here on, whatever fails next
  if (CUresult r = api.mem_address_reserve(&a.ptr_, bytes, 0, 0, 0); r != CUDA_SUCCESS) {
    a.ptr_ = 0;
    return std::unexpected(driver_error(api, r, "cuMemAddressReserve"));
  }
  a.size_ = bytes;
  if (CUresult r = api.mem_map(a.ptr_, bytes, 0, handle, 0); r != CUDA_SUCCESS) {
    api.mem_address_free(a.ptr_, bytes);
    a.ptr_ = 0;
    return std::unexpected(driver_error(api, r, "cuMemMap"));
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (CUresult r = api.mem_set_access(a.ptr_, bytes, &access, 1); r != CUDA_SUCCESS) {
    return std::unexpected(driver_error(api, r, "cuMemSetAccess"));
  }
  return a;
}

VmmAllocation& VmmAllocation::operator=(VmmAllocation&& other) noexcept {
  if (this != &other) {
    reset();
    api_ = other.api_;
    handle_ = other.handle_;
    ptr_ = other.ptr_;
    size_ = other.size_;
    other.api_ = nullptr;
    other.handle_ = 0;
    other.ptr_ = 0;
    other.size_ = 0;
  }
  return *this;
}

void VmmAllocation::reset() {
  if (api_ == nullptr) return;
  if (ptr_ != 0) {
    api_->mem_unmap(ptr_, size_);
    api_->mem_address_free(ptr_, size_);
  }
  if (handle_ != 0) api_->mem_release(handle_);
  api_ = nullptr;
  handle_ = 0;
  ptr_ = 0;
  size_ = 0;
}

Result<UniqueFd> VmmAllocation::export_fd() const {
  int fd = -1;
  if (CUresult r = api_->mem_export_to_shareable_handle(
          &fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      r != CUDA_SUCCESS) {
    return std::unexpected(driver_error(*api_, r, "cuMemExportToShareableHandle"));
  }
  return UniqueFd(fd);
}

Result<UniqueFd> VmmAllocation::export_dmabuf() const {
  int fd = -1;
  if (CUresult r = api_->mem_get_handle_for_address_range(&fd, ptr_, size_,
                                                          CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
      r != CUDA_SUCCESS) {
    return std::unexpected(driver_error(
        *api_, r,
        "cuMemGetHandleForAddressRange (dma-buf; needs the NVIDIA open kernel modules and a "
        "kernel with dma-buf)",
        ErrorCode::kFailedPrecondition));
  }
  return UniqueFd(fd);
}

}  // namespace daqiri::cuda
