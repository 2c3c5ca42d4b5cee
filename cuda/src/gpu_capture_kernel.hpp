// The kernel behind capture::GpuFileWriter: lays capture records out in a device buffer.
#pragma once

#include <cuda_runtime_api.h>

#include "daqiri/capture_record.hpp"
#include "daqiri/gpu_ring_view.hpp"

namespace daqiri::capture {

// What the kernel stores of a ring packet: its frame cut to its slot, then as the format says.
// The host plans offsets with the very same function.
DAQIRI_HOST_DEVICE inline RecordData slot_record_data(const daqiri_rx_desc& d, uint32_t slot_size,
                                                      Format format, uint32_t snaplen) {
  uint32_t length = d.length < slot_size ? d.length : slot_size;
  return record_data(format, length, d.payload_offset, snaplen);
}

// Writes the records of ring packets [first, first + count) into `out`, record i at byte
// offsets[i] (device memory), each holding at most `snaplen` bytes of its frame (pcap, pcapng)
// and never more than a slot. One block per packet on `stream`.
cudaError_t launch_pack_records(const GpuRingView& ring, uint32_t first, uint32_t count,
                                Format format, uint32_t snaplen, const uint64_t* offsets,
                                uint8_t* out, cudaStream_t stream);

}  // namespace daqiri::capture
