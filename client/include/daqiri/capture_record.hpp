// The layout of one capture record (PCAP record, PCAPNG Enhanced Packet Block, or raw payload
// bytes), written the same way by the host writer (capture::FileWriter) and by the GPU writer's
// kernel (capture::GpuFileWriter), so both produce byte-identical files. Host and device code
// alike include it: no standard library beyond <stdint.h> and <string.h>.
#pragma once

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define DAQIRI_HOST_DEVICE __host__ __device__
#else
#define DAQIRI_HOST_DEVICE
#endif

namespace daqiri::capture {

enum class Format {
  kPcap,    // libpcap format, nanosecond timestamps, LINKTYPE_ETHERNET
  kPcapng,  // one section per run: SHB, an IDB naming interface and flow, EPBs
  kRaw,     // the UDP payloads (frame bytes after payload_offset), back to back
};

inline constexpr uint32_t kPcapngEpb = 6;

// Where a record's stored bytes start in the frame, and how many there are: the UDP payload
// for raw, else the frame cut to `snaplen`.
struct RecordData {
  uint32_t offset;
  uint32_t length;
};
DAQIRI_HOST_DEVICE inline RecordData record_data(Format f, uint32_t frame_length,
                                                 uint32_t payload_offset, uint32_t snaplen) {
  if (f == Format::kRaw) {
    uint32_t at = payload_offset < frame_length ? payload_offset : frame_length;
    return {at, frame_length - at};
  }
  return {0, frame_length < snaplen ? frame_length : snaplen};
}

// Bytes before a record's data, and of the whole record holding `stored` bytes of a frame.
DAQIRI_HOST_DEVICE inline uint32_t record_header_size(Format f) {
  return f == Format::kPcap ? 16 : f == Format::kPcapng ? 28 : 0;
}
DAQIRI_HOST_DEVICE inline uint32_t record_size(Format f, uint32_t stored) {
  if (f == Format::kPcapng) return 28 + (stored + 3) / 4 * 4 + 4;
  return record_header_size(f) + stored;
}

// Writes the record's header at `out` and returns where its data goes; `finish_record` then
// writes what follows the data (PCAPNG's padding and trailing length).
DAQIRI_HOST_DEVICE inline uint8_t* begin_record(uint8_t* out, Format f, uint64_t timestamp_ns,
                                                uint32_t stored, uint32_t original) {
  auto put32 = [&out](uint32_t v) {
    memcpy(out, &v, 4);
    out += 4;
  };
  if (f == Format::kPcap) {
    put32(uint32_t(timestamp_ns / 1000000000u));
    put32(uint32_t(timestamp_ns % 1000000000u));
    put32(stored);
    put32(original);
  } else if (f == Format::kPcapng) {
    put32(kPcapngEpb);
    put32(record_size(f, stored));
    put32(0);  // interface 0: the section's one IDB
    put32(uint32_t(timestamp_ns >> 32));
    put32(uint32_t(timestamp_ns));
    put32(stored);
    put32(original);
  }
  return out;
}

DAQIRI_HOST_DEVICE inline void finish_record(uint8_t* data_end, Format f, uint32_t stored) {
  if (f != Format::kPcapng) return;
  uint32_t pad = (4 - stored % 4) % 4;
  memset(data_end, 0, pad);
  uint32_t total = record_size(f, stored);
  memcpy(data_end + pad, &total, 4);
}

}  // namespace daqiri::capture
