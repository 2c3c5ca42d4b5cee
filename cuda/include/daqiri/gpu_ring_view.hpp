// What a CUDA kernel needs to consume a daqiri ring: plain pointers, passed by value.
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

// A host RX ring read by a kernel where it is: descriptors, indices and buffers in the
// daemon's shared host memory, mapped for the GPU (daqiri/mapped_rx_ring.hpp). No GPU work on
// the daemon's side, so nothing of the daemon's waits for a client's kernels or the reverse;
// every read crosses PCIe. Device helpers in daqiri/mapped_rx_ring.cuh.
struct MappedRxRingView {
  const uint32_t* producer;     // the ring's producer index (host memory)
  uint32_t* consumer;           // the ring's consumer index (host memory)
  uint32_t* mirror;             // device memory: block 0's last look at `producer`, for the rest
  const daqiri_rx_desc* descs;  // `mask + 1` descriptors (host memory)
  uint32_t mask;                // slots - 1
  uint32_t region_count;
  const uint8_t* regions[DAQIRI_MAX_REGIONS];  // the buffers of each region (host memory)
  uint64_t region_bytes[DAQIRI_MAX_REGIONS];
};

// The batches a mapped host ring's relay (MappedRxRing::launch_relay) hands to a consumer that
// waits in a CUDA stream, all in device memory. `published` and `taken` count in two phases:
// stage k (from 0, the first stage ever) waits until *published == (k + 1) % 2
// (cuStreamWaitValue32, EQ), works on counters [batch[0], batch[1]), then sets *taken =
// (k + 1) % 2 (cuStreamWriteValue32). One batch is out at a time, so each holds every packet
// that arrived while the one before it was worked on, and the relay releases it to the daemon.
struct MappedRelayView {
  const uint32_t* published;  // the phase of the batch last published
  uint32_t* taken;            // the phase of the batch last finished by the consumer
  const uint32_t* batch;      // [begin, end) of the batch last published
};

// The phase stage k waits for in *published and then writes to *taken: (k + 1) % 2. The
// relay's step k waits for *taken == relay_phase(k - 1), the stage before done (k % 2).
constexpr uint32_t relay_phase(uint32_t k) {
  return (k + 1) & 1u;
}

// The state of a graph-loop consumer (gpu_ring_loop in daqiri/gpu_ring_consumer.cuh), in device
// memory: {first, last, max_bursts, first - 1, 0, 0} before the graph is launched.
struct GpuRingLoop {
  uint32_t next;        // the first counter the next run works on
  uint32_t last;        // the loop ends when next reaches it
  uint32_t max_bursts;  // whole bursts one run takes at most (at least 1)
  uint32_t decided;     // the `next` for which `bursts` was decided (block 0 to the others)
  uint32_t bursts;      // whole bursts this run works on (0: the host set *stop)
  uint32_t arrived;     // blocks done with this run
};

}  // namespace daqiri
