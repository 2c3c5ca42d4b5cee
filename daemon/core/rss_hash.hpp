// Receive-side scaling as a NIC does it: the Toeplitz hash of a frame's IPv4 addresses and UDP
// ports under the conventional 40-byte key, and the queue an indirection table of a
// power-of-two size, filled round-robin from the flow's queue list, picks for it. The same
// tuple always lands on the same queue (flow-affine), in the NIC or in the daemon's software
// path, across restarts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

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

// The hash of an IPv4/UDP 4-tuple (host byte order), as RTE_ETH_RSS_NONFRAG_IPV4_UDP hashes it:
// source address, destination address, source port, destination port, each big-endian.
constexpr uint32_t rss_hash_ipv4_udp(uint32_t src_ip, uint32_t dst_ip, uint16_t src_port,
                                     uint16_t dst_port) {
  const std::array<uint8_t, 12> tuple = {
      uint8_t(src_ip >> 24),  uint8_t(src_ip >> 16), uint8_t(src_ip >> 8),   uint8_t(src_ip),
      uint8_t(dst_ip >> 24),  uint8_t(dst_ip >> 16), uint8_t(dst_ip >> 8),   uint8_t(dst_ip),
      uint8_t(src_port >> 8), uint8_t(src_port),     uint8_t(dst_port >> 8), uint8_t(dst_port)};
  return toeplitz_hash(kRssKey, tuple);
}

// The indirection table's size for `queues` queues: the next power of two, as a NIC rounds it.
constexpr uint32_t rss_table_size(uint32_t queues) {
  uint32_t size = 1;
  while (size < queues)
    size <<= 1;
  return size;
}

// Which of `queues` queues (an index into the flow's list) a hash picks: the table's entry
// hash mod its size, the table filled with the list over and over.
constexpr uint32_t rss_queue_index(uint32_t hash, uint32_t queues) {
  return (hash & (rss_table_size(queues) - 1)) % queues;
}

}  // namespace daqiri::core
