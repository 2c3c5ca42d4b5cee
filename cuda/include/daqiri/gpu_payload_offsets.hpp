// Payload offsets of frames the daemon never read. A frame that reached a GPU ring from GPU
// memory (a gpudirect pool, whole frames) is never read by the daemon's CPU, and the daemon runs
// no kernel on a client's GPU, so its descriptor carries DAQIRI_PAYLOAD_UNREAD. Kernels find the
// payload per packet with gpu_ring_payload_offset() (gpu_ring.cuh); host code that reads
// descriptors back first has this write the offsets into them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "daqiri/gpu_ring_view.hpp"

namespace daqiri {

// For the ring counters [first, first + count), not yet released: replaces
// DAQIRI_PAYLOAD_UNREAD in their descriptors with the offset found in their frames, on
// `stream` (a thread per descriptor). The ring is the client's to write until it releases them.
cudaError_t resolve_payload_offsets(const GpuRingView& ring, uint32_t first, uint32_t count,
                                    cudaStream_t stream);

}  // namespace daqiri
