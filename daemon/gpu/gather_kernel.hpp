// The staged copy engine's kernel: a burst of frames, read from pinned host memory through
// its device mapping, written into GPU ring slots together with their descriptors.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "daqiri/abi.h"

namespace daqiri::gpu {

// One frame to place: `bytes` bytes from device address `src` (mapped host memory, or a pool in
// GPU memory) to ring offset `desc.offset`; `desc` lands in descriptor slot `slot`. (`bytes`
// is desc.length, less the header bytes of a split frame.)
struct GatherJob {
  uint64_t src;
  uint32_t slot;
  uint32_t bytes;
  daqiri_rx_desc desc;
};
static_assert(sizeof(GatherJob) == 48);

// For frames the daemon never read (core::kPayloadOffsetUnread: in a gpudirect pool, or taken
// by a flow alone on its queue that takes every frame) and copied whole into the ring, finds
// the UDP payload in the ring slots [first, first + count) (mod mask + 1) already written, and
// sets their descriptors' payload_offset.
cudaError_t launch_find_payloads(const uint8_t* ring_base, daqiri_rx_desc* descs, uint32_t first,
                                 uint32_t count, uint32_t mask, cudaStream_t stream);

// Enqueues the copy of `count` jobs (read from `jobs`, device-visible) on `stream`.
cudaError_t launch_gather(const GatherJob* jobs, uint32_t count, uint8_t* ring_base,
                          daqiri_rx_desc* descs, cudaStream_t stream);

}  // namespace daqiri::gpu
