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

// Checks frames [first, first + count) of `ring` on `stream`, adding into `totals`
// (device-visible memory).
cudaError_t launch_check(const GpuRingView& ring, uint32_t first, uint32_t count, Totals* totals,
                         cudaStream_t stream);

}  // namespace daqiri::example
