#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "daqiri/gpu_reorder.hpp"

#include "daqiri/cuda/cuda_error.hpp"
#include "daqiri/cuda/device_scope.hpp"
#include "gpu_reorder_kernel.hpp"

namespace daqiri {
namespace {

using cuda::DeviceScope;
using reorder::kAhead;
using reorder::kDuplicates;
using reorder::kGlobals;
using reorder::kLate;
using reorder::kMaxFramePlus1;
using reorder::kPlaced;
using reorder::kShort;
using reorder::Params;

uint32_t output_bytes(const ReorderOptions& o) {
  using C = ReorderOptions::Convert;
  switch (o.convert) {
    case C::kNone:
      return o.data_bytes;
    case C::kInt8ToFp16:
      return o.data_bytes * 2;
    case C::kInt8ToFp32:
      return o.data_bytes * 4;
    case C::kInt16ToFp16:
      return o.data_bytes / 2 * 2;
    case C::kInt16ToFp32:
      return o.data_bytes / 2 * 4;
  }
  return o.data_bytes;
}

}  // namespace

struct GpuReorder::State {
  int device = 0;
  Params p{};
  uint64_t next_report = 0;  // the first frame not yet returned by ready()
  // The frame states ([bits | received | duplicates | globals], as in device memory) mirrored
  // in pinned host memory: each place() copies them back on its stream, behind its kernel.
  uint8_t* mirror = nullptr;
  uint64_t state_bytes = 0;
  const uint64_t* bits = nullptr;
  unsigned int* received = nullptr;
  unsigned int* duplicates = nullptr;
  const unsigned long long* globals = nullptr;
  void* allocation = nullptr;
};

Result<std::unique_ptr<GpuReorder>> GpuReorder::create(const ReorderOptions& o, int device) {
  bool wide = o.convert == ReorderOptions::Convert::kInt16ToFp16 ||
              o.convert == ReorderOptions::Convert::kInt16ToFp32;
  if (o.packets_per_frame == 0 || o.data_bytes == 0 || o.frames == 0 ||
      (o.seq_bytes != 4 && o.seq_bytes != 8) || o.lag_frames == 0 || o.lag_frames >= o.frames ||
      (wide && o.data_bytes % 2 != 0)) {
    return fail(ErrorCode::kInvalidArgument,
                "reorder: packets_per_frame, data_bytes and frames must be non-zero, seq_bytes 4 "
                "or 8, lag_frames in [1, frames), int16 data an even number of bytes");
  }
  auto s = std::make_unique<State>();
  s->device = device;
  Params& p = s->p;
  p.o = o;
  p.out_bytes = output_bytes(o);
  p.words = (o.packets_per_frame + 63) / 64;
  // Each frame buffer 256-byte aligned, so fp32/fp16 views of it are aligned too.
  p.frame_bytes = (uint64_t{o.packets_per_frame} * p.out_bytes + 255) / 256 * 256;
  uint64_t data = p.frame_bytes * o.frames;
  uint64_t bits = uint64_t{o.frames} * p.words * sizeof(unsigned long long);
  uint64_t counts = uint64_t{o.frames} * sizeof(unsigned int);
  uint64_t total = data + bits + 2 * counts + kGlobals * sizeof(unsigned long long);
  DeviceScope scope(device);
  if (cudaError_t e = cudaMalloc(&s->allocation, total); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "reorder: cudaMalloc of the frame buffers"));
  }
  if (cudaError_t e = cudaMemset(s->allocation, 0, total); e != cudaSuccess) {
    cudaFree(s->allocation);
    return std::unexpected(cuda_error(e, "reorder: cudaMemset"));
  }
  auto* base = static_cast<uint8_t*>(s->allocation);
  p.data = base;
  p.bits = reinterpret_cast<unsigned long long*>(base + data);
  p.received = reinterpret_cast<unsigned int*>(base + data + bits);
  p.duplicates = reinterpret_cast<unsigned int*>(base + data + bits + counts);
  p.globals = reinterpret_cast<unsigned long long*>(base + data + bits + 2 * counts);
  s->state_bytes = total - data;
  if (cudaError_t e = cudaMallocHost(reinterpret_cast<void**>(&s->mirror), s->state_bytes);
      e != cudaSuccess) {
    cudaFree(s->allocation);
    return std::unexpected(cuda_error(e, "reorder: cudaMallocHost of the frame states"));
  }
  std::memset(s->mirror, 0, s->state_bytes);
  s->bits = reinterpret_cast<const uint64_t*>(s->mirror);
  s->received = reinterpret_cast<unsigned int*>(s->mirror + bits);
  s->duplicates = reinterpret_cast<unsigned int*>(s->mirror + bits + counts);
  s->globals = reinterpret_cast<const unsigned long long*>(s->mirror + bits + 2 * counts);
  return std::unique_ptr<GpuReorder>(new GpuReorder(std::move(s)));
}

GpuReorder::GpuReorder(std::unique_ptr<State> s) : s_(std::move(s)) {}

GpuReorder::~GpuReorder() {
  if (s_ && s_->allocation != nullptr) {
    DeviceScope scope(s_->device);
    cudaFree(s_->allocation);
    if (s_->mirror != nullptr) cudaFreeHost(s_->mirror);
  }
}

uint64_t GpuReorder::output_bytes_per_packet() const {
  return s_->p.out_bytes;
}

uint64_t GpuReorder::frame_bytes() const {
  return s_->p.frame_bytes;
}

cudaError_t GpuReorder::place(const GpuRingView& ring, uint32_t first, uint32_t count,
                              cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  DeviceScope scope(s_->device);
  if (cudaError_t e = reorder::launch_place(ring, first, count, s_->p, stream); e != cudaSuccess) {
    return e;
  }
  return cudaMemcpyAsync(s_->mirror, s_->p.bits, s_->state_bytes, cudaMemcpyDeviceToHost, stream);
}

Result<std::vector<Frame>> GpuReorder::ready() {
  return collect(false);
}

Result<std::vector<Frame>> GpuReorder::flush() {
  return collect(true);
}

Result<std::vector<Frame>> GpuReorder::collect(bool all) {
  State& s = *s_;
  const Params& p = s.p;
  uint64_t seen_end = s.globals[kMaxFramePlus1];  // frames below it have had a packet after
  std::vector<Frame> out;
  for (uint64_t f = std::max(s.next_report, p.base); f < p.base + p.o.frames; ++f) {
    uint32_t slot = static_cast<uint32_t>(f % p.o.frames);
    uint32_t got = s.received[slot];
    bool overtaken = seen_end > f + p.o.lag_frames;  // frame f + lag has a packet
    bool final = got == p.o.packets_per_frame || overtaken || (all && f < seen_end);
    if (!final) break;
    Frame fr;
    fr.index = f;
    fr.data = p.data + uint64_t{slot} * p.frame_bytes;
    fr.received = got;
    fr.missing = p.o.packets_per_frame - got;
    fr.duplicates = s.duplicates[slot];
    fr.received_bits = s.bits + uint64_t{slot} * p.words;
    out.push_back(fr);
    s.next_report = f + 1;
  }
  return out;
}

Result<> GpuReorder::release(uint64_t index, cudaStream_t stream) {
  State& s = *s_;
  Params& p = s.p;
  if (index != p.base || index >= s.next_report) {
    return fail(ErrorCode::kInvalidArgument,
                "reorder: release frames in order, once ready() returned them (next: " +
                    std::to_string(p.base) + ")");
  }
  uint32_t slot = static_cast<uint32_t>(index % p.o.frames);
  DeviceScope scope(s.device);
  cudaError_t e =
      cudaMemsetAsync(p.data + uint64_t{slot} * p.frame_bytes, 0, p.frame_bytes, stream);
  if (e == cudaSuccess) {
    e = cudaMemsetAsync(p.bits + uint64_t{slot} * p.words, 0, p.words * sizeof(unsigned long long),
                        stream);
  }
  if (e == cudaSuccess) e = cudaMemsetAsync(p.received + slot, 0, sizeof(unsigned int), stream);
  if (e == cudaSuccess) e = cudaMemsetAsync(p.duplicates + slot, 0, sizeof(unsigned int), stream);
  if (e != cudaSuccess) return std::unexpected(cuda_error(e, "reorder: clearing a frame"));
  // The mirror too: ready() before the next place() must not see the old frame's state.
  std::memset(const_cast<uint64_t*>(s.bits) + uint64_t{slot} * p.words, 0, size_t{p.words} * 8);
  s.received[slot] = 0;
  s.duplicates[slot] = 0;
  ++p.base;
  return {};
}

Result<ReorderCounters> GpuReorder::counters() {
  State& s = *s_;
  DeviceScope scope(s.device);
  unsigned long long g[kGlobals] = {};
  if (cudaError_t e = cudaMemcpy(g, s.p.globals, sizeof g, cudaMemcpyDeviceToHost);
      e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "reorder: reading counters"));
  }
  ReorderCounters c;
  c.placed = g[kPlaced];
  c.duplicates = g[kDuplicates];
  c.late = g[kLate];
  c.ahead = g[kAhead];
  c.short_ = g[kShort];
  return c;
}

}  // namespace daqiri
