#include "core/decap.hpp"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

namespace daqiri::core {
namespace {

constexpr uint8_t kProtoUdp = 17;
constexpr uint8_t kProtoGre = 47;

uint16_t u16(const uint8_t* f, uint32_t at) {
  return static_cast<uint16_t>(f[at] << 8 | f[at + 1]);
}
uint32_t u24(const uint8_t* f, uint32_t at) {
  return uint32_t{f[at]} << 16 | uint32_t{f[at + 1]} << 8 | f[at + 2];
}
uint32_t u32(const uint8_t* f, uint32_t at) {
  return uint32_t{u16(f, at)} << 16 | u16(f, at + 2);
}

// The size of a well-formed, unfragmented IPv4 header at `at`, or 0.
uint32_t ipv4_header(const uint8_t* f, uint32_t length, uint32_t at) {
  if (length < at + 20 || (f[at] >> 4) != 4) return 0;
  uint32_t ihl = uint32_t(f[at] & 0x0f) * 4;
  if (ihl < 20 || length < at + ihl) return 0;
  if ((u16(f, at + 6) & 0x3fff) != 0) return 0;  // a fragment: the tunnel header is not whole
  return ihl;
}

std::string ipv4_text(uint32_t host_order) {
  in_addr a{htonl(host_order)};
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

// A tunnel's inner Ethernet frame at `at`: the whole of it is delivered.
std::optional<Decapsulation> inner_ethernet(const uint8_t* f, uint32_t length, uint32_t at) {
  if (length < at + kEthernetHeader) return std::nullopt;
  Decapsulation d;
  d.strip = at;
  d.inner = PacketFields::parse(reinterpret_cast<const std::byte*>(f + at), length - at);
  return d;
}

}  // namespace

std::optional<Decapsulation> Decap::decapsulate(const uint8_t* f, uint32_t length) const {
  if (kind == Kind::kVlan) {
    if (length < 18) return std::nullopt;
    uint16_t tpid = u16(f, 12);
    if (tpid != 0x8100 && tpid != 0x88a8) return std::nullopt;
    Decapsulation d;
    d.strip = 4;
    d.move_macs = true;
    // The delivered frame's type is the one after the tag; the MAC bytes are never read.
    d.inner = PacketFields::parse(reinterpret_cast<const std::byte*>(f + 4), length - 4);
    return d;
  }
  if (length < kEthernetHeader || std::memcmp(f, outer_eth_dst.data(), 6) != 0 ||
      std::memcmp(f + 6, outer_eth_src.data(), 6) != 0 || u16(f, 12) != 0x0800) {
    return std::nullopt;
  }
  uint32_t ihl = ipv4_header(f, length, kEthernetHeader);
  if (ihl == 0 || u32(f, kEthernetHeader + 12) != outer_ipv4_src ||
      u32(f, kEthernetHeader + 16) != outer_ipv4_dst) {
    return std::nullopt;
  }
  const uint8_t protocol = f[kEthernetHeader + 9];
  const uint32_t l4 = kEthernetHeader + ihl;
  switch (kind) {
    case Kind::kVxlan: {
      if (protocol != kProtoUdp || length < l4 + 16) return std::nullopt;
      if (u16(f, l4 + 2) != outer_udp_dst) return std::nullopt;
      if (outer_udp_src != 0 && u16(f, l4) != outer_udp_src) return std::nullopt;
      if (f[l4 + 8] != 0x08 || u24(f, l4 + 12) != vni) return std::nullopt;  // I flag, VNI
      return inner_ethernet(f, length, l4 + 16);
    }
    case Kind::kNvgre: {
      // Key present, nothing else, version 0; Transparent Ethernet Bridging; TNI and FlowID.
      if (protocol != kProtoGre || length < l4 + 8) return std::nullopt;
      if (u16(f, l4) != 0x2000 || u16(f, l4 + 2) != kTransparentEthernet) return std::nullopt;
      if (u24(f, l4 + 4) != tni || f[l4 + 7] != flow_id) return std::nullopt;
      return inner_ethernet(f, length, l4 + 8);
    }
    case Kind::kGre: {
      if (protocol != kProtoGre || length < l4 + 4) return std::nullopt;
      uint16_t flags = u16(f, l4);
      // Version 0 without source routing; checksum, key and sequence number words may follow.
      if ((flags & 0x4007) != 0 || u16(f, l4 + 2) != gre_protocol) return std::nullopt;
      uint32_t inner = l4 + 4 + ((flags & 0x8000) ? 4 : 0) + ((flags & 0x2000) ? 4 : 0) +
                       ((flags & 0x1000) ? 4 : 0);
      if (gre_protocol == kTransparentEthernet) return inner_ethernet(f, length, inner);
      if (length < inner) return std::nullopt;
      // An L3 tunnel: the inner packet gets the outer frame's MAC addresses and its own type.
      Decapsulation d;
      d.strip = inner - kEthernetHeader;
      d.move_macs = true;
      d.ethertype = gre_protocol;
      const uint8_t* delivered = f + d.strip;
      uint32_t rest = length - d.strip;
      if (gre_protocol == 0x0800 && ipv4_header(delivered, rest, kEthernetHeader) != 0) {
        d.inner = PacketFields::parse_ipv4(delivered, rest, kEthernetHeader);
      } else {
        d.inner.frame = delivered;
        d.inner.length = rest;
      }
      return d;
    }
    case Kind::kVlan:
      break;
  }
  return std::nullopt;
}

bool Decap::overlaps(const Decap& o) const {
  if (kind == Kind::kVlan || o.kind == Kind::kVlan) return kind == o.kind;  // any tag
  if (outer_eth_src != o.outer_eth_src || outer_eth_dst != o.outer_eth_dst ||
      outer_ipv4_src != o.outer_ipv4_src || outer_ipv4_dst != o.outer_ipv4_dst) {
    return false;
  }
  auto gre_takes_nvgre = [](const Decap& gre) { return gre.gre_protocol == kTransparentEthernet; };
  if (kind != o.kind) {
    if (kind == Kind::kGre && o.kind == Kind::kNvgre) return gre_takes_nvgre(*this);
    if (kind == Kind::kNvgre && o.kind == Kind::kGre) return gre_takes_nvgre(o);
    return false;
  }
  switch (kind) {
    case Kind::kVxlan:
      return vni == o.vni && outer_udp_dst == o.outer_udp_dst &&
             (outer_udp_src == 0 || o.outer_udp_src == 0 || outer_udp_src == o.outer_udp_src);
    case Kind::kGre:
      return gre_protocol == o.gre_protocol;
    case Kind::kNvgre:
      return tni == o.tni && flow_id == o.flow_id;
    case Kind::kVlan:
      break;
  }
  return true;
}

std::string Decap::to_string() const {
  std::string out = decap_kind_name(kind);
  if (kind == Kind::kVlan) return out;
  char text[64];
  switch (kind) {
    case Kind::kVxlan:
      std::snprintf(text, sizeof text, " vni=%u port=%u", vni, unsigned{outer_udp_dst});
      break;
    case Kind::kGre:
      std::snprintf(text, sizeof text, " protocol=0x%04x", unsigned{gre_protocol});
      break;
    case Kind::kNvgre:
      std::snprintf(text, sizeof text, " tni=%u flow_id=%u", tni, unsigned{flow_id});
      break;
    case Kind::kVlan:
      text[0] = '\0';
      break;
  }
  return out + text + " from " + ipv4_text(outer_ipv4_src) + " to " + ipv4_text(outer_ipv4_dst);
}

void apply(const Decapsulation& d, uint8_t* frame) {
  if (d.move_macs) std::memmove(frame + d.strip, frame, 12);
  if (d.ethertype != 0) {
    frame[d.strip + 12] = static_cast<uint8_t>(d.ethertype >> 8);
    frame[d.strip + 13] = static_cast<uint8_t>(d.ethertype & 0xff);
  }
}

uint32_t outer_header_bytes(Decap::Kind kind) {
  switch (kind) {
    case Decap::Kind::kVlan:
      return 4;
    case Decap::Kind::kVxlan:
      return kEthernetHeader + 20 + 16;  // IPv4, UDP, VXLAN
    case Decap::Kind::kNvgre:
      return kEthernetHeader + 20 + 8;
    case Decap::Kind::kGre:
      return kEthernetHeader + 20 + 4;
  }
  return 0;
}

const char* decap_kind_name(Decap::Kind kind) {
  switch (kind) {
    case Decap::Kind::kVlan:
      return "vlan_pop";
    case Decap::Kind::kVxlan:
      return "vxlan";
    case Decap::Kind::kGre:
      return "gre";
    case Decap::Kind::kNvgre:
      return "nvgre";
  }
  return "?";
}

}  // namespace daqiri::core
