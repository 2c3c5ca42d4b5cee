#include "gpu/host_registration.hpp"

#include <cuda_runtime_api.h>

#include "gpu/gpu_device.hpp"

namespace daqiri::gpu {

Result<HostRegistration> HostRegistration::create(void* data, size_t bytes) {
  // Portable: every GPU (every context) may read it; mapped: kernels address it directly.
  if (cudaError_t e =
          cudaHostRegister(data, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
      e != cudaSuccess) {
    return std::unexpected(runtime_error(
        e, "cudaHostRegister of " + std::to_string(bytes) + " bytes of host memory for the GPU"));
  }
  void* device = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(&device, data, 0); e != cudaSuccess) {
    cudaHostUnregister(data);
    return std::unexpected(runtime_error(e, "cudaHostGetDevicePointer"));
  }
  return HostRegistration(data, reinterpret_cast<uint64_t>(device));
}

HostRegistration::~HostRegistration() {
  if (data_ != nullptr) cudaHostUnregister(data_);
}

}  // namespace daqiri::gpu
