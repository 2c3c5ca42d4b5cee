#include "daqiri/gpu_payload_offsets.hpp"
#include "daqiri/gpu_ring.cuh"

namespace daqiri {
namespace {

constexpr unsigned kThreads = 128;

__global__ void resolve(GpuRingView ring, uint32_t first, uint32_t count) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  // The view is read-only for consumers; the ring itself is mapped writable in this process.
  auto& d = const_cast<daqiri_rx_desc&>(ring.descs[(first + i) & ring.mask]);
  if (d.payload_offset == DAQIRI_PAYLOAD_UNREAD) {
    d.payload_offset = gpu_ring_payload_offset(ring, first + i);
  }
}

}  // namespace

cudaError_t resolve_payload_offsets(const GpuRingView& ring, uint32_t first, uint32_t count,
                                    cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  resolve<<<(count + kThreads - 1) / kThreads, kThreads, 0, stream>>>(ring, first, count);
  return cudaGetLastError();
}

}  // namespace daqiri
