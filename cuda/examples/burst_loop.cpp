#include "burst_loop.hpp"

#include <string>

#include "daqiri/cuda/cuda_error.hpp"

namespace daqiri::example {
Result<BurstLoop> BurstLoop::create(const GpuRingView& ring, uint32_t burst, uint32_t first,
                                    uint32_t count, Totals* totals) {
  if (burst == 0 || count % burst != 0) {
    return std::unexpected(
        Error{ErrorCode::kInvalidArgument, "the packet count must be a multiple of the burst", {}});
  }
  void* state_memory = nullptr;
  if (cudaError_t e = cudaMalloc(&state_memory, sizeof(GpuRingLoop)); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaMalloc"));
  }
  std::unique_ptr<GpuRingLoop, FreeDevice> state(static_cast<GpuRingLoop*>(state_memory));
  const GpuRingLoop start{first, first + count, kMaxBurstsPerRun, first - 1, 0, 0};
  if (cudaError_t e = cudaMemcpy(state.get(), &start, sizeof start, cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaMemcpy"));
  }
  void* stop_memory = nullptr;
  if (cudaError_t e = cudaHostAlloc(&stop_memory, sizeof(uint32_t), cudaHostAllocMapped);
      e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaHostAlloc"));
  }
  std::unique_ptr<uint32_t, FreeHost> stop(static_cast<uint32_t*>(stop_memory));
  *stop = 0;
  uint32_t* stop_device = nullptr;
  if (cudaError_t e =
          cudaHostGetDevicePointer(reinterpret_cast<void**>(&stop_device), stop.get(), 0);
      e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaHostGetDevicePointer"));
  }
  GpuRingView view = ring;
  GpuRingLoop* state_device = state.get();
  cudaGraphConditionalHandle handle{};
  void* args[] = {&view, &state_device, &totals, &stop_device, &handle};
  auto loop =
      GpuGraphLoop::create(check_loop_function(), dim3(burst), dim3(kCheckThreads), args, &handle);
  if (!loop) return std::unexpected(loop.error());
  return BurstLoop(std::move(*loop), std::move(state), std::move(stop));
}

void BurstLoop::stop() {
  __atomic_store_n(stop_.get(), 1u, __ATOMIC_RELEASE);
}

}  // namespace daqiri::example
