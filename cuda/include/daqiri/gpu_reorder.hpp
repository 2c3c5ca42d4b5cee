// libdaqiri_gpu: packets carrying a sequence number, placed by a GPU kernel into contiguous
// frames of M packets each, whatever order they arrived in, with the gaps reported per frame
// and the samples optionally converted on the way (int8/int16 to fp16/fp32). DAQIRI's
// reorder_configs, as a consumer helper over a GPU ring:
//
//   daqiri::ReorderOptions o;  o.data_bytes = 1024;  o.packets_per_frame = 64;
//   o.convert = daqiri::ReorderOptions::Convert::kInt16ToFp32;
//   auto reorder = daqiri::GpuReorder::create(o, ring->device());
//   ... for each burst [seen, p) of the ring:
//   (*reorder)->place(ring->view(), seen, p - seen, stream);
//   cudaStreamSynchronize(stream);  ring->release(p);
//   for (const daqiri::Frame& f : (*reorder)->ready()) {   // final frames, oldest first
//     use(f.data, f.missing);  (*reorder)->release(f.index, stream);
//   }
//
// Frame f holds packets with sequence first_sequence + f * M .. + M - 1, packet k's samples at
// k * output bytes per packet. A frame is final when all M packets are in, or when a packet of
// frame f + lag_frames has arrived (reordering deeper than that is loss). Missing packets read
// as zeros. `frames` frame buffers are in flight: a packet of a frame at or beyond the oldest
// unreleased frame + frames is counted `ahead` and dropped; one of a released frame, `late`.
// A GpuReorder is used by one thread at a time; it keeps the caller's current device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "daqiri/common/result.hpp"
#include "daqiri/gpu_reorder_options.hpp"
#include "daqiri/gpu_ring_view.hpp"

namespace daqiri {

struct Frame {
  uint64_t index = 0;          // frame number, from first_sequence
  const void* data = nullptr;  // device memory: packets_per_frame x output bytes per packet
  uint32_t received = 0;
  uint32_t missing = 0;
  uint32_t duplicates = 0;
  const uint64_t* received_bits = nullptr;  // host copy, bit k: packet k arrived; valid until
                                            // the next ready()
};

struct ReorderCounters {
  uint64_t placed = 0;
  uint64_t duplicates = 0;
  uint64_t late = 0;    // a frame already released
  uint64_t ahead = 0;   // beyond the frames in flight
  uint64_t short_ = 0;  // too short to hold the sequence number and the samples
};

class GpuReorder {
 public:
  // Allocates the frame buffers on `device` (a CUDA ordinal of this process).
  static Result<std::unique_ptr<GpuReorder>> create(const ReorderOptions& options, int device);
  ~GpuReorder();
  GpuReorder(const GpuReorder&) = delete;
  GpuReorder& operator=(const GpuReorder&) = delete;

  // Enqueues the placement of ring packets [first, first + count) on `stream` (a kernel).
  cudaError_t place(const GpuRingView& ring, uint32_t first, uint32_t count, cudaStream_t stream);
  // Once `stream`'s placements are done: the frames that became final, oldest first, in order
  // (a frame is never skipped). They stay valid until released.
  Result<std::vector<Frame>> ready();
  // End of stream: every frame holding a packet, final or not (gaps and all).
  Result<std::vector<Frame>> flush();
  // Hands the oldest unreleased frame back (zeroed on `stream` for its next use).
  Result<> release(uint64_t index, cudaStream_t stream);
  [[nodiscard]] uint64_t output_bytes_per_packet() const;
  [[nodiscard]] uint64_t frame_bytes() const;
  Result<ReorderCounters> counters();

  struct State;

 private:
  explicit GpuReorder(std::unique_ptr<State> s);
  Result<std::vector<Frame>> collect(bool all);
  std::unique_ptr<State> s_;
};

}  // namespace daqiri
