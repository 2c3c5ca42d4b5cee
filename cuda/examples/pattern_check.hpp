// A CUDA kernel that checks daqiri-gen's payload pattern (daqiri/test_pattern.hpp) on frames
// in a GPU ring and adds up what it saw: the examples' and GPU tests' proof of delivery.
#pragma once

#include <cuda_runtime_api.h>

#include "daqiri/gpu_ring_view.hpp"

namespace daqiri::example {

struct Totals {
  unsigned long long intact;
  unsigned long long corrupt;
  unsigned long long payload_bytes;
  unsigned long long byte_sum;
  unsigned long long sequence_sum;
};

// Kernel per burst: checks frames [first, first + count) of `ring` on `stream`, adding into
// `totals` (device-visible memory).
cudaError_t launch_check(const GpuRingView& ring, uint32_t first, uint32_t count, Totals* totals,
                         cudaStream_t stream);

// The kernel launch_check uses, for graph kernel nodes: parameters (GpuRingView ring,
// uint32_t first, Totals* totals), one block of kCheckThreads per packet.
const void* check_burst_function();
inline constexpr unsigned kCheckThreads = 128;

// A relay batch's kernel, for graph kernel nodes: parameters (MappedRxRingView ring,
// const uint32_t* batch, Totals* totals), any number of blocks of kCheckThreads; a warp per
// packet of [batch[0], batch[1]).
const void* check_batch_function();

// The graph-loop kernel, for daqiri::GpuGraphLoop: parameters (GpuRingView ring, GpuRingLoop*
// state, Totals* totals, const uint32_t* stop, cudaGraphConditionalHandle loop), one block of
// kCheckThreads per packet of a burst.
const void* check_loop_function();

// Persistent kernel: `blocks` blocks of `threads` (a multiple of 32) poll the doorbell and
// check packets [first, first + count), a warp per packet, releasing from the GPU
// (daqiri/gpu_ring_consumer.cuh); it returns when they are done or when the host sets *stop
// (mapped host memory). `done`: `blocks` words of device memory, each `first`. `Ring`: a
// GpuRingView, or a MappedRxRingView (a host ring mapped for the GPU, daqiri/mapped_rx_ring.hpp).
template <typename Ring>
cudaError_t launch_persistent(const Ring& ring, uint32_t first, uint32_t count, uint32_t blocks,
                              uint32_t threads, uint32_t* done, Totals* totals,
                              const uint32_t* stop, cudaStream_t stream);

}  // namespace daqiri::example
