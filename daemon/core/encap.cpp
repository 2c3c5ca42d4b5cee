#include "core/encap.hpp"

#include <cstdio>
#include <cstring>

#include "daqiri/frame.hpp"

namespace daqiri::core {
namespace {

constexpr uint32_t kIpv4 = 20;

void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v & 0xff);
}
void put32(uint8_t* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v & 0xffff));
}

// Outer Ethernet and IPv4 headers for a payload of `payload` bytes of `protocol`; returns the
// bytes written.
uint32_t outer_headers(const Encap& e, uint8_t protocol, uint32_t payload, uint8_t* out) {
  const Decap& t = e.tunnel;
  std::memcpy(out, t.outer_eth_dst.data(), 6);
  std::memcpy(out + 6, t.outer_eth_src.data(), 6);
  put16(out + 12, 0x0800);
  uint8_t* ip = out + kEthernetHeader;
  std::memset(ip, 0, kIpv4);
  ip[0] = 0x45;
  ip[1] = e.tos;
  put16(ip + 2, static_cast<uint16_t>(kIpv4 + payload));
  ip[8] = e.ttl;
  ip[9] = protocol;
  put32(ip + 12, t.outer_ipv4_src);
  put32(ip + 16, t.outer_ipv4_dst);
  put16(ip + 10, frame::internet_checksum(reinterpret_cast<const std::byte*>(ip), kIpv4));
  return kEthernetHeader + kIpv4;
}

// VXLAN's outer source port when none is named: from the inner flow, in the dynamic range, so
// that the network spreads tunnels as it would their flows (RFC 7348).
uint16_t flow_port(const uint8_t* frame, uint32_t head) {
  auto p = PacketFields::parse(reinterpret_cast<const std::byte*>(frame), head);
  uint32_t h = p.src_ip * 0x9e3779b1u ^ p.dst_ip * 0x85ebca6bu ^
               (uint32_t{p.src_port} << 16 | p.dst_port) * 0xc2b2ae35u ^ p.protocol;
  h ^= h >> 16;
  return static_cast<uint16_t>(49152 + h % 16384);
}

}  // namespace

uint32_t Encap::write(const uint8_t* frame, uint32_t head, uint32_t length, uint8_t* out,
                      uint32_t& skip) const {
  skip = 0;
  switch (kind) {
    case Decap::Kind::kVlan: {
      std::memcpy(out, frame, 12);  // the tag goes after the MAC addresses
      put16(out + 12, tpid);
      put16(out + 14, static_cast<uint16_t>(uint32_t{pcp} << 13 | uint32_t{dei & 1u} << 12 |
                                            (vlan_id & 0x0fffu)));
      skip = 12;
      return 16;
    }
    case Decap::Kind::kVxlan: {
      uint32_t at = outer_headers(*this, 17, 16 + length, out);
      uint16_t source = tunnel.outer_udp_src != 0 ? tunnel.outer_udp_src : flow_port(frame, head);
      put16(out + at, source);
      put16(out + at + 2, tunnel.outer_udp_dst);
      put16(out + at + 4, static_cast<uint16_t>(16 + length));
      put16(out + at + 6, 0);  // no UDP checksum, as RFC 7348 allows over IPv4
      put32(out + at + 8, 0x08000000u);
      put32(out + at + 12, tunnel.vni << 8);
      return at + 16;
    }
    case Decap::Kind::kNvgre: {
      uint32_t at = outer_headers(*this, 47, 8 + length, out);
      put16(out + at, 0x2000);
      put16(out + at + 2, Decap::kTransparentEthernet);
      put32(out + at + 4, tunnel.tni << 8 | tunnel.flow_id);
      return at + 8;
    }
    case Decap::Kind::kGre: {
      // An L3 protocol carries the frame's packet, without its Ethernet header.
      if (tunnel.gre_protocol != Decap::kTransparentEthernet) skip = kEthernetHeader;
      uint32_t at = outer_headers(*this, 47, 4 + length - skip, out);
      put16(out + at, 0);
      put16(out + at + 2, tunnel.gre_protocol);
      return at + 4;
    }
  }
  return 0;
}

uint32_t Encap::overhead() const {
  return outer_header_bytes(kind);
}

std::string Encap::to_string() const {
  if (kind != Decap::Kind::kVlan) return tunnel.to_string();
  char text[64];
  std::snprintf(text, sizeof text, "vlan_push vid=%u pcp=%u tpid=0x%04x", unsigned{vlan_id},
                unsigned{pcp}, unsigned{tpid});
  return text;
}

}  // namespace daqiri::core
