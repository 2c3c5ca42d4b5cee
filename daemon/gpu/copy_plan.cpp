#include "gpu/copy_plan.hpp"

#include <algorithm>

namespace daqiri::gpu {
namespace {

struct Run {
  uint32_t end = 0;  // one past its last frame
  uint64_t width = 0;
  uint64_t spitch = 0;  // 0 for a single frame
};

// Whether frame k's slot comes right after frame k - 1's (it does unless the ring wrapped).
bool slot_follows(const RingGeometry& ring, uint32_t k) {
  return ((ring.first_counter + k) & (ring.size - 1)) != 0;
}

// The longest run from frame k: buffers equally spaced and in the same kind of memory, slots
// consecutive, rows as wide as the widest frame, each readable and within its spacing.
Run run_at(std::span<const FrameSource> f, uint32_t k, const RingGeometry& ring) {
  Run r{k + 1, f[k].bytes, 0};
  auto n = static_cast<uint32_t>(f.size());
  if (k + 1 >= n || f[k + 1].src <= f[k].src) return r;
  uint64_t spitch = f[k + 1].src - f[k].src;
  uint64_t room = f[k].room;
  for (uint32_t e = k + 1; e < n; ++e) {
    const FrameSource& prev = f[e - 1];
    const FrameSource& next = f[e];
    uint64_t w = std::max<uint64_t>(r.width, next.bytes);
    uint64_t rm = std::min(room, next.room);
    if (next.bytes == 0 || !slot_follows(ring, e) || next.src < prev.src ||
        next.src - prev.src != spitch || (next.host == nullptr) != (prev.host == nullptr) ||
        w > spitch || w > rm) {
      break;
    }
    r.width = w;
    r.spitch = spitch;
    r.end = e + 1;
    room = rm;
  }
  return r;
}

bool worth_a_direct_copy(const Run& r, uint32_t k, bool in_gpu_memory) {
  return in_gpu_memory || (r.end - k >= kMinDirectRows && r.width >= kMinDirectWidth);
}

// Rows that nearly fill a slot are staged a slot apart, so that one contiguous copy takes them.
uint64_t staged_pitch(uint64_t width, uint32_t slot_size) {
  return (slot_size - width) * 8 <= slot_size ? slot_size : (width + 15) / 16 * 16;
}

}  // namespace

ContiguousShape contiguous_shape(uint64_t bytes) {
  if (bytes >= kMinCopyEngineBytes) return {bytes, 1};
  return {(bytes + 1) / 2, 2};
}

CopyPlan plan_copies(std::span<const FrameSource> f, const RingGeometry& ring,
                     uint64_t staging_bytes, std::span<CopyOp> ops) {
  CopyPlan plan;
  auto n = static_cast<uint32_t>(f.size());
  uint32_t k = 0;
  while (k < n) {
    if (f[k].bytes == 0) {
      ++k;
      continue;
    }
    Run r = run_at(f, k, ring);
    if (worth_a_direct_copy(r, k, f[k].host == nullptr)) {
      uint32_t rows = r.end - k;
      bool contiguous =
          rows == 1 || (r.spitch == ring.slot_size && (r.spitch - r.width) * 8 <= r.spitch);
      ops[plan.ops++] = {k, rows, r.width, r.spitch, f[k].src, false, contiguous};
      k = r.end;
      continue;
    }
    // Stage from k on: host frames in consecutive slots, up to one that starts a direct run.
    // A run found from an earlier frame and not worth a copy has no part that is, so only
    // frames past it are looked at again.
    uint32_t known_end = r.end;
    uint32_t e = k;
    uint64_t width = 0;
    uint64_t pitch = 0;
    while (e < n) {
      const FrameSource& x = f[e];
      if (x.bytes == 0 || x.host == nullptr || (e > k && !slot_follows(ring, e))) break;
      if (e >= known_end) {
        Run next = run_at(f, e, ring);
        if (worth_a_direct_copy(next, e, false)) break;
        known_end = next.end;
      }
      uint64_t w = std::max<uint64_t>(width, x.bytes);
      uint64_t p = staged_pitch(w, ring.slot_size);
      if (plan.staged_bytes + (e - k + 1) * p > staging_bytes) break;
      width = w;
      pitch = p;
      ++e;
    }
    if (e == k) {  // the staging area is full: the rest waits for the next burst
      plan.frames = k;
      return plan;
    }
    uint32_t rows = e - k;
    ops[plan.ops++] = {
        k, rows, width, pitch, plan.staged_bytes, true, rows == 1 || pitch == ring.slot_size};
    plan.staged_bytes += rows * pitch;
    k = e;
  }
  plan.frames = n;
  return plan;
}

}  // namespace daqiri::gpu
