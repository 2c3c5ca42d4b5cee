// The graph-loop consumer style: one CUDA graph launch consumes the whole stream. A WHILE node
// (daqiri::GpuGraphLoop) runs the check kernel again and again: each run waits on the GPU for
// at least one burst of `burst` packets, checks every whole burst that is there (up to
// kMaxBurstsPerRun) and releases them, with no host step in between (gpu_ring_loop in
// daqiri/gpu_ring_consumer.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "daqiri/common/result.hpp"
#include "daqiri/gpu_graph_loop.hpp"
#include "daqiri/gpu_ring_view.hpp"
#include "pattern_check.hpp"

namespace daqiri::example {

class BurstLoop {
 public:
  // Enough to pay the loop's relaunch (some microseconds) once per several hundred packets
  // under a flood; a light load still runs one burst at a time.
  static constexpr uint32_t kMaxBurstsPerRun = 16;

  // For packets [first, first + count); count must be a multiple of burst.
  static Result<BurstLoop> create(const GpuRingView& ring, uint32_t burst, uint32_t first,
                                  uint32_t count, Totals* totals);
  // Starts the loop on `stream`; the stream completes when the last burst is released.
  [[nodiscard]] Result<> launch(cudaStream_t stream) const { return loop_.launch(stream); }
  // Ends a running loop early (the kernel looks at this flag every few microseconds).
  void stop();

 private:
  struct FreeDevice {
    void operator()(void* p) const { cudaFree(p); }
  };
  struct FreeHost {
    void operator()(void* p) const { cudaFreeHost(p); }
  };
  BurstLoop(GpuGraphLoop loop, std::unique_ptr<GpuRingLoop, FreeDevice> state,
            std::unique_ptr<uint32_t, FreeHost> stop)
      : loop_(std::move(loop)), state_(std::move(state)), stop_(std::move(stop)) {}

  GpuGraphLoop loop_;
  std::unique_ptr<GpuRingLoop, FreeDevice> state_;
  std::unique_ptr<uint32_t, FreeHost> stop_;  // mapped host memory
};

}  // namespace daqiri::example
