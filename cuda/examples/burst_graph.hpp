// The CUDA-graph consumer style: a graph of `stages` bursts of `burst` packets; per stage it
// waits for the doorbell to reach the burst's end (cuStreamWaitValue32, GEQ: a cyclic compare),
// checks the burst with the kernel-per-burst kernel, and stores the consumer index
// (cuStreamWriteValue32 to the host-mapped control block). No host thread touches a burst:
// the host re-posts the graph for the next stages x burst packets, updating the values in place.
// Over a mapped host ring the stages take the relay's batches instead (MappedRxRing::
// launch_relay): stage k waits for batch k's phase, checks the batch, and marks it taken; the
// relay releases. The phases repeat, so the graph is posted again unchanged.
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
  // Stages over a mapped host ring's relay (an even count), each checking its batch with
  // `blocks` blocks.
  static Result<BurstGraph> create(const cuda::DriverApi& api, const MappedRxRingView& ring,
                                   const MappedRelayView& relay, uint32_t blocks, uint32_t stages,
                                   Totals* totals);
  BurstGraph(BurstGraph&& other) noexcept;
  BurstGraph& operator=(BurstGraph&&) = delete;
  ~BurstGraph();

  // Launches the graph on `stream` for packets [first, first + burst * stages) of a GPU ring,
  // or for the relay's next `stages` batches (`first` unused).
  Result<> post(uint32_t first, cudaStream_t stream);
  // What one post covers: packets of a GPU ring, batches of a relay.
  [[nodiscard]] uint32_t per_post() const { return unit_ * stages_; }

 private:
  BurstGraph() = default;
  Result<> build();
  Result<> set_memop(CUgraphNode node, bool wait, CUdeviceptr address, uint32_t value);
  // Stage k's kernel for a post from `first`; `args` holds what its parameters point to.
  struct KernelArgs {
    GpuRingView ring;
    MappedRxRingView mapped;
    const uint32_t* batch;
    uint32_t start;
    Totals* totals;
    void* params[3];
  };
  cudaKernelNodeParams kernel(uint32_t first, uint32_t k, KernelArgs& args) const;

  const cuda::DriverApi* api_ = nullptr;
  CUcontext ctx_ = nullptr;
  bool relayed_ = false;
  GpuRingView ring_{};
  MappedRxRingView mapped_{};
  const uint32_t* batch_ = nullptr;
  CUdeviceptr wait_on_ = 0;   // the doorbell, or the relay's published count
  CUdeviceptr write_to_ = 0;  // the consumer index, or the relay's taken count
  Totals* totals_ = nullptr;
  uint32_t unit_ = 0;    // a stage's step: burst packets, or one batch
  uint32_t blocks_ = 0;  // of a stage's kernel
  uint32_t stages_ = 0;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<CUgraphNode> waits_, kernels_, writes_;
};

}  // namespace daqiri::example
