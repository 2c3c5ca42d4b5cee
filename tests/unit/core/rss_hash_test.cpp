#include "core/rss_hash.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>

namespace daqiri::core {
namespace {

constexpr uint32_t ip(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return (uint32_t{a} << 24) | (uint32_t{b} << 16) | (uint32_t{c} << 8) | d;
}

// Microsoft's RSS verification suite (IPv4 with ports), the vectors NICs and DPDK's thash test
// check themselves against: source, destination, and the expected hash.
struct Vector {
  uint32_t src_ip, dst_ip;
  uint16_t src_port, dst_port;
  uint32_t hash;
};
constexpr Vector kVectors[] = {
    {ip(66, 9, 149, 187), ip(161, 142, 100, 80), 2794, 1766, 0x51ccc178},
    {ip(199, 92, 111, 2), ip(65, 69, 140, 83), 14230, 4739, 0xc626b0ea},
    {ip(24, 19, 198, 95), ip(12, 22, 207, 184), 12898, 38024, 0x5c2b394a},
    {ip(38, 27, 205, 30), ip(209, 142, 163, 6), 48228, 2217, 0xafc7327f},
    {ip(153, 39, 163, 191), ip(202, 188, 127, 2), 44251, 1303, 0x10e828a2},
};

TEST(RssHash, MatchesTheVerificationSuite) {
  for (const Vector& v : kVectors) {
    EXPECT_EQ(rss_hash_ipv4_udp(v.src_ip, v.dst_ip, v.src_port, v.dst_port), v.hash)
        << std::hex << v.hash;
  }
  static_assert(rss_hash_ipv4_udp(ip(66, 9, 149, 187), ip(161, 142, 100, 80), 2794, 1766) ==
                0x51ccc178);
}

// The byte table rss_hash_ipv4_udp uses is the bit-serial hash, tuple for tuple.
TEST(RssHash, TheByteTableIsTheBitSerialHash) {
  uint32_t x = 0x9e3779b9;  // xorshift: tuples all over the 96-bit space
  for (int i = 0; i < 10000; ++i) {
    std::array<uint32_t, 3> words{};
    for (auto& w : words) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      w = x;
    }
    std::array<uint8_t, 12> bytes{};
    for (size_t b = 0; b < 12; ++b)
      bytes[b] = static_cast<uint8_t>(words[b / 4] >> (24 - 8 * (b % 4)));
    ASSERT_EQ(rss_hash_ipv4_udp(words[0], words[1], uint16_t(words[2] >> 16), uint16_t(words[2])),
              toeplitz_hash(kRssKey, bytes));
  }
}

TEST(RssHash, AddressesAloneMatchTheSuitesIpv4Column) {
  // The same suite's hashes over the two addresses only.
  const std::array<uint8_t, 8> tuple = {66, 9, 149, 187, 161, 142, 100, 80};
  EXPECT_EQ(toeplitz_hash(kRssKey, tuple), 0x323e8fc2u);
}

TEST(RssHash, TheTableIsAPowerOfTwoFilledRoundRobin) {
  EXPECT_EQ(rss_table_size(1), 1u);
  EXPECT_EQ(rss_table_size(2), 2u);
  EXPECT_EQ(rss_table_size(3), 4u);
  EXPECT_EQ(rss_table_size(8), 8u);
  EXPECT_EQ(rss_table_size(9), 16u);
  // Three queues: entries 0, 1, 2, 0.
  EXPECT_EQ(rss_queue_index(0, 3), 0u);
  EXPECT_EQ(rss_queue_index(1, 3), 1u);
  EXPECT_EQ(rss_queue_index(2, 3), 2u);
  EXPECT_EQ(rss_queue_index(3, 3), 0u);
  EXPECT_EQ(rss_queue_index(0xffffffffu, 3), 0u);
  EXPECT_EQ(rss_queue_index(0x12345678u, 1), 0u);
}

TEST(RssHash, DistinctTuplesSpreadOverEveryQueueAndATupleStaysOnOne) {
  constexpr uint32_t kQueues = 4;
  std::map<uint32_t, int> per_queue;
  for (uint16_t port = 5000; port < 5256; ++port) {
    uint32_t h = rss_hash_ipv4_udp(ip(10, 0, 0, 1), ip(10, 0, 0, 2), port, 4791);
    uint32_t q = rss_queue_index(h, kQueues);
    ++per_queue[q];
    EXPECT_EQ(q, rss_queue_index(rss_hash_ipv4_udp(ip(10, 0, 0, 1), ip(10, 0, 0, 2), port, 4791),
                                 kQueues));
  }
  ASSERT_EQ(per_queue.size(), kQueues);
  for (const auto& [q, n] : per_queue)
    EXPECT_GT(n, 256 / int(kQueues) / 2) << "queue " << q;  // roughly even, not exact
}

}  // namespace
}  // namespace daqiri::core
