// Device-side helpers for a daqiri GPU ring (include from .cu files). Counters are free-running
// uint32 like every daqiri ring: the slot of counter c is c & mask.
//
//   uint32_t p = daqiri::gpu_ring_wait(ring, seen, stop);   // spin for a new doorbell
//   for (uint32_t c = seen; c != p; ++c) use(daqiri::gpu_ring_frame(ring, c), ...length);
//   daqiri::gpu_ring_release(ring, p);                      // slots go back to the daemon
#pragma once

#include <cuda/atomic>

#include "daqiri/gpu_ring_view.hpp"

namespace daqiri {

// The doorbell, with acquire ordering: data written before it is visible. Device scope is
// enough (the doorbell and the slots are GPU memory, and the daemon's write of the doorbell
// follows its copies behind a system-wide barrier), and keeps a spinning poller off PCIe.
__device__ inline uint32_t gpu_ring_producer(const GpuRingView& r) {
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> d(*const_cast<uint32_t*>(r.doorbell));
  return d.load(cuda::memory_order_acquire);
}

__device__ inline const daqiri_rx_desc& gpu_ring_desc(const GpuRingView& r, uint32_t counter) {
  return r.descs[counter & r.mask];
}

__device__ inline const uint8_t* gpu_ring_frame(const GpuRingView& r, uint32_t counter) {
  return r.base + r.descs[counter & r.mask].offset;
}

// The frame of a descriptor already read (a copy of gpu_ring_desc's).
__device__ inline const uint8_t* gpu_ring_frame(const GpuRingView& r, const daqiri_rx_desc& d) {
  return r.base + d.offset;
}

// Where the UDP payload of counter's frame starts (0: not UDP). The descriptor says, except for
// a frame the daemon never read (DAQIRI_PAYLOAD_UNREAD: it came from GPU memory): then it is
// found in the frame here.
__device__ inline uint16_t gpu_ring_payload_offset(const GpuRingView& r, uint32_t counter) {
  const daqiri_rx_desc& d = r.descs[counter & r.mask];
  return daqiri_rx_payload_offset(&d, r.base + d.offset);
}

// Spins until the doorbell moves past `seen` or `*stop` becomes non-zero (then returns
// `seen`). For one thread of a persistent kernel; the others wait at a barrier.
__device__ inline uint32_t gpu_ring_wait(const GpuRingView& r, uint32_t seen,
                                         const volatile uint32_t* stop) {
  for (;;) {
    uint32_t p = gpu_ring_producer(r);
    if (p != seen) return p;
    if (stop != nullptr && *stop != 0) return seen;
    __nanosleep(100);
  }
}

// Hands slots up to `counter` back to the daemon (after every read of them is done).
__device__ inline void gpu_ring_release(const GpuRingView& r, uint32_t counter) {
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> c(*r.consumer);
  c.store(counter, cuda::memory_order_release);
}

}  // namespace daqiri
