#include <cuda/atomic>

#include "daqiri/gpu_ring_consumer.cuh"
#include "mapped_rx_relay_kernel.hpp"

// C linkage: the Python client loads this kernel by name from PTX generated from this file.
//
// The stream around a step waits for the stage before to be taken and, once the step returns,
// writes the published word itself: the GPU's front end sees a stream write at once, where it
// would see a kernel's store only on a later poll. Host memory is touched once a poll (the
// producer) and once a batch (the release).
extern "C" __global__ void daqiri_mapped_relay_step(const uint32_t* producer, uint32_t* consumer,
                                                    daqiri::RelayWords* w, const uint32_t* stop) {
  using namespace daqiri;
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> p(*const_cast<uint32_t*>(producer));
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> c(*consumer);
  const uint32_t end = w->batch[1];
  if (w->batch[0] != end) c.store(end, cuda::memory_order_release);
  uint32_t now = end;
  for (uint32_t spins = 1; now == end && !detail::stop_requested(stop, spins); ++spins)
    now = p.load(cuda::memory_order_acquire);
  w->batch[0] = end;
  w->batch[1] = now;
}

namespace daqiri {

const void* relay_step_function() {
  return reinterpret_cast<const void*>(&daqiri_mapped_relay_step);
}

}  // namespace daqiri
