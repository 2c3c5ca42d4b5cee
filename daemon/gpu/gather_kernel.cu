#include "gpu/gather_kernel.hpp"

#include "core/packet_fields.hpp"

namespace daqiri::gpu {
namespace {

constexpr int kThreads = 128;
constexpr int kUnroll = 4;  // 16-byte loads each thread has in flight at once

// One block per frame. 16-byte loads when both ends allow them (frames in pinned pools start
// on buffer boundaries, slots on 256-byte ones), bytes otherwise. Reads cross PCIe: wide,
// coalesced loads, several in flight per thread before any store, are what keeps the link
// busy (one load then its store per iteration waits a PCIe round trip each time).
__global__ void gather(const GatherJob* jobs, uint8_t* ring_base, daqiri_rx_desc* descs) {
  const GatherJob& job = jobs[blockIdx.x];
  const uint8_t* src = reinterpret_cast<const uint8_t*>(job.src);
  uint8_t* dst = ring_base + job.desc.offset;
  uint32_t len = job.bytes;
  uint32_t done = 0;
  if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0) {
    uint32_t vecs = len / 16;
    const uint4* __restrict__ s = reinterpret_cast<const uint4*>(src);
    uint4* __restrict__ d = reinterpret_cast<uint4*>(dst);
    for (uint32_t base = threadIdx.x; base < vecs; base += kThreads * kUnroll) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        uint32_t i = base + u * kThreads;
        if (i < vecs) v[u] = s[i];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        uint32_t i = base + u * kThreads;
        if (i < vecs) d[i] = v[u];
      }
    }
    done = vecs * 16;
  }
  for (uint32_t i = done + threadIdx.x; i < len; i += kThreads)
    dst[i] = src[i];
  if (threadIdx.x == 0) descs[job.slot] = job.desc;
}

// A thread per descriptor of slots [first, first + n) (mod mask + 1).
__global__ void find_payloads(const uint8_t* ring_base, daqiri_rx_desc* descs, uint32_t first,
                              uint32_t n, uint32_t mask) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  daqiri_rx_desc& d = descs[(first + i) & mask];
  if (d.payload_offset == core::kPayloadOffsetUnread) {
    d.payload_offset = daqiri_udp_payload_offset(ring_base + d.offset, d.length);
  }
}

}  // namespace

cudaError_t launch_find_payloads(const uint8_t* ring_base, daqiri_rx_desc* descs, uint32_t first,
                                 uint32_t count, uint32_t mask, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  find_payloads<<<(count + kThreads - 1) / kThreads, kThreads, 0, stream>>>(ring_base, descs, first,
                                                                            count, mask);
  return cudaGetLastError();
}

cudaError_t launch_gather(const GatherJob* jobs, uint32_t count, uint8_t* ring_base,
                          daqiri_rx_desc* descs, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  gather<<<count, kThreads, 0, stream>>>(jobs, ring_base, descs);
  return cudaGetLastError();
}

}  // namespace daqiri::gpu
