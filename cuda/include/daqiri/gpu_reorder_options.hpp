// What daqiri::GpuReorder (daqiri/gpu_reorder.hpp) is told about the packets: plain data,
// shared by the host side and the placement kernel.
#pragma once

#include <stdint.h>

namespace daqiri {

// Offsets count from each packet's payload (the descriptor's payload_offset: past the Ethernet,
// IPv4 and UDP headers of a frame).
struct ReorderOptions {
  uint32_t seq_offset = 8;  // where the sequence number is in each packet (daqiri-gen's: 8)
  uint32_t seq_bytes = 8;   // 4 or 8
  bool seq_big_endian = false;
  uint64_t first_sequence = 0;  // the sequence number of frame 0's packet 0
  uint32_t data_offset = 24;    // where the samples start in each packet
  uint32_t data_bytes = 0;      // sample bytes per packet; shorter packets are counted `short`
  uint32_t packets_per_frame = 0;
  uint32_t frames = 8;      // frame buffers in flight
  uint32_t lag_frames = 2;  // frame f is final once frame f + lag_frames has a packet
  enum class Convert { kNone, kInt8ToFp16, kInt8ToFp32, kInt16ToFp16, kInt16ToFp32 };
  Convert convert = Convert::kNone;  // int16 samples are little-endian
};

}  // namespace daqiri
