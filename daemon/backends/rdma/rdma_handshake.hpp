// What two daqirid instances tell each other when an RDMA connection opens, in the private
// data of the CM's connect request and reply (at most 56 bytes on RoCE): the version, and the
// remote window the peer may WRITE into and READ from. A peer that sends nothing we recognise
// (rping, perftest, another program) gets SEND and RECV only.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>

namespace daqiri::backends::rdma {

inline constexpr uint32_t kHandshakeMagic = 0x44515244;  // "DQRD"
inline constexpr uint16_t kHandshakeVersion = 1;

// Little-endian on the wire (both ends are x86-64 or aarch64 hosts).
struct Handshake {
  uint32_t magic = kHandshakeMagic;
  uint16_t version = kHandshakeVersion;
  uint16_t access = 0;       // kWindowWritable | kWindowReadable
  uint64_t window_addr = 0;  // virtual address of window slot 0 in the sender
  uint32_t window_rkey = 0;
  uint32_t slot_size = 0;  // bytes per slot
  uint32_t slots = 0;      // 0: no window
  uint32_t reserved = 0;
};
static_assert(sizeof(Handshake) == 32);

inline constexpr uint16_t kWindowWritable = 1;
inline constexpr uint16_t kWindowReadable = 2;

// The peer's handshake, or nothing when the private data is not one of ours.
inline std::optional<Handshake> parse_handshake(const void* data, size_t length) {
  if (data == nullptr || length < sizeof(Handshake)) return std::nullopt;
  Handshake h;
  std::memcpy(&h, data, sizeof h);
  if (h.magic != kHandshakeMagic || h.version != kHandshakeVersion) return std::nullopt;
  if (h.slots == 0) h.access = 0;
  return h;
}

}  // namespace daqiri::backends::rdma
