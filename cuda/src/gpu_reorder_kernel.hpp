// The placement kernel of daqiri::GpuReorder (gpu_reorder.cpp), behind a plain launch call:
// nvcc compiles this file, the host side keeps C++23.
#pragma once

#include <cuda_runtime_api.h>

#include "daqiri/gpu_reorder_options.hpp"
#include "daqiri/gpu_ring_view.hpp"

namespace daqiri::reorder {

// What each placement kernel needs, by value.
struct Params {
  ReorderOptions o;
  uint32_t out_bytes;  // per packet
  uint32_t words;      // 64-bit words of the received bitmap per frame
  uint64_t frame_bytes;
  uint64_t base;             // the oldest unreleased frame
  uint8_t* data;             // frames x frame_bytes
  unsigned long long* bits;  // frames x words
  unsigned int* received;    // per frame buffer
  unsigned int* duplicates;  // per frame buffer
  unsigned long long* globals;
};

// globals[]
enum : int { kMaxFramePlus1, kPlaced, kDuplicates, kLate, kAhead, kShort, kGlobals };

// One block per packet of ring counters [first, first + count), on `stream`.
cudaError_t launch_place(const GpuRingView& ring, uint32_t first, uint32_t count, const Params& p,
                         cudaStream_t stream);

}  // namespace daqiri::reorder
