// Decapsulation (VLAN pop, VXLAN, GRE, NVGRE) and the raw-Ethernet matches (eCPRI, flex items,
// IPv4 length) on frames built byte by byte: what is delivered is exactly the inner frame.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/decap.hpp"
#include "core/flow_match.hpp"
#include "pcap_frames.hpp"
#include "test_tunnel.hpp"

namespace daqiri::core {
namespace {

using test::Frame;

Decap decap_tunnel(Decap::Kind kind) {
  return test_tunnel(kind);
}

const uint8_t* bytes(const Frame& f) {
  return reinterpret_cast<const uint8_t*>(f.data());
}

// What a poller delivers of `outer` after `d`: applied to a copy, from d.strip on.
Frame delivered(Frame outer, const Decapsulation& d) {
  apply(d, reinterpret_cast<uint8_t*>(outer.data()));
  return Frame(outer.begin() + d.strip, outer.end());
}

TEST(Decap, VxlanDeliversTheInnerFrameWhole) {
  Frame inner = test::make_frame(1000, 7000, 3, 200);
  Frame outer = test::in_vxlan(inner, 100);
  Decap d = decap_tunnel(Decap::Kind::kVxlan);
  d.vni = 100;
  auto got = d.decapsulate(bytes(outer), static_cast<uint32_t>(outer.size()));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->strip, 50u);
  EXPECT_EQ(delivered(outer, *got), inner);
  EXPECT_TRUE(got->inner.ipv4);
  EXPECT_EQ(got->inner.dst_port, 7000);
  EXPECT_EQ(got->inner.payload_offset, 42);
  // Another VNI, source port, destination port or outer address: not this tunnel's.
  d.vni = 101;
  EXPECT_FALSE(d.decapsulate(bytes(outer), static_cast<uint32_t>(outer.size())));
  d.vni = 100;
  d.outer_udp_src = 1234;
  EXPECT_FALSE(d.decapsulate(bytes(outer), static_cast<uint32_t>(outer.size())));
  d.outer_udp_src = 49152;
  EXPECT_TRUE(d.decapsulate(bytes(outer), static_cast<uint32_t>(outer.size())));
  d.outer_udp_dst = 4790;
  EXPECT_FALSE(d.decapsulate(bytes(outer), static_cast<uint32_t>(outer.size())));
  d.outer_udp_dst = 4789;
  d.outer_ipv4_dst = test::kOuterIpv4Dst + 1;
  EXPECT_FALSE(d.decapsulate(bytes(outer), static_cast<uint32_t>(outer.size())));
  d.outer_ipv4_dst = test::kOuterIpv4Dst;
  d.outer_eth_src[5] = 9;
  EXPECT_FALSE(d.decapsulate(bytes(outer), static_cast<uint32_t>(outer.size())));
}

TEST(Decap, NeverReadsPastTheFrame) {
  Frame outer = test::in_vxlan(test::make_frame(1000, 7000, 0, 32), 7);
  Decap d = decap_tunnel(Decap::Kind::kVxlan);
  d.vni = 7;
  for (uint32_t cut = 0; cut < 50 + 14; ++cut)
    EXPECT_FALSE(d.decapsulate(bytes(outer), cut)) << cut;
  EXPECT_TRUE(d.decapsulate(bytes(outer), 50 + 14));
}

TEST(Decap, GreOfIpv4KeepsTheOuterMacsAndTakesTheInnerPacket) {
  Frame inner = test::make_frame(1000, 7001, 9, 300);
  for (int64_t key : {-1, 77}) {
    Frame outer = test::in_gre(inner, 0x0800, key);
    Decap d = decap_tunnel(Decap::Kind::kGre);
    auto got = d.decapsulate(bytes(outer), static_cast<uint32_t>(outer.size()));
    ASSERT_TRUE(got);
    Frame want = inner;  // the outer frame's addresses, the inner packet
    std::memcpy(want.data(), outer.data(), 12);
    EXPECT_EQ(delivered(outer, *got), want);
    EXPECT_EQ(got->inner.dst_port, 7001);
    EXPECT_EQ(got->inner.payload_offset, 42);
  }
  Decap teb = decap_tunnel(Decap::Kind::kGre);  // another protocol than the frame's
  teb.gre_protocol = 0x6558;
  Frame outer = test::in_gre(inner, 0x0800);
  EXPECT_FALSE(teb.decapsulate(bytes(outer), static_cast<uint32_t>(outer.size())));
  Frame bridged = test::in_gre(inner, 0x6558);
  auto got = teb.decapsulate(bytes(bridged), static_cast<uint32_t>(bridged.size()));
  ASSERT_TRUE(got);
  EXPECT_EQ(delivered(bridged, *got), inner);
}

TEST(Decap, NvgreMatchesItsTniAndFlowId) {
  Frame inner = test::make_frame(1000, 7002, 1, 64);
  Frame outer = test::in_nvgre(inner, 0x123456, 9);
  Decap d = decap_tunnel(Decap::Kind::kNvgre);
  d.tni = 0x123456;
  d.flow_id = 9;
  auto got = d.decapsulate(bytes(outer), static_cast<uint32_t>(outer.size()));
  ASSERT_TRUE(got);
  EXPECT_EQ(delivered(outer, *got), inner);
  d.flow_id = 8;
  EXPECT_FALSE(d.decapsulate(bytes(outer), static_cast<uint32_t>(outer.size())));
  d.flow_id = 9;
  d.tni = 0x123457;
  EXPECT_FALSE(d.decapsulate(bytes(outer), static_cast<uint32_t>(outer.size())));
}

TEST(Decap, VlanPopTakesTheOuterTagAndKeepsAnInnerOne) {
  Frame plain = test::make_frame(1000, 7003, 4, 100);
  Decap pop;
  EXPECT_FALSE(pop.decapsulate(bytes(plain), static_cast<uint32_t>(plain.size())));
  Frame tagged = test::with_tag(plain, 0x8100);
  auto got = pop.decapsulate(bytes(tagged), static_cast<uint32_t>(tagged.size()));
  ASSERT_TRUE(got);
  EXPECT_EQ(delivered(tagged, *got), plain);
  EXPECT_EQ(got->inner.payload_offset, 42);
  Frame qinq = test::with_tag(tagged, 0x88a8);
  got = pop.decapsulate(bytes(qinq), static_cast<uint32_t>(qinq.size()));
  ASSERT_TRUE(got);
  EXPECT_EQ(delivered(qinq, *got), tagged);
  EXPECT_EQ(got->inner.payload_offset, 46);
}

TEST(Decap, TunnelsOverlapOnlyWhereOneFrameCouldBeBoth) {
  Decap a = decap_tunnel(Decap::Kind::kVxlan), b = a;
  a.vni = 1;
  b.vni = 2;
  EXPECT_FALSE(a.overlaps(b));
  b.vni = 1;
  EXPECT_TRUE(a.overlaps(b));
  b.outer_udp_src = 5;  // a takes any source port
  EXPECT_TRUE(a.overlaps(b));
  Decap gre = decap_tunnel(Decap::Kind::kGre), nvgre = decap_tunnel(Decap::Kind::kNvgre);
  EXPECT_FALSE(gre.overlaps(nvgre));
  gre.gre_protocol = Decap::kTransparentEthernet;
  EXPECT_TRUE(gre.overlaps(nvgre));
  EXPECT_FALSE(gre.overlaps(a));
  EXPECT_TRUE(Decap{}.overlaps(Decap{}));
  EXPECT_FALSE(Decap{}.overlaps(a));
}

TEST(RawEthernetMatch, EcpriByTypeAndId) {
  Frame f = test::ecpri_frame(2, 0x0102, 20);
  auto p = PacketFields::parse(f.data(), static_cast<uint32_t>(f.size()));
  EXPECT_FALSE(p.ipv4);
  ASSERT_TRUE(p.ecpri);
  EXPECT_EQ(p.ecpri_type, 2);
  EXPECT_EQ(p.ecpri_id, 0x0102);
  FlowMatch all;
  all.ecpri = EcpriMatch{};
  EXPECT_TRUE(all.matches(p));
  FlowMatch rtc = all;
  rtc.ecpri->msg_type = 2;
  rtc.ecpri->id = 0x0102;
  EXPECT_TRUE(rtc.matches(p));
  rtc.ecpri->id = 0x0103;
  EXPECT_FALSE(rtc.matches(p));
  FlowMatch iq = all;
  iq.ecpri->msg_type = 0;
  EXPECT_FALSE(iq.matches(p));
  EXPECT_FALSE(iq.overlaps(rtc));
  EXPECT_TRUE(all.overlaps(rtc));
  // A UDP frame is not eCPRI, and an eCPRI frame matches no UDP flow.
  Frame udp = test::make_frame(1, 2, 0, 30);
  EXPECT_FALSE(all.matches(PacketFields::parse(udp.data(), static_cast<uint32_t>(udp.size()))));
  FlowMatch port;
  port.udp_dst = PortRange{2, 2};
  EXPECT_FALSE(port.matches(p));
  EXPECT_FALSE(port.overlaps(all));
}

TEST(RawEthernetMatch, FlexItemReadsFourPayloadBytesAsDaqiriDoes) {
  Frame f = test::make_frame(1000, 4791, 0, 64);
  const uint8_t sample[4] = {0x11, 0x22, 0x33, 0x44};
  std::memcpy(f.data() + 42 + 8, sample, 4);
  auto p = PacketFields::parse(f.data(), static_cast<uint32_t>(f.size()));
  FlowMatch m;
  m.flex = FlexMatch{1, 4791, 8, 0x44332211, 0xffffffff};
  EXPECT_TRUE(m.matches(p));
  m.flex->value = 0x00002211;
  EXPECT_FALSE(m.matches(p));
  m.flex->mask = 0x0000ffff;
  EXPECT_TRUE(m.matches(p));
  m.flex->udp_dst_port = 4792;
  EXPECT_FALSE(m.matches(p));
  m.flex->udp_dst_port = 4791;
  m.flex->offset = 28;  // 64 payload bytes hold it
  m.flex->mask = 0;
  EXPECT_TRUE(m.matches(p));
  Frame short_frame(f.begin(), f.begin() + 42 + 30);
  EXPECT_FALSE(m.matches(PacketFields::parse(short_frame.data(), 42 + 30)));
  FlowMatch other = m;
  other.flex->mask = 0xff;
  other.flex->value = 1;
  m.flex->mask = 0xff;
  m.flex->value = 2;
  EXPECT_FALSE(m.overlaps(other));
}

TEST(RawEthernetMatch, Ipv4LengthIsTheTotalLength) {
  Frame f = test::make_frame(1000, 7000, 0, 100);  // 20 + 8 + 100
  auto p = PacketFields::parse(f.data(), static_cast<uint32_t>(f.size()));
  FlowMatch m;
  m.ipv4_length = 128;
  EXPECT_TRUE(m.matches(p));
  m.ipv4_length = 129;
  EXPECT_FALSE(m.matches(p));
}

}  // namespace
}  // namespace daqiri::core
