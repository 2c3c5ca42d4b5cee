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
#pragma once

#include <memory>

#include "daqiri/client.hpp"
#include "daqiri/gpu_ring_view.hpp"

namespace daqiri {

class MappedRxRing {
 public:
  // Registers the stream's rings mapping (read-write) and its regions (read-only) with CUDA for
  // the current device, and a word of GPU memory for the producer's copy.
  static Result<std::unique_ptr<MappedRxRing>> map(const RxStream& stream);
  ~MappedRxRing();
  MappedRxRing(const MappedRxRing&) = delete;
  MappedRxRing& operator=(const MappedRxRing&) = delete;

  [[nodiscard]] const MappedRxRingView& view() const;

  struct State;

 private:
  explicit MappedRxRing(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace daqiri
