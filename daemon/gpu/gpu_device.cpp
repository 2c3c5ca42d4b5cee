#include "gpu/gpu_device.hpp"

#include <cuda_runtime_api.h>

#include <cstring>

namespace daqiri::gpu {

Error runtime_error(int err, const std::string& what) {
  auto e = static_cast<cudaError_t>(err);
  return Error{ErrorCode::kInternal,
               what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")",
               {}};
}

Result<std::unique_ptr<GpuDevice>> GpuDevice::open(int ordinal) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    return fail(ErrorCode::kFailedPrecondition,
                std::string("no GPU: cudaGetDeviceCount says ") + cudaGetErrorString(e));
  }
  if (ordinal < 0 || ordinal >= count) {
    return fail(ErrorCode::kFailedPrecondition, "GPU " + std::to_string(ordinal) +
                                                    " does not exist (this host has " +
                                                    std::to_string(count) + ")");
  }
  auto api = cuda::DriverApi::get();
  if (!api) return std::unexpected(api.error());
  CUdevice dev = 0;
  if (CUresult r = (*api)->device_get(&dev, ordinal); r != CUDA_SUCCESS) {
    return std::unexpected(cuda::driver_error(**api, r, "cuDeviceGet"));
  }
  auto ctx = cuda::PrimaryContext::retain(**api, dev);
  if (!ctx) return std::unexpected(ctx.error());
  CUuuid u{};
  if (CUresult r = (*api)->device_get_uuid(&u, dev); r != CUDA_SUCCESS) {
    return std::unexpected(cuda::driver_error(**api, r, "cuDeviceGetUuid"));
  }
  std::array<uint8_t, 16> uuid{};
  std::memcpy(uuid.data(), u.bytes, uuid.size());
  return std::unique_ptr<GpuDevice>(new GpuDevice(*api, ordinal, std::move(*ctx), uuid));
}

Result<> GpuDevice::make_current() const {
  if (cudaError_t e = cudaSetDevice(ordinal_); e != cudaSuccess) {
    return std::unexpected(runtime_error(e, "cudaSetDevice"));
  }
  return {};
}

namespace {
// The GPU each poller thread last made current: a runtime call per poll would be waste.
thread_local int tl_current_gpu = -1;
}  // namespace

bool GpuDevice::make_current_on_poller() const {
  if (tl_current_gpu == ordinal_) return true;
  if (cudaSetDevice(ordinal_) != cudaSuccess) return false;
  tl_current_gpu = ordinal_;
  return true;
}

}  // namespace daqiri::gpu
