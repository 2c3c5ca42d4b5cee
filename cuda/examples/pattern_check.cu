// The check kernels of daqiri-gpu-receive, one per consumer style. A whole thread block checks
// one packet; check_packet is the work, the kernels differ only in how they learn which packets
// are there.
#include "pattern_check.hpp"

#include "daqiri/gpu_ring.cuh"
#include "daqiri/gpu_ring_consumer.cuh"
#include "daqiri/mapped_rx_ring.cuh"
#include "daqiri/test_pattern.hpp"

namespace daqiri::example {
namespace {

// Checks daqiri-gen's pattern in packet `c` and adds what it saw to `totals`. All threads of
// the block call it.
__device__ void check_packet(const daqiri::GpuRingView& ring, uint32_t c, Totals* totals) {
  const daqiri_rx_desc& d = daqiri::gpu_ring_desc(ring, c);
  uint16_t at = daqiri::gpu_ring_payload_offset(ring, c);
  const uint8_t* payload = daqiri::gpu_ring_frame(ring, c) + at;
  uint32_t len = at <= d.length ? d.length - at : 0;
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
  __syncthreads();  // the shared words are reused for the next packet
}

// Kernel per burst (and the graph style's stages): one block per packet of [first, first+n).
__global__ void check_burst(daqiri::GpuRingView ring, uint32_t first, Totals* totals) {
  check_packet(ring, first + blockIdx.x, totals);
}

// check_packet for one warp instead of a block (the persistent kernel's unit of work), on a GPU
// ring or a mapped host ring. The descriptor is read once and the payload in 16-byte loads
// where they fit inside it (the ragged ends a byte at a time): on a mapped host ring every
// load crosses PCIe, so a packet costs a few round trips instead of one per 32 bytes.
template <typename Ring>
__device__ void check_packet_warp(const Ring& ring, uint32_t c, Totals* totals) {
  const unsigned lane = threadIdx.x % 32;
  const daqiri_rx_desc d = daqiri::gpu_ring_desc(ring, c);
  const uint8_t* frame = daqiri::gpu_ring_frame(ring, d);
  uint16_t at = frame == nullptr ? 0 : daqiri_rx_payload_offset(&d, frame);
  const uint8_t* payload = frame + at;
  uint32_t len = frame != nullptr && at <= d.length ? d.length - at : 0;
  uint64_t sequence = 0;
  uint32_t magic = 0, said = 0;
  if (len >= pattern::kHeaderSize) {
    memcpy(&magic, payload, 4);
    memcpy(&sequence, payload + 8, 8);
    memcpy(&said, payload + 16, 4);
  }
  bool ok = len >= pattern::kHeaderSize && magic == pattern::kMagic && said == len;
  unsigned long long sum = 0;
  bool bad = false;
  auto take = [&](uint32_t i, uint8_t v) {
    sum += v;
    bad |= i >= pattern::kHeaderSize && ok && v != pattern::pattern_value(sequence, i);
  };
  const auto address = reinterpret_cast<uintptr_t>(payload);
  const uint32_t head = min(len, static_cast<uint32_t>((16 - address % 16) % 16));
  const uint32_t words = (len - head) / 16;
  if (lane < head) take(lane, payload[lane]);
  const auto* aligned = reinterpret_cast<const uint4*>(payload + head);
  for (uint32_t w = lane; w < words; w += 32) {
    uint4 v = aligned[w];
    const auto* b = reinterpret_cast<const uint8_t*>(&v);
    for (uint32_t k = 0; k < 16; ++k)
      take(head + w * 16 + k, b[k]);
  }
  for (uint32_t i = head + words * 16 + lane; i < len; i += 32)
    take(i, payload[i]);
  for (int o = 16; o > 0; o /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
  ok = ok && !__any_sync(0xffffffffu, bad);
  if (lane == 0) {
    atomicAdd(ok ? &totals->intact : &totals->corrupt, 1ull);
    atomicAdd(&totals->payload_bytes, static_cast<unsigned long long>(len));
    atomicAdd(&totals->byte_sum, sum);
    if (ok) atomicAdd(&totals->sequence_sum, static_cast<unsigned long long>(sequence));
  }
}

// Persistent: a grid that runs for the whole stream (gpu_ring_consume: each block polls the
// doorbell and checks its share of every burst, a warp per packet; block 0 releases from the
// GPU). Ends after packet first + count - 1, or when the host sets *stop.
template <typename Ring>
__global__ void check_persistent(Ring ring, uint32_t first, uint32_t count, uint32_t* done,
                                 Totals* totals, const volatile uint32_t* stop) {
  daqiri::gpu_ring_consume(ring, first, first + count, done, stop,
                           [&](uint32_t c) { check_packet_warp(ring, c, totals); });
}

// A relay batch (daqiri::MappedRelayView): every warp of the grid takes packets of it in turn.
__global__ void check_batch(daqiri::MappedRxRingView ring, const uint32_t* batch, Totals* totals) {
  const uint32_t warps = gridDim.x * (blockDim.x / 32);
  const uint32_t end = batch[1];
  for (uint32_t c = batch[0] + blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
       static_cast<int32_t>(end - c) > 0; c += warps) {
    check_packet_warp(ring, c, totals);
  }
}

// Graph loop: the whole bursts of gridDim.x packets that are there, a block per packet of each
// (gpu_ring_loop).
__global__ void check_loop(daqiri::GpuRingView ring, daqiri::GpuRingLoop* state, Totals* totals,
                           const volatile uint32_t* stop, cudaGraphConditionalHandle loop) {
  daqiri::gpu_ring_loop(ring, state, stop, loop,
                        [&](uint32_t c) { check_packet(ring, c, totals); });
}

}  // namespace

const void* check_batch_function() {
  return reinterpret_cast<const void*>(&check_batch);
}

const void* check_loop_function() {
  return reinterpret_cast<const void*>(&check_loop);
}

cudaError_t launch_check(const GpuRingView& ring, uint32_t first, uint32_t count, Totals* totals,
                         cudaStream_t stream) {
  check_burst<<<count, kCheckThreads, 0, stream>>>(ring, first, totals);
  return cudaGetLastError();
}

const void* check_burst_function() {
  return reinterpret_cast<const void*>(&check_burst);
}

template <typename Ring>
cudaError_t launch_persistent(const Ring& ring, uint32_t first, uint32_t count, uint32_t blocks,
                              uint32_t threads, uint32_t* done, Totals* totals,
                              const uint32_t* stop, cudaStream_t stream) {
  check_persistent<<<blocks, threads, 0, stream>>>(ring, first, count, done, totals, stop);
  return cudaGetLastError();
}
template cudaError_t launch_persistent(const GpuRingView&, uint32_t, uint32_t, uint32_t, uint32_t,
                                       uint32_t*, Totals*, const uint32_t*, cudaStream_t);
template cudaError_t launch_persistent(const MappedRxRingView&, uint32_t, uint32_t, uint32_t,
                                       uint32_t, uint32_t*, Totals*, const uint32_t*, cudaStream_t);

}  // namespace daqiri::example
