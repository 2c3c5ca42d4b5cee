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
// kernel, cuStreamWriteValue32) takes batches from a relay: launch_relay() runs relay steps on
// a stream of their own that turn the host producer index into batches in GPU memory
// (MappedRelayView), each step's batch announced by a stream write. The GPU's front end sees a
// stream wait released by another stream's write within microseconds; one on the mapped host
// index, or on a word a kernel stores, it polls far less often.
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
  // Launches `batches` relay steps (even) on `stream`, a stream of its own, as one CUDA graph
  // built on the first call (each later call takes the same count and launches it again). Step
  // k waits until *taken == k % 2 (the stage before is done), releases that stage's batch to
  // the daemon, waits for packets and publishes them as batch k (*published = (k + 1) % 2), so
  // a batch holds every packet that arrived while the one before was worked on. Launch as
  // many consumer stages as steps, in graphs of an even count. The first batch begins at the
  // ring's consumer index at the first call. Load kernels eagerly (CUDA_MODULE_LOADING=EAGER)
  // when a kernel of this process spins: a kernel loaded lazily beside it may wait for it.
  Result<> launch_relay(cudaStream_t stream, uint32_t batches);
  // Ends the relay: every step still to run publishes an empty batch at once (a spinning step
  // within microseconds), so every consumer stage launched runs, and this waits for the steps
  // launched to finish, 1 s at most (longer: more steps were launched than stages). The relay
  // then runs no more; the destructor calls this.
  Result<> stop_relay();

  struct State;

 private:
  explicit MappedRxRing(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace daqiri
