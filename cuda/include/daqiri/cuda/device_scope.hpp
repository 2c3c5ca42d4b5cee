// Makes a CUDA device current for the runtime API for a scope and puts the caller's back:
// library code (and the daemon's control threads) must not leave a thread's device changed.
#pragma once

#include <cuda_runtime_api.h>

namespace daqiri::cuda {

class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    cudaGetDevice(&previous_);
    if (previous_ != device) cudaSetDevice(device);
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace daqiri::cuda
