// How a burst of frames reaches consecutive GPU ring slots with copy-engine copies alone. The
// daemon runs no kernel on a client's GPU: without MPS the GPU time-slices kernels of different
// processes, so a kernel of ours would wait for a client's running kernel (and hold it up),
// while copies and stream memory operations run beside it (tools/bench/gpu-contention).
//
// Frames in equally spaced buffers bound for consecutive slots go as one copy straight from the
// pool (contiguous when the rows nearly fill equal pitches, pitched otherwise); the other frames
// in host memory are packed on the CPU into a staging area first, a pitched copy per stretch of
// consecutive slots; frames in GPU memory that are in no run go one copy each. Pure logic: the
// engine (gpu_rx_task.cpp) carries the plan out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace daqiri::gpu {

// What the GPU slot of one frame of a burst gets.
struct FrameSource {
  uint64_t src = 0;                 // GPU-visible address of the bytes (0: nothing to copy)
  const std::byte* host = nullptr;  // the same bytes for the CPU; nullptr: in GPU memory
  uint64_t room = 0;                // readable bytes from src to the end of its pool
  uint32_t bytes = 0;               // bytes to copy, at most a slot
};

// One copy: `rows` frames from burst index `first` into consecutive slots from that frame's
// slot on (never across the ring's end), `width` bytes each.
struct CopyOp {
  uint32_t first = 0;
  uint32_t rows = 0;
  uint64_t width = 0;
  uint64_t spitch = 0;  // source bytes from one row to the next
  // Direct: the first row's source address. Staged: where the rows go in the staging area
  // (spitch apart), from which the copy then reads.
  uint64_t src = 0;
  bool staged = false;
  // One contiguous copy of (rows - 1) * spitch + width bytes: spitch is the slot size and the
  // gaps (slot tails beyond every row's width) are small.
  bool contiguous = false;
};

struct RingGeometry {
  uint32_t first_counter = 0;  // ring counter of burst index 0
  uint32_t size = 0;           // slots, a power of two
  uint32_t slot_size = 0;
};

struct CopyPlan {
  uint32_t frames = 0;  // how many of the burst it places (staging can run out first)
  uint32_t ops = 0;
  uint64_t staged_bytes = 0;
};

// Direct copies of frames in host memory need this many rows this wide to beat packing them on
// the CPU (the copy engines take narrow rows slowly; the CPU copies them from cache).
inline constexpr uint32_t kMinDirectRows = 2;
inline constexpr uint32_t kMinDirectWidth = 512;

// The driver does a host-to-device cudaMemcpyAsync of less than 32 KiB, a pitched copy of one
// row and any device-to-device copy without the copy engines, on the GPU's time-sliced compute
// side, where it waits out a client's running kernel (2.4 ms on the H200; measured by
// tools/bench/gpu-contention). Host-to-device pitched copies of two rows or more, and 1-D ones
// from 32 KiB up, go to the copy engines and run beside it.
inline constexpr uint64_t kMinCopyEngineBytes = uint64_t{32} * 1024;

// How `bytes` contiguous bytes go on the copy engines: one 1-D copy (rows 1) when large enough,
// otherwise two rows of half of them `width` apart (rounded up: for an odd count the copy
// takes one byte more at each end, which its callers have room for).
struct ContiguousShape {
  uint64_t width = 0;
  uint32_t rows = 1;
};
ContiguousShape contiguous_shape(uint64_t bytes);

// Plans `frames` into `ops` (room for frames.size() entries) and a staging area of
// `staging_bytes`. The plan stops early only where the next frame to stage does not fit.
CopyPlan plan_copies(std::span<const FrameSource> frames, const RingGeometry& ring,
                     uint64_t staging_bytes, std::span<CopyOp> ops);

}  // namespace daqiri::gpu
