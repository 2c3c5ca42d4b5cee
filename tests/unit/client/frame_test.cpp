// frame.hpp: Ethernet/IPv4/UDP frames written and parsed.
#include <gtest/gtest.h>

#include "daqiri/frame.hpp"

namespace daqiri::dataplane {
namespace {

TEST(Frame, WriteParseRoundTripWithValidChecksum) {
  std::byte buf[200] = {};
  size_t h = frame::write_udp_headers(buf, {0x7f000001, 1234}, {0x0a000002, 4096}, 100);
  ASSERT_EQ(h, 42u);
  auto f = frame::parse_udp({buf, 142});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->src.port, 1234);
  EXPECT_EQ(f->dst.ipv4, 0x0a000002u);
  EXPECT_EQ(f->payload_offset, 42u);
  EXPECT_EQ(f->payload_length, 100u);
  EXPECT_EQ(frame::internet_checksum(buf + 14, 20), 0);  // a valid header sums to zero
  EXPECT_FALSE(frame::parse_udp({buf, 100}));            // shorter than its IP length
  buf[23] = std::byte{6};                                // TCP
  EXPECT_FALSE(frame::parse_udp({buf, 142}));
}

}  // namespace
}  // namespace daqiri::dataplane
