// libdaqiri_gpu: receive a flow's packets straight into GPU memory.
//
//   auto client = daqiri::Client::connect();
//   daqiri::RxOptions o;  o.flow = "stream0";
//   auto ring = daqiri::GpuRxRing::attach(**client, o);
//   uint32_t seen = 0;
//   for (;;) {
//     auto p = (*ring)->wait(seen, std::chrono::milliseconds(100));   // host-side wait
//     if (!p) break;                                                  // detached
//     my_kernel<<<...>>>((*ring)->view(), seen, *p);                  // read frames [seen, p)
//     cudaStreamSynchronize(...);  (*ring)->release(*p);  seen = *p;
//   }
//
// Kernels may also poll the doorbell and release from the GPU (daqiri/gpu_ring.cuh). The ring
// is mapped for the GPU the daemon put it on, found by UUID; the caller's current device and
// context are left as they were. A GpuRxRing is used by one thread at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>

#include "daqiri/client.hpp"
#include "daqiri/gpu_ring_view.hpp"

namespace daqiri {

class GpuRxRing {
 public:
  static Result<std::unique_ptr<GpuRxRing>> attach(Client& client, const RxOptions& options);
  ~GpuRxRing();
  GpuRxRing(const GpuRxRing&) = delete;
  GpuRxRing& operator=(const GpuRxRing&) = delete;

  [[nodiscard]] GpuRingView view() const;
  [[nodiscard]] const daqiri_gpu_ring_info& info() const;
  // The CUDA device ordinal, in this process, of the GPU holding the ring.
  [[nodiscard]] int device() const;
  [[nodiscard]] uint64_t id() const;

  // Header-data split (a queue with a header region): the first header_size() bytes of each
  // frame are in host memory, header(counter), the rest in the GPU slot (DAQIRI_DESC_SPLIT;
  // the descriptor's length stays the frame's). 0 and an empty span without. A slot's header
  // is valid from the doorbell passing it until it is released.
  [[nodiscard]] uint32_t header_size() const;
  [[nodiscard]] std::span<const std::byte> header(uint32_t counter) const;
  // The producer index as of the last copy the daemon saw complete (host memory).
  [[nodiscard]] uint32_t producer() const;
  // Sleeps on the eventfd until producer() differs from `seen` and returns it; returns `seen`
  // itself when the timeout passes first, kUnavailable once the daemon detached the ring.
  Result<uint32_t> wait(uint32_t seen, std::chrono::milliseconds timeout);
  // Returns slots up to `counter` to the daemon (a host-side store of the consumer index).
  void release(uint32_t counter);
  // The daemon stopped serving the ring: it said so, or its session hung up (a poll(2) of the
  // session socket; wait() asks only when nothing arrived).
  [[nodiscard]] bool detached() const;
  // After the daemon restarted and Client::reconnect() succeeded: attaches a new GPU ring with
  // the same options in place of this one. view(), info() and the counters start over (the
  // consumer resumes from 0); the old ring's memory is released.
  Result<> reattach();

  struct State;

 private:
  explicit GpuRxRing(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace daqiri
