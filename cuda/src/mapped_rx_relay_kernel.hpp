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

// One thread on `stream` that publishes batches from `ring` into `words`, the first from
// counter `from`, until *stop (mapped host memory) is set; MappedRxRing::start_relay says what
// it does.
cudaError_t launch_relay(const MappedRxRingView& ring, RelayWords* words, uint32_t from,
                         const uint32_t* stop, cudaStream_t stream);

}  // namespace daqiri
