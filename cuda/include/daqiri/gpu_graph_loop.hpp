// A CUDA graph that runs one kernel again and again on the GPU with no host step in between: a
// WHILE conditional node around a kernel node, launched once. The kernel decides whether it
// runs again by calling cudaGraphSetConditional(handle, 0 or 1); daqiri/gpu_ring_consumer.cuh's
// gpu_ring_loop does this for a ring consumer, the bursts that are there a run. This is the
// graph consumer style without a host round trip per burst (or per batch of stages).
//
//   cudaGraphConditionalHandle handle{};
//   void* args[] = {&view, &state, &stop, &handle};
//   auto loop = daqiri::GpuGraphLoop::create(kernel_fn, dim3(burst), dim3(128), args, &handle);
//   loop->launch(stream);   // returns at once; the stream completes when the kernel says 0
//
// Needs a driver with conditional graph nodes (CUDA 12.4 and later).
#pragma once

#include <cuda_runtime_api.h>

#include "daqiri/common/result.hpp"

namespace daqiri {

class GpuGraphLoop {
 public:
  // `args` are the kernel's parameters, as for cudaLaunchKernel; `handle` points at the one that
  // is the loop's condition (filled in here, before the node is made). The loop starts with
  // the condition 1: the kernel runs at least once.
  static Result<GpuGraphLoop> create(const void* kernel, dim3 grid, dim3 block, void** args,
                                     cudaGraphConditionalHandle* handle);
  GpuGraphLoop(GpuGraphLoop&& other) noexcept;
  GpuGraphLoop& operator=(GpuGraphLoop&&) = delete;
  GpuGraphLoop(const GpuGraphLoop&) = delete;
  GpuGraphLoop& operator=(const GpuGraphLoop&) = delete;
  ~GpuGraphLoop();

  Result<> launch(cudaStream_t stream) const;

 private:
  GpuGraphLoop() = default;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace daqiri
