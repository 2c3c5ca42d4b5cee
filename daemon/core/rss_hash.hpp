// Receive-side scaling as a NIC does it: the Toeplitz hash of a frame's IPv4 addresses and UDP
// ports under the conventional 40-byte key, and the queue an indirection table of a
// power-of-two size, filled round-robin from the flow's queue list, picks for it. The same
// tuple always lands on the same queue (flow-affine), in the NIC or in the daemon's software
// path, across restarts.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/packet_fields.hpp"

namespace daqiri::core {

// Microsoft's RSS key, the one DPDK's examples and DAQIRI use.
inline constexpr std::array<uint8_t, 40> kRssKey = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

// The Toeplitz hash of `input` (at most key.size() - 4 bytes): for each set bit of the input,
// from the most significant, the 32 key bits starting at that bit's position are XORed in.
constexpr uint32_t toeplitz_hash(std::span<const uint8_t> key, std::span<const uint8_t> input) {
  uint32_t hash = 0;
  // The key's 32-bit window at the current bit, and the key bits still to shift into it.
  uint32_t window = (uint32_t{key[0]} << 24) | (uint32_t{key[1]} << 16) | (uint32_t{key[2]} << 8) |
                    uint32_t{key[3]};
  for (size_t i = 0; i < input.size(); ++i) {
    const uint8_t next = key[i + 4];
    for (int bit = 7; bit >= 0; --bit) {
      if ((input[i] >> bit) & 1u) hash ^= window;
      window = (window << 1) | ((next >> bit) & 1u);
    }
  }
  return hash;
}

// toeplitz_hash over 12 bytes under kRssKey, a byte at a time: entry [i][v] is what byte value
// v at position i XORs in (the key's windows at its set bits). 12 KiB, made at compile time:
// 12 independent loads a frame on the poller's software RSS path instead of 96 dependent
// steps.
struct RssByteTable {
  std::array<std::array<uint32_t, 256>, 12> entries{};
  constexpr RssByteTable() {
    for (size_t i = 0; i < 12; ++i) {
      // The key's 32 bits from bit 8i + b on, for the byte's bit b (b = 0: its top bit).
      std::array<uint32_t, 8> window{};
      for (size_t b = 0; b < 8; ++b) {
        for (size_t k = 0; k < 32; ++k) {
          const size_t bit = 8 * i + b + k;
          window[b] = (window[b] << 1) | ((kRssKey[bit / 8] >> (7 - bit % 8)) & 1u);
        }
      }
      // A value's entry: a smaller value's (its lowest set bit cleared) and that bit's window.
      for (uint32_t v = 1; v < 256; ++v) {
        const auto low = static_cast<size_t>(__builtin_ctz(v));
        entries[i][v] = entries[i][v & (v - 1)] ^ window[7 - low];
      }
    }
  }
};
inline constexpr RssByteTable kRssByteTable{};

// The hash of an IPv4/UDP 4-tuple (host byte order), as RTE_ETH_RSS_NONFRAG_IPV4_UDP hashes it:
// source address, destination address, source port, destination port, each big-endian.
constexpr uint32_t rss_hash_ipv4_udp(uint32_t src_ip, uint32_t dst_ip, uint16_t src_port,
                                     uint16_t dst_port) {
  const auto& t = kRssByteTable.entries;
  return t[0][src_ip >> 24] ^ t[1][(src_ip >> 16) & 0xff] ^ t[2][(src_ip >> 8) & 0xff] ^
         t[3][src_ip & 0xff] ^ t[4][dst_ip >> 24] ^ t[5][(dst_ip >> 16) & 0xff] ^
         t[6][(dst_ip >> 8) & 0xff] ^ t[7][dst_ip & 0xff] ^ t[8][src_port >> 8] ^
         t[9][src_port & 0xff] ^ t[10][dst_port >> 8] ^ t[11][dst_port & 0xff];
}

// A frame's hash as a NIC hashes for RTE_ETH_RSS_NONFRAG_IPV4_UDP: its 4-tuple's for an
// IPv4/UDP packet, 0 for any other frame (all of which go to the flow's first queue).
constexpr uint32_t rss_hash(const PacketFields& f) {
  if (!f.ipv4 || f.protocol != PacketFields::kUdp) return 0;
  return rss_hash_ipv4_udp(f.src_ip, f.dst_ip, f.src_port, f.dst_port);
}

// The indirection table's size for `queues` queues: the next power of two, as a NIC rounds it.
constexpr uint32_t rss_table_size(uint32_t queues) {
  return std::bit_ceil(queues);
}

// Which of `queues` queues (an index into the flow's list) a hash picks: the table's entry
// hash mod its size, the table filled with the list over and over.
constexpr uint32_t rss_queue_index(uint32_t hash, uint32_t queues) {
  return (hash & (rss_table_size(queues) - 1)) % queues;
}

}  // namespace daqiri::core
