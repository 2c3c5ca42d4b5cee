// The check kernel of daqiri-gpu-receive: one block per packet of a burst.
#include "pattern_check.hpp"

#include "daqiri/gpu_ring.cuh"
#include "daqiri/test_pattern.hpp"

namespace daqiri::example {
namespace {

// One block per packet of [first, last): checks the pattern and adds up the payload bytes.
__global__ void check_burst(daqiri::GpuRingView ring, uint32_t first, Totals* totals) {
  uint32_t c = first + blockIdx.x;
  const daqiri_rx_desc& d = daqiri::gpu_ring_desc(ring, c);
  const uint8_t* payload = daqiri::gpu_ring_frame(ring, c) + d.payload_offset;
  uint32_t len = d.payload_offset <= d.length ? d.length - d.payload_offset : 0;
  __shared__ uint64_t sequence;
  __shared__ int ok;
  __shared__ unsigned long long sum;
  if (threadIdx.x == 0) {
    uint32_t magic = 0, length = 0;
    memcpy(&magic, payload, 4);
    memcpy(&sequence, payload + 8, 8);
    memcpy(&length, payload + 16, 4);
    ok = len >= pattern::kHeaderSize && magic == pattern::kMagic && length == len;
    sum = 0;
  }
  __syncthreads();
  unsigned long long local = 0;
  int bad = 0;
  for (uint32_t i = threadIdx.x; i < len; i += blockDim.x) {
    local += payload[i];
    if (i >= pattern::kHeaderSize && ok && payload[i] != pattern::pattern_value(sequence, i)) {
      bad = 1;
    }
  }
  if (bad) ok = 0;  // benign race: every writer stores 0
  atomicAdd(&sum, local);
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicAdd(ok ? &totals->intact : &totals->corrupt, 1ull);
    atomicAdd(&totals->payload_bytes, static_cast<unsigned long long>(len));
    atomicAdd(&totals->byte_sum, sum);
    if (ok) atomicAdd(&totals->sequence_sum, static_cast<unsigned long long>(sequence));
  }
}

}  // namespace

cudaError_t launch_check(const GpuRingView& ring, uint32_t first, uint32_t count, Totals* totals,
                         cudaStream_t stream) {
  check_burst<<<count, 128, 0, stream>>>(ring, first, totals);
  return cudaGetLastError();
}

}  // namespace daqiri::example
