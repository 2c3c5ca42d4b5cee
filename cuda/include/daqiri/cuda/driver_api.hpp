// The CUDA driver entry points daqiri uses, fetched through the runtime
// (cudaGetDriverEntryPointByVersion) so that nothing links libcuda.so.1: binaries start on
// machines without an NVIDIA driver and report "no GPU" instead of failing to load.
#pragma once

#include <cuda.h>

#include <string>

#include "daqiri/common/result.hpp"

namespace daqiri::cuda {

struct DriverApi {
  decltype(&::cuMemCreate) mem_create = nullptr;
  decltype(&::cuMemRelease) mem_release = nullptr;
  decltype(&::cuMemGetAllocationGranularity) mem_get_allocation_granularity = nullptr;
  decltype(&::cuMemAddressReserve) mem_address_reserve = nullptr;
  decltype(&::cuMemAddressFree) mem_address_free = nullptr;
  decltype(&::cuMemMap) mem_map = nullptr;
  decltype(&::cuMemUnmap) mem_unmap = nullptr;
  decltype(&::cuMemSetAccess) mem_set_access = nullptr;
  decltype(&::cuMemExportToShareableHandle) mem_export_to_shareable_handle = nullptr;
  decltype(&::cuMemImportFromShareableHandle) mem_import_from_shareable_handle = nullptr;
  decltype(&::cuMemHostRegister) mem_host_register = nullptr;
  decltype(&::cuMemHostUnregister) mem_host_unregister = nullptr;
  decltype(&::cuMemHostGetDevicePointer) mem_host_get_device_pointer = nullptr;
  decltype(&::cuMemGetHandleForAddressRange) mem_get_handle_for_address_range = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuIpcOpenMemHandle) ipc_open_mem_handle = nullptr;
  decltype(&::cuIpcCloseMemHandle) ipc_close_mem_handle = nullptr;
  decltype(&::cuStreamWriteValue32) stream_write_value32 = nullptr;
  decltype(&::cuStreamWaitValue32) stream_wait_value32 = nullptr;
  decltype(&::cuStreamBatchMemOp) stream_batch_mem_op = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGetUuid) device_get_uuid = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primary_ctx_release = nullptr;
  decltype(&::cuCtxPushCurrent) ctx_push_current = nullptr;
  decltype(&::cuCtxPopCurrent) ctx_pop_current = nullptr;
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  // Graphs of stream memory operations (the CUDA-graph consumer style).
  decltype(&::cuGraphAddBatchMemOpNode) graph_add_batch_mem_op_node = nullptr;
  decltype(&::cuGraphExecBatchMemOpNodeSetParams) graph_exec_batch_mem_op_node_set_params = nullptr;

  // The process-wide table, loaded once. kUnavailable naming the reason when there is no
  // usable driver (no NVIDIA driver installed, or too old for CUDA 12.x entry points).
  static Result<const DriverApi*> get();
};

// "what: CUDA_ERROR_x (text)" for a failed driver call.
std::string describe(const DriverApi& api, CUresult r, const std::string& what);

// An Error from a failed driver call (kInternal unless `code` says otherwise).
inline Error driver_error(const DriverApi& api, CUresult r, const std::string& what,
                          ErrorCode code = ErrorCode::kInternal) {
  return Error{code, describe(api, r, what), {}};
}

// A retained primary context of a device: it lives (with every mapping made in it) as long as
// this object does.
// The ordinal of the GPU whose UUID is `uuid` (16 bytes), as this process numbers devices: how
// a client finds the GPU holding memory the daemon shares.
Result<int> device_with_uuid(const DriverApi& api, const uint8_t* uuid);

class PrimaryContext {
 public:
  static Result<PrimaryContext> retain(const DriverApi& api, CUdevice device);
  PrimaryContext() = default;
  PrimaryContext(PrimaryContext&& other) noexcept;
  PrimaryContext& operator=(PrimaryContext&& other) noexcept;
  ~PrimaryContext();
  [[nodiscard]] CUcontext get() const { return ctx_; }
  [[nodiscard]] CUdevice device() const { return device_; }

 private:
  const DriverApi* api_ = nullptr;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
};

// Makes a context current for a scope and restores what was current before, so that the
// caller's CUDA state is never disturbed.
class ContextScope {
 public:
  static Result<ContextScope> enter(const DriverApi& api, CUcontext ctx);
  ContextScope(ContextScope&& other) noexcept : api_(other.api_) { other.api_ = nullptr; }
  ContextScope& operator=(ContextScope&&) = delete;
  ~ContextScope();

 private:
  explicit ContextScope(const DriverApi* api) : api_(api) {}
  const DriverApi* api_ = nullptr;
};

}  // namespace daqiri::cuda
