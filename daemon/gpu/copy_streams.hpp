// The CUDA streams a GPU copy task alternates bursts between, and an event for each burst it
// may have in flight, on the task's GPU: made together, and synchronised and destroyed together
// with that GPU current.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>

#include "gpu/gpu_device.hpp"

namespace daqiri::gpu {

template <size_t Streams, size_t Events>
class CopyStreams {
 public:
  CopyStreams() = default;
  CopyStreams(const CopyStreams&) = delete;
  CopyStreams& operator=(const CopyStreams&) = delete;
  ~CopyStreams() {
    if (cudaSetDevice(device_) != cudaSuccess) return;
    synchronize();
    for (cudaStream_t s : streams_) {
      if (s != nullptr) cudaStreamDestroy(s);
    }
    for (cudaEvent_t e : events_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }

  // On `gpu`, which the caller made current.
  Result<> create(const GpuDevice& gpu) {
    device_ = gpu.ordinal();
    for (cudaStream_t& s : streams_) {
      if (cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess) {
        return std::unexpected(runtime_error(e, "cudaStreamCreate"));
      }
    }
    for (cudaEvent_t& ev : events_) {
      if (cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); e != cudaSuccess) {
        return std::unexpected(runtime_error(e, "cudaEventCreate"));
      }
    }
    return {};
  }
  [[nodiscard]] cudaStream_t stream(size_t i) const { return streams_[i % Streams]; }
  [[nodiscard]] cudaEvent_t event(size_t i) const { return events_[i]; }
  // Whether no stream still has copies to do (a failed one has none). Asks, never waits; the
  // GPU must be current.
  [[nodiscard]] bool idle() const {
    for (cudaStream_t s : streams_) {
      if (s != nullptr && cudaStreamQuery(s) == cudaErrorNotReady) return false;
    }
    return true;
  }
  // Waits for every copy enqueued (before memory they use is freed); the GPU must be current.
  void synchronize() const {
    for (cudaStream_t s : streams_) {
      if (s != nullptr) cudaStreamSynchronize(s);
    }
  }

 private:
  int device_ = 0;
  std::array<cudaStream_t, Streams> streams_{};
  std::array<cudaEvent_t, Events> events_{};
};

}  // namespace daqiri::gpu
