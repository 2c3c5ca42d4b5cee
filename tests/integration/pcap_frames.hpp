// Frames as daqiri-gen sends them and classic PCAP files of them: what the DPDK tests replay
// through net_pcap and read back from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "daqiri/frame.hpp"
#include "daqiri/test_pattern.hpp"

namespace daqiri::test {

using Frame = std::vector<std::byte>;

// A daqiri-gen style frame: 10.1.0.1:sport -> 10.1.0.2:dport, the pattern keyed by dport.
inline Frame make_frame(uint16_t sport, uint16_t dport, uint64_t seq, size_t payload) {
  Frame f(frame::kUdpHeaders + payload);
  size_t h = frame::write_udp_headers(f, {0x0a010001, sport}, {0x0a010002, dport}, payload);
  pattern::fill(std::span(f).subspan(h), dport, seq);
  return f;
}

inline void write_pcap(const std::string& path, const std::vector<Frame>& frames) {
  std::ofstream out(path, std::ios::binary);
  auto put32 = [&out](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  auto put16 = [&out](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
  put32(0xa1b2c3d4);  // microsecond timestamps
  put16(2);
  put16(4);
  put32(0);
  put32(0);
  put32(65535);
  put32(1);  // Ethernet
  uint32_t usec = 0;
  for (const auto& f : frames) {
    put32(1);
    put32(usec++);
    put32(static_cast<uint32_t>(f.size()));
    put32(static_cast<uint32_t>(f.size()));
    out.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size()));
  }
}

inline std::vector<Frame> read_pcap(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<Frame> frames;
  char header[24];
  if (!in.read(header, sizeof header)) return frames;
  char rec[16];
  while (in.read(rec, sizeof rec)) {
    uint32_t len = 0;
    std::memcpy(&len, rec + 8, 4);
    Frame f(len);
    if (!in.read(reinterpret_cast<char*>(f.data()), len)) break;
    frames.push_back(std::move(f));
  }
  return frames;
}

// Variations on a frame, for what looks for its payload. Checksums are left as they were: a
// payload search does not check them.
inline Frame with_tag(Frame f, uint16_t tpid) {  // a VLAN tag (VID 5) in front of the type
  std::byte tag[4] = {std::byte(tpid >> 8), std::byte(tpid & 0xff), std::byte{0}, std::byte{5}};
  f.insert(f.begin() + 12, tag, tag + 4);
  return f;
}
inline Frame with_ethertype(Frame f, uint16_t type) {
  f[12] = std::byte(type >> 8);
  f[13] = std::byte(type & 0xff);
  return f;
}
// The IPv4 fields of an untagged frame.
inline Frame with_ipv4_options(Frame f, size_t words) {
  f[frame::kEthHeader] = std::byte(0x40 | (5 + words));
  f.insert(f.begin() + frame::kEthHeader + frame::kIpv4Header, words * 4, std::byte{1});
  return f;
}
inline Frame with_protocol(Frame f, uint8_t protocol) {
  f[frame::kEthHeader + 9] = std::byte{protocol};
  return f;
}
inline Frame as_later_fragment(Frame f) {  // fragment offset 185 (1480 bytes)
  f[frame::kEthHeader + 6] = std::byte{0};
  f[frame::kEthHeader + 7] = std::byte{185};
  return f;
}

// Tunnels as the decap tests name them: 02:00:00:00:00:01 / 192.0.2.1 to 02:00:00:00:00:02 /
// 192.0.2.2, the outer IPv4 header checksummed.
inline constexpr const char* kOuterEthSrc = "02:00:00:00:00:01";
inline constexpr const char* kOuterEthDst = "02:00:00:00:00:02";
inline constexpr uint32_t kOuterIpv4Src = 0xc0000201;  // 192.0.2.1
inline constexpr uint32_t kOuterIpv4Dst = 0xc0000202;
// Outer Ethernet and IPv4 headers (protocol `protocol`) in front of `body`.
inline Frame outer_ipv4(uint8_t protocol, const Frame& body) {
  Frame f(frame::kEthHeader + frame::kIpv4Header);
  const uint8_t macs[12] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1};  // dst, src
  std::memcpy(f.data(), macs, 12);
  frame::detail::put16(f.data() + 12, frame::kEtherTypeIpv4);
  std::byte* ip = f.data() + frame::kEthHeader;
  ip[0] = std::byte{0x45};
  frame::detail::put16(ip + 2, static_cast<uint16_t>(frame::kIpv4Header + body.size()));
  ip[8] = std::byte{64};
  ip[9] = std::byte{protocol};
  frame::detail::put32(ip + 12, kOuterIpv4Src);
  frame::detail::put32(ip + 16, kOuterIpv4Dst);
  frame::detail::put16(ip + 10, frame::internet_checksum(ip, frame::kIpv4Header));
  f.insert(f.end(), body.begin(), body.end());
  return f;
}
inline Frame in_vxlan(const Frame& inner, uint32_t vni, uint16_t udp_src = 49152) {
  Frame body(16);
  frame::detail::put16(body.data(), udp_src);
  frame::detail::put16(body.data() + 2, 4789);
  frame::detail::put16(body.data() + 4, static_cast<uint16_t>(16 + inner.size()));
  body[8] = std::byte{0x08};
  frame::detail::put32(body.data() + 12, vni << 8);
  body.insert(body.end(), inner.begin(), inner.end());
  return outer_ipv4(17, body);
}
// GRE carrying `protocol`: 0x0800, the inner frame's IPv4 packet; 0x6558, the whole frame.
// `key` (0 to 2^32 - 1): a key word follows the base header; negative: none.
inline Frame in_gre(const Frame& inner, uint16_t protocol, int64_t key = -1) {
  Frame body(key >= 0 ? 8 : 4);
  frame::detail::put16(body.data(), key >= 0 ? 0x2000 : 0);
  frame::detail::put16(body.data() + 2, protocol);
  if (key >= 0) frame::detail::put32(body.data() + 4, static_cast<uint32_t>(key));
  auto from = protocol == 0x6558 ? inner.begin() : inner.begin() + frame::kEthHeader;
  body.insert(body.end(), from, inner.end());
  return outer_ipv4(47, body);
}
inline Frame in_nvgre(const Frame& inner, uint32_t tni, uint8_t flow_id) {
  return in_gre(inner, 0x6558, tni << 8 | flow_id);
}
// An eCPRI message of type `type` whose first body word is `id`, `size` body bytes in all.
inline Frame ecpri_frame(uint8_t type, uint16_t id, size_t size) {
  Frame f(frame::kEthHeader + 4 + size, std::byte{0x5a});
  const uint8_t macs[12] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1};
  std::memcpy(f.data(), macs, 12);
  frame::detail::put16(f.data() + 12, 0xaefe);
  f[14] = std::byte{0x10};  // revision 1
  f[15] = std::byte{type};
  frame::detail::put16(f.data() + 16, static_cast<uint16_t>(size));
  frame::detail::put16(f.data() + 18, id);
  return f;
}

// A frame of each kind a payload search meets, and where its UDP payload starts (0: none),
// as abi.h's daqiri_udp_payload_offset() defines it.
inline std::vector<std::pair<Frame, uint16_t>> payload_search_cases(uint64_t seq) {
  Frame udp = make_frame(1000, 7000, seq, 100);
  return {
      {udp, 42},
      {with_tag(udp, 0x8100), 46},
      {with_tag(with_tag(udp, 0x8100), 0x88a8), 50},                   // QinQ
      {with_tag(with_tag(with_tag(udp, 0x8100), 0x8100), 0x88a8), 0},  // a third tag: not read
      {with_ipv4_options(udp, 2), 50},
      {with_protocol(udp, 6), 0},  // TCP
      {as_later_fragment(udp), 0},
      {with_ethertype(udp, 0x86dd), 0},           // not IPv4
      {Frame(udp.begin(), udp.begin() + 40), 0},  // cut inside the UDP header
  };
}

}  // namespace daqiri::test
