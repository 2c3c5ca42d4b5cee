#include "gpu_capture_kernel.hpp"

namespace daqiri::capture {
namespace {

constexpr unsigned kThreads = 128;

__global__ void pack_records(GpuRingView ring, uint32_t first, Format format, uint32_t snaplen,
                             const uint64_t* offsets, uint8_t* out) {
  const daqiri_rx_desc& d = ring.descs[(first + blockIdx.x) & ring.mask];
  RecordData data = slot_record_data(d, ring.slot_size, format, snaplen);
  uint8_t* record = out + offsets[blockIdx.x];
  // Every thread knows where the data goes; thread 0 writes the header.
  uint8_t* dst = record + record_header_size(format);
  if (threadIdx.x == 0) begin_record(record, format, d.timestamp_ns, data.length, d.length);
  const uint8_t* src = ring.base + d.offset + data.offset;
  for (uint32_t i = threadIdx.x; i < data.length; i += blockDim.x)
    dst[i] = src[i];
  if (threadIdx.x == 0) finish_record(dst + data.length, format, data.length);
}

}  // namespace

cudaError_t launch_pack_records(const GpuRingView& ring, uint32_t first, uint32_t count,
                                Format format, uint32_t snaplen, const uint64_t* offsets,
                                uint8_t* out, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  pack_records<<<count, kThreads, 0, stream>>>(ring, first, format, snaplen, offsets, out);
  return cudaGetLastError();
}

}  // namespace daqiri::capture
