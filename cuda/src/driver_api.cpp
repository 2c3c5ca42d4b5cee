#include "daqiri/cuda/driver_api.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>

namespace daqiri::cuda {
namespace {

// The ABI of every entry point we use as of CUDA 12.0 (the typedefs in cuda.h of CUDA 13
// name the same versions: cuStreamWriteValue32_v2, cuDeviceGetUuid_v2).
constexpr unsigned kEntryPointVersion = 12000;

template <typename Fn>
Result<> load(const char* symbol, Fn& out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  cudaError_t err =
      cudaGetDriverEntryPointByVersion(symbol, &fn, kEntryPointVersion, cudaEnableDefault, &status);
  if (err != cudaSuccess) {
    return fail(ErrorCode::kUnavailable,
                std::string("no usable CUDA driver: ") + cudaGetErrorString(err));
  }
  if (status != cudaDriverEntryPointSuccess || fn == nullptr) {
    return fail(ErrorCode::kUnavailable,
                std::string("the CUDA driver lacks ") + symbol + " (driver too old for CUDA 12)");
  }
  out = reinterpret_cast<Fn>(fn);
  return {};
}

Result<DriverApi> load_all() {
  DriverApi a;
  Result<> ok;
  auto step = [&](const char* symbol, auto& fn) {
    if (ok) ok = load(symbol, fn);
  };
  step("cuMemCreate", a.mem_create);
  step("cuMemRelease", a.mem_release);
  step("cuMemGetAllocationGranularity", a.mem_get_allocation_granularity);
  step("cuMemAddressReserve", a.mem_address_reserve);
  step("cuMemAddressFree", a.mem_address_free);
  step("cuMemMap", a.mem_map);
  step("cuMemUnmap", a.mem_unmap);
  step("cuMemSetAccess", a.mem_set_access);
  step("cuMemExportToShareableHandle", a.mem_export_to_shareable_handle);
  step("cuMemImportFromShareableHandle", a.mem_import_from_shareable_handle);
  step("cuMemHostRegister", a.mem_host_register);
  step("cuMemHostUnregister", a.mem_host_unregister);
  step("cuMemHostGetDevicePointer", a.mem_host_get_device_pointer);
  step("cuMemGetHandleForAddressRange", a.mem_get_handle_for_address_range);
  step("cuDeviceGetAttribute", a.device_get_attribute);
  step("cuIpcOpenMemHandle", a.ipc_open_mem_handle);
  step("cuIpcCloseMemHandle", a.ipc_close_mem_handle);
  step("cuStreamWriteValue32", a.stream_write_value32);
  step("cuStreamWaitValue32", a.stream_wait_value32);
  step("cuStreamBatchMemOp", a.stream_batch_mem_op);
  step("cuDeviceGet", a.device_get);
  step("cuDeviceGetCount", a.device_get_count);
  step("cuDeviceGetUuid", a.device_get_uuid);
  step("cuDevicePrimaryCtxRetain", a.primary_ctx_retain);
  step("cuDevicePrimaryCtxRelease", a.primary_ctx_release);
  step("cuCtxPushCurrent", a.ctx_push_current);
  step("cuCtxPopCurrent", a.ctx_pop_current);
  step("cuCtxGetCurrent", a.ctx_get_current);
  step("cuGetErrorString", a.get_error_string);
  step("cuGraphAddBatchMemOpNode", a.graph_add_batch_mem_op_node);
  step("cuGraphExecBatchMemOpNodeSetParams", a.graph_exec_batch_mem_op_node_set_params);
  if (!ok) return std::unexpected(ok.error());
  return a;
}

}  // namespace

Result<const DriverApi*> DriverApi::get() {
  static std::once_flag once;
  static Result<DriverApi> api = fail(ErrorCode::kUnavailable, "not loaded");
  std::call_once(once, [] { api = load_all(); });
  if (!api) return std::unexpected(api.error());
  return &*api;
}

std::string describe(const DriverApi& api, CUresult r, const std::string& what) {
  const char* text = nullptr;
  if (api.get_error_string == nullptr || api.get_error_string(r, &text) != CUDA_SUCCESS) {
    text = "unknown error";
  }
  return what + ": CUDA error " + std::to_string(static_cast<int>(r)) + " (" + text + ")";
}

Result<PrimaryContext> PrimaryContext::retain(const DriverApi& api, CUdevice device) {
  PrimaryContext p;
  if (CUresult r = api.primary_ctx_retain(&p.ctx_, device); r != CUDA_SUCCESS) {
    return std::unexpected(driver_error(api, r, "cuDevicePrimaryCtxRetain"));
  }
  p.api_ = &api;
  p.device_ = device;
  return p;
}

PrimaryContext::PrimaryContext(PrimaryContext&& other) noexcept
    : api_(other.api_), device_(other.device_), ctx_(other.ctx_) {
  other.api_ = nullptr;
}

PrimaryContext& PrimaryContext::operator=(PrimaryContext&& other) noexcept {
  if (this != &other) {
    if (api_ != nullptr) api_->primary_ctx_release(device_);
    api_ = other.api_;
    device_ = other.device_;
    ctx_ = other.ctx_;
    other.api_ = nullptr;
  }
  return *this;
}

PrimaryContext::~PrimaryContext() {
  if (api_ != nullptr) api_->primary_ctx_release(device_);
}

Result<ContextScope> ContextScope::enter(const DriverApi& api, CUcontext ctx) {
  if (CUresult r = api.ctx_push_current(ctx); r != CUDA_SUCCESS) {
    return std::unexpected(driver_error(api, r, "cuCtxPushCurrent"));
  }
  return ContextScope(&api);
}

ContextScope::~ContextScope() {
  if (api_ == nullptr) return;
  CUcontext popped = nullptr;
  api_->ctx_pop_current(&popped);
}

Result<int> device_with_uuid(const DriverApi& api, const uint8_t* uuid) {
  int count = 0;
  if (CUresult r = api.device_get_count(&count); r != CUDA_SUCCESS) {
    return std::unexpected(driver_error(api, r, "cuDeviceGetCount", ErrorCode::kUnavailable));
  }
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    CUuuid u{};
    if (api.device_get(&dev, i) == CUDA_SUCCESS && api.device_get_uuid(&u, dev) == CUDA_SUCCESS &&
        std::memcmp(u.bytes, uuid, sizeof u.bytes) == 0) {
      return i;
    }
  }
  return fail(ErrorCode::kFailedPrecondition,
              "the daemon's GPU is not visible to this process (CUDA_VISIBLE_DEVICES?)");
}

}  // namespace daqiri::cuda
