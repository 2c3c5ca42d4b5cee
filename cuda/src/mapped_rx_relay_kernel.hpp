// The kernel behind MappedRxRing's relay: host producer index in, batches in GPU memory out.
#pragma once

#include <cuda_runtime_api.h>

#include "daqiri/gpu_ring_view.hpp"

namespace daqiri {

// The relay's words in GPU memory: MappedRelayView's, and `batch` as two words.
struct RelayWords {
  uint32_t published;
  uint32_t taken;
  uint32_t batch[2];
};

// One step of the relay, for a graph kernel node of one thread (parameters: const uint32_t*
// producer, uint32_t* consumer, RelayWords* words, const uint32_t* stop): releases the batch
// before (its stage is done), waits until the producer passes it (or *stop, host memory, is
// set) and makes what arrived the next batch.
const void* relay_step_function();

}  // namespace daqiri
