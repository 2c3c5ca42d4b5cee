// What a CUDA kernel needs to consume a daqiri GPU ring: plain pointers, passed by value.
// Host and device code alike include it; daqiri/gpu_ring.cuh adds the device-side helpers.
#pragma once

#include <stdint.h>

#include "daqiri/abi.h"

namespace daqiri {

struct GpuRingView {
  const uint8_t* base;          // the ring allocation, as mapped in this process
  const uint32_t* doorbell;     // the producer index (GPU memory, written by the daemon)
  const daqiri_rx_desc* descs;  // `mask + 1` descriptors; offsets count from `base`
  uint32_t* consumer;           // device address of the consumer index (host-mapped memory)
  uint32_t mask;                // slots - 1
  uint32_t slot_size;
};

}  // namespace daqiri
