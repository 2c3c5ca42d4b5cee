// Device-side helpers for a host RX ring mapped for the GPU (daqiri/mapped_rx_ring.hpp), named
// as those of a GPU ring (daqiri/gpu_ring.cuh), so that gpu_ring_consume and kernels written
// against those names take either kind of ring.
#pragma once

#include <cuda/atomic>

#include "daqiri/gpu_ring_view.hpp"

namespace daqiri {

// The producer index, with acquire ordering at system scope: the daemon's CPU stores it with
// release after writing the descriptors and the buffers. Only block 0 reads host memory for
// it (one load across PCIe a poll) and keeps a copy in GPU memory; the other blocks poll that
// copy at device scope, so a grid of many blocks waiting puts one reader on the bus, not one a
// block. The acquire chain (system, then device scope) orders their reads after the daemon's
// writes too.
__device__ inline uint32_t gpu_ring_producer(const MappedRxRingView& r) {
  if (blockIdx.x == 0 || r.mirror == nullptr) {
    cuda::atomic_ref<uint32_t, cuda::thread_scope_system> p(*const_cast<uint32_t*>(r.producer));
    uint32_t v = p.load(cuda::memory_order_acquire);
    if (r.mirror != nullptr) {
      cuda::atomic_ref<uint32_t, cuda::thread_scope_device> m(*r.mirror);
      m.store(v, cuda::memory_order_release);
    }
    return v;
  }
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> m(*r.mirror);
  return m.load(cuda::memory_order_acquire);
}

__device__ inline const daqiri_rx_desc& gpu_ring_desc(const MappedRxRingView& r, uint32_t counter) {
  return r.descs[counter & r.mask];
}

// The frame of a descriptor (a copy of gpu_ring_desc's: each read of the ring crosses PCIe),
// or nullptr when it does not point inside a region (the daemon writes descriptors, but a
// kernel must not read outside what is mapped).
__device__ inline const uint8_t* gpu_ring_frame(const MappedRxRingView& r,
                                                const daqiri_rx_desc& d) {
  if (d.region >= r.region_count || d.offset > r.region_bytes[d.region] ||
      d.length > r.region_bytes[d.region] - d.offset) {
    return nullptr;
  }
  return r.regions[d.region] + d.offset;
}

__device__ inline const uint8_t* gpu_ring_frame(const MappedRxRingView& r, uint32_t counter) {
  return gpu_ring_frame(r, daqiri_rx_desc(r.descs[counter & r.mask]));
}

// Where the UDP payload of counter's frame starts (0: not UDP, or no frame).
__device__ inline uint16_t gpu_ring_payload_offset(const MappedRxRingView& r, uint32_t counter) {
  const daqiri_rx_desc d = r.descs[counter & r.mask];
  const uint8_t* frame = gpu_ring_frame(r, d);
  return frame == nullptr ? 0 : daqiri_rx_payload_offset(&d, frame);
}

// Hands slots up to `counter` back to the daemon (after every read of them is done).
__device__ inline void gpu_ring_release(const MappedRxRingView& r, uint32_t counter) {
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> c(*r.consumer);
  c.store(counter, cuda::memory_order_release);
}

}  // namespace daqiri
