// TX encapsulation (VLAN push, VXLAN, GRE, NVGRE): the headers written are exactly what the
// tunnel builders of the tests write, and a decapsulating flow of the same fields gives back
// the frame sent.
#include <gtest/gtest.h>

#include "core/encap.hpp"
#include "pcap_frames.hpp"
#include "test_tunnel.hpp"

namespace daqiri::core {
namespace {

using test::Frame;

Encap encap_tunnel(Decap::Kind kind) {
  Encap e;
  e.kind = kind;
  e.tunnel = test_tunnel(kind);
  return e;
}

// What goes on the wire for `frame` under `e`: the headers, then the frame from `skip` on.
Frame sent(const Encap& e, const Frame& frame) {
  uint8_t headers[Encap::kMaxHeaders];
  uint32_t skip = 0;
  const auto* f = reinterpret_cast<const uint8_t*>(frame.data());
  auto size = static_cast<uint32_t>(frame.size());
  uint32_t n = e.write(f, std::min<uint32_t>(size, 128), size, headers, skip);
  EXPECT_LE(n, e.overhead() + skip);
  Frame out(reinterpret_cast<const std::byte*>(headers),
            reinterpret_cast<const std::byte*>(headers) + n);
  out.insert(out.end(), frame.begin() + skip, frame.end());
  return out;
}

// The frame back, by a decapsulating flow of the same fields.
Frame received(const Decap& d, Frame wire) {
  auto got = d.decapsulate(reinterpret_cast<const uint8_t*>(wire.data()),
                           static_cast<uint32_t>(wire.size()));
  EXPECT_TRUE(got);
  if (!got) return {};
  apply(*got, reinterpret_cast<uint8_t*>(wire.data()));
  return Frame(wire.begin() + got->strip, wire.end());
}

TEST(Encap, VxlanWritesTheOuterHeadersAndTheWholeFrame) {
  Frame frame = test::make_frame(1000, 7000, 5, 300);
  Encap e = encap_tunnel(Decap::Kind::kVxlan);
  e.tunnel.vni = 100;
  e.tunnel.outer_udp_src = 49152;
  EXPECT_EQ(sent(e, frame), test::in_vxlan(frame, 100, 49152));
  EXPECT_EQ(received(e.tunnel, sent(e, frame)), frame);
  // No source port named: one of the dynamic range, the same for the same inner flow.
  e.tunnel.outer_udp_src = 0;
  Frame a = sent(e, frame), b = sent(e, test::make_frame(1000, 7000, 6, 32));
  uint16_t port =
      static_cast<uint16_t>(std::to_integer<int>(a[34]) << 8 | std::to_integer<int>(a[35]));
  EXPECT_GE(port, 49152);
  EXPECT_EQ(a[34], b[34]);
  EXPECT_EQ(a[35], b[35]);
}

TEST(Encap, GreOfIpv4CarriesThePacketAndTransparentEthernetTheFrame) {
  Frame frame = test::make_frame(1000, 7002, 1, 200);
  Encap e = encap_tunnel(Decap::Kind::kGre);
  EXPECT_EQ(sent(e, frame), test::in_gre(frame, 0x0800));
  Frame back = received(e.tunnel, sent(e, frame));
  Frame want = frame;  // the outer MAC addresses, the frame's packet
  std::memcpy(want.data(), test::outer_ipv4(47, {}).data(), 12);
  EXPECT_EQ(back, want);
  e.tunnel.gre_protocol = Decap::kTransparentEthernet;
  EXPECT_EQ(sent(e, frame), test::in_gre(frame, 0x6558));
  EXPECT_EQ(received(e.tunnel, sent(e, frame)), frame);
}

TEST(Encap, NvgreCarriesTniAndFlowId) {
  Frame frame = test::make_frame(1000, 7003, 2, 64);
  Encap e = encap_tunnel(Decap::Kind::kNvgre);
  e.tunnel.tni = 0xabcdef;
  e.tunnel.flow_id = 3;
  EXPECT_EQ(sent(e, frame), test::in_nvgre(frame, 0xabcdef, 3));
  EXPECT_EQ(received(e.tunnel, sent(e, frame)), frame);
}

TEST(Encap, VlanPushPutsTheTagAfterTheAddresses) {
  Frame frame = test::make_frame(1000, 7001, 3, 100);
  Encap e;
  e.vlan_id = 5;
  EXPECT_EQ(sent(e, frame), test::with_tag(frame, 0x8100));
  EXPECT_EQ(received(Decap{}, sent(e, frame)), frame);
  e.pcp = 5;
  e.dei = 1;
  e.tpid = 0x88a8;
  Frame tagged = sent(e, frame);
  EXPECT_EQ(std::to_integer<int>(tagged[12]), 0x88);
  EXPECT_EQ(std::to_integer<int>(tagged[13]), 0xa8);
  EXPECT_EQ(std::to_integer<int>(tagged[14]), 0xb0);  // PCP 5, DEI 1, VID 5
  EXPECT_EQ(std::to_integer<int>(tagged[15]), 0x05);
}

}  // namespace
}  // namespace daqiri::core
