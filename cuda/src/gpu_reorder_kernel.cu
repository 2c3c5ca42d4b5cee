#include <cuda_fp16.h>

#include "gpu_reorder_kernel.hpp"

#include "daqiri/gpu_ring.cuh"

namespace daqiri::reorder {
namespace {

constexpr unsigned kThreads = 128;

__device__ uint64_t read_sequence(const uint8_t* p, const ReorderOptions& o) {
  uint64_t v = 0;
  for (uint32_t i = 0; i < o.seq_bytes; ++i) {
    uint32_t b = o.seq_big_endian ? i : o.seq_bytes - 1 - i;
    v = (v << 8) | p[o.seq_offset + b];
  }
  return v;
}

__device__ void convert(const uint8_t* in, uint8_t* out, const Params& p) {
  using C = ReorderOptions::Convert;
  const C c = p.o.convert;
  if (c == C::kNone) {
    for (uint32_t i = threadIdx.x; i < p.o.data_bytes; i += blockDim.x)
      out[i] = in[i];
    return;
  }
  bool wide = c == C::kInt16ToFp16 || c == C::kInt16ToFp32;
  bool half = c == C::kInt8ToFp16 || c == C::kInt16ToFp16;
  uint32_t n = p.o.data_bytes / (wide ? 2 : 1);
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v = wide ? static_cast<float>(static_cast<int16_t>(in[2 * i] | (in[2 * i + 1] << 8)))
                   : static_cast<float>(static_cast<int8_t>(in[i]));
    if (half) {
      reinterpret_cast<__half*>(out)[i] = __float2half(v);
    } else {
      reinterpret_cast<float*>(out)[i] = v;
    }
  }
}

// One block per packet: thread 0 decides where it goes, the block copies it there.
__global__ void place_kernel(GpuRingView ring, uint32_t first, Params p) {
  __shared__ int slot;
  __shared__ uint32_t k;
  const daqiri_rx_desc& d = ring.descs[(first + blockIdx.x) & ring.mask];
  // Offsets count from the payload: past the headers the descriptor says the frame has.
  uint16_t at = gpu_ring_payload_offset(ring, first + blockIdx.x);
  const uint8_t* pkt = ring.base + d.offset + at;
  uint32_t length = at <= d.length ? d.length - at : 0;
  if (threadIdx.x == 0) {
    slot = -1;
    const ReorderOptions& o = p.o;
    unsigned long long* g = p.globals;
    uint32_t need = max(o.seq_offset + o.seq_bytes, o.data_offset + o.data_bytes);
    uint64_t seq = length >= need ? read_sequence(pkt, o) : 0;
    if (length < need) {
      atomicAdd(&g[kShort], 1ull);
    } else if (seq < o.first_sequence) {
      atomicAdd(&g[kLate], 1ull);
    } else {
      uint64_t rel = seq - o.first_sequence;
      uint64_t frame = rel / o.packets_per_frame;
      uint32_t index = static_cast<uint32_t>(rel % o.packets_per_frame);
      atomicMax(&g[kMaxFramePlus1], static_cast<unsigned long long>(frame + 1));
      if (frame < p.base) {
        atomicAdd(&g[kLate], 1ull);
      } else if (frame >= p.base + o.frames) {
        atomicAdd(&g[kAhead], 1ull);
      } else {
        uint32_t s = static_cast<uint32_t>(frame % o.frames);
        unsigned long long bit = 1ull << (index & 63);
        unsigned long long old = atomicOr(&p.bits[uint64_t{s} * p.words + index / 64], bit);
        if ((old & bit) != 0) {
          atomicAdd(&g[kDuplicates], 1ull);
          atomicAdd(&p.duplicates[s], 1u);
        } else {
          atomicAdd(&g[kPlaced], 1ull);
          atomicAdd(&p.received[s], 1u);
          slot = static_cast<int>(s);
          k = index;
        }
      }
    }
  }
  __syncthreads();
  if (slot < 0) return;
  convert(pkt + p.o.data_offset,
          p.data + uint64_t(slot) * p.frame_bytes + uint64_t(k) * p.out_bytes, p);
}

}  // namespace

cudaError_t launch_place(const GpuRingView& ring, uint32_t first, uint32_t count, const Params& p,
                         cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  place_kernel<<<count, kThreads, 0, stream>>>(ring, first, p);
  return cudaGetLastError();
}

}  // namespace daqiri::reorder
