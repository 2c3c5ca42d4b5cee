// The payload daqiri-gen sends and `daqiri-ctl tap --verify` checks: a 24-byte header
// {magic, stream, sequence, length} followed by bytes that are a function of sequence and
// position, so that loss, reordering and corruption are all detectable. Header-only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace daqiri::pattern {

inline constexpr uint32_t kMagic = 0x4e475144;  // "DQGN"
inline constexpr size_t kHeaderSize = 24;

struct Header {
  uint32_t magic;
  uint32_t stream;    // chosen by the sender, e.g. the destination port
  uint64_t sequence;  // 0, 1, 2, ... per stream
  uint32_t length;    // the whole payload, header included
  uint32_t reserved;
};
static_assert(sizeof(Header) == kHeaderSize);

#ifdef __CUDACC__
#define DAQIRI_HOST_DEVICE __host__ __device__
#else
#define DAQIRI_HOST_DEVICE
#endif

// Byte `i` of the payload of `sequence` (past the header); CUDA kernels check with it too.
DAQIRI_HOST_DEVICE inline uint8_t pattern_value(uint64_t sequence, uint64_t i) {
  return static_cast<uint8_t>((sequence * 131 + i * 7 + (i >> 8)) & 0xff);
}

inline std::byte pattern_byte(uint64_t sequence, size_t i) {
  return static_cast<std::byte>(pattern_value(sequence, i));
}

// Fills `payload` (at least kHeaderSize bytes) for `sequence`.
inline void fill(std::span<std::byte> payload, uint32_t stream, uint64_t sequence) {
  Header h{kMagic, stream, sequence, static_cast<uint32_t>(payload.size()), 0};
  // A payload shorter than the header gets what fits (check() calls it not ours).
  std::memcpy(payload.data(), &h, std::min(sizeof h, payload.size()));
  for (size_t i = kHeaderSize; i < payload.size(); ++i)
    payload[i] = pattern_byte(sequence, i);
}

enum class Check { kOk, kNotOurs, kCorrupt };

// Checks a received payload; on kOk, `header` holds its header.
inline Check check(std::span<const std::byte> payload, Header& header) {
  if (payload.size() < kHeaderSize) return Check::kNotOurs;
  std::memcpy(&header, payload.data(), sizeof header);
  if (header.magic != kMagic) return Check::kNotOurs;
  if (header.length != payload.size()) return Check::kCorrupt;
  for (size_t i = kHeaderSize; i < payload.size(); ++i) {
    if (payload[i] != pattern_byte(header.sequence, i)) return Check::kCorrupt;
  }
  return Check::kOk;
}

}  // namespace daqiri::pattern
