// A host RX stream read by a CUDA kernel where it is: the ring, its indices and the buffers stay
// in the daemon's shared host memory, registered with CUDA in this process and read by the GPU
// across PCIe. The daemon does no GPU work for such a stream, so a client's persistent kernel
// and the daemon never wait on each other's time slices, and a packet is on the GPU's side as
// soon as the daemon publishes it (no copy, no stream operation).
//
//   auto stream = client->attach_rx(options);                  // a host ring (host, huge or
//   auto mapped = daqiri::MappedRxRing::map(**stream);         // pinned region), full descriptors
//   consume<<<blocks, threads>>>((*mapped)->view(), ...);      // daqiri/mapped_rx_ring.cuh and
//                                                               // gpu_ring_consume take the view
// The kernel releases from the GPU (gpu_ring_release); the stream's own next_burst/release must
// not be used beside it. Destroy the MappedRxRing before the stream is detached.
//
// A consumer that waits in a CUDA stream instead (graph stages of cuStreamWaitValue32, a
// kernel, cuStreamWriteValue32) takes batches from a relay: start_relay() runs one GPU thread
// that turns the host producer index into batches in GPU memory (MappedRelayView). The GPU's
// front end sees a stream wait on GPU memory within microseconds; one on the mapped host index
// it polls far less often.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "daqiri/client.hpp"
#include "daqiri/gpu_ring_view.hpp"

namespace daqiri {

class MappedRxRing {
 public:
  // Registers the stream's rings mapping (read-write) and its regions (read-only) with CUDA for
  // the current device, and allocates a word of GPU memory for the producer's copy and the
  // relay's words.
  static Result<std::unique_ptr<MappedRxRing>> map(const RxStream& stream);
  ~MappedRxRing();
  MappedRxRing(const MappedRxRing&) = delete;
  MappedRxRing& operator=(const MappedRxRing&) = delete;

  [[nodiscard]] const MappedRxRingView& view() const;

  // The relay's words (GPU memory), for the consumer's stages; valid while this object lives.
  [[nodiscard]] MappedRelayView relay_view() const;
  // Starts the relay on `stream`, a stream of its own (a one-thread kernel that runs until
  // stop_relay): batches begin at the ring's consumer index, and the relay releases each batch
  // once *taken passes it. Build, instantiate and launch the consumer's graphs before: a graph
  // set up while a kernel spins may wait for it, as may a kernel loaded lazily
  // (CUDA_MODULE_LOADING=EAGER). A ring's relay runs once.
  Result<> start_relay(cudaStream_t stream);
  // Ends the relay: it releases the batch out once its stage has finished (waiting 1 ms at
  // most), then lets every stage still waiting run on an empty batch, and this waits for the
  // relay's kernel to return. The destructor calls it.
  Result<> stop_relay();

  struct State;

 private:
  explicit MappedRxRing(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace daqiri
