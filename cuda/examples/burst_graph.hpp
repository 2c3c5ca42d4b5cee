// The CUDA-graph consumer style: a graph of `stages` bursts of `burst` packets; per stage it
// waits for the doorbell to reach the burst's end (cuStreamWaitValue32, GEQ: a cyclic compare),
// checks the burst with the kernel-per-burst kernel, and stores the consumer index
// (cuStreamWriteValue32 to the host-mapped control block). No host thread touches a burst:
// the host re-posts the graph for the next stages x burst packets, updating the values in place.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <vector>

#include "daqiri/common/result.hpp"
#include "daqiri/cuda/driver_api.hpp"
#include "daqiri/gpu_ring_view.hpp"
#include "pattern_check.hpp"

namespace daqiri::example {

class BurstGraph {
 public:
  // Builds and instantiates the graph in the current context for packets from `first` on.
  static Result<BurstGraph> create(const cuda::DriverApi& api, const GpuRingView& ring,
                                   uint32_t burst, uint32_t stages, Totals* totals);
  BurstGraph(BurstGraph&& other) noexcept;
  BurstGraph& operator=(BurstGraph&&) = delete;
  ~BurstGraph();

  // Launches the graph on `stream` for packets [first, first + burst * stages).
  Result<> post(uint32_t first, cudaStream_t stream);
  [[nodiscard]] uint32_t packets_per_post() const { return burst_ * stages_; }

 private:
  BurstGraph() = default;
  Result<> set_memop(CUgraphNode node, bool wait, CUdeviceptr address, uint32_t value);

  const cuda::DriverApi* api_ = nullptr;
  CUcontext ctx_ = nullptr;
  GpuRingView ring_{};
  Totals* totals_ = nullptr;
  uint32_t burst_ = 0;
  uint32_t stages_ = 0;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<CUgraphNode> waits_, kernels_, writes_;
};

}  // namespace daqiri::example
