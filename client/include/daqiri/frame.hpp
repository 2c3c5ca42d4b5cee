// Ethernet / IPv4 / UDP headers: write them in front of a payload, parse them back. Header-only
// and allocation-free; the daemon and the client library both use it. Multi-byte fields are in
// network byte order on the wire and host order in these structs.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

namespace daqiri::frame {

inline constexpr size_t kEthHeader = 14;
inline constexpr size_t kIpv4Header = 20;
inline constexpr size_t kUdpHeader = 8;
inline constexpr size_t kUdpHeaders = kEthHeader + kIpv4Header + kUdpHeader;  // 42
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint8_t kIpProtoUdp = 17;

using Mac = std::array<uint8_t, 6>;

struct UdpEndpoint {
  uint32_t ipv4 = 0;  // host order: 127.0.0.1 is 0x7f000001
  uint16_t port = 0;
};

struct UdpFrame {
  UdpEndpoint src;
  UdpEndpoint dst;
  size_t payload_offset = 0;
  size_t payload_length = 0;
};

namespace detail {
inline void put16(std::byte* p, uint16_t v) {
  p[0] = std::byte(v >> 8);
  p[1] = std::byte(v & 0xff);
}
inline void put32(std::byte* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v & 0xffff));
}
inline uint16_t get16(const std::byte* p) {
  return static_cast<uint16_t>((std::to_integer<uint16_t>(p[0]) << 8) |
                               std::to_integer<uint16_t>(p[1]));
}
inline uint32_t get32(const std::byte* p) {
  return (uint32_t{get16(p)} << 16) | get16(p + 2);
}
}  // namespace detail

// The Internet checksum (RFC 1071) of `len` bytes.
inline uint16_t internet_checksum(const std::byte* data, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < len; i += 2)
    sum += detail::get16(data + i);
  if (len & 1) sum += std::to_integer<uint32_t>(data[len - 1]) << 8;
  while (sum >> 16)
    sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// Writes the 42 bytes of Ethernet, IPv4 (with its checksum) and UDP headers for a payload of
// `payload_length` bytes that follows them. The UDP checksum is left 0 (allowed over IPv4).
// Returns kUdpHeaders, or 0 when `frame` is shorter than the headers.
inline size_t write_udp_headers(std::span<std::byte> frame, const UdpEndpoint& src,
                                const UdpEndpoint& dst, size_t payload_length,
                                const Mac& src_mac = {}, const Mac& dst_mac = {}) {
  if (frame.size() < kUdpHeaders || payload_length > 65535 - kIpv4Header - kUdpHeader) return 0;
  std::byte* p = frame.data();
  std::memcpy(p, dst_mac.data(), 6);
  std::memcpy(p + 6, src_mac.data(), 6);
  detail::put16(p + 12, kEtherTypeIpv4);
  std::byte* ip = p + kEthHeader;
  ip[0] = std::byte{0x45};  // version 4, 20-byte header
  ip[1] = std::byte{0};
  detail::put16(ip + 2, static_cast<uint16_t>(kIpv4Header + kUdpHeader + payload_length));
  detail::put16(ip + 4, 0);       // id
  detail::put16(ip + 6, 0x4000);  // don't fragment
  ip[8] = std::byte{64};          // ttl
  ip[9] = std::byte{kIpProtoUdp};
  detail::put16(ip + 10, 0);
  detail::put32(ip + 12, src.ipv4);
  detail::put32(ip + 16, dst.ipv4);
  detail::put16(ip + 10, internet_checksum(ip, kIpv4Header));
  std::byte* udp = ip + kIpv4Header;
  detail::put16(udp, src.port);
  detail::put16(udp + 2, dst.port);
  detail::put16(udp + 4, static_cast<uint16_t>(kUdpHeader + payload_length));
  detail::put16(udp + 6, 0);
  return kUdpHeaders;
}

// Parses an Ethernet + IPv4 + UDP frame; nullopt for anything else or inconsistent lengths.
inline std::optional<UdpFrame> parse_udp(std::span<const std::byte> frame) {
  if (frame.size() < kUdpHeaders) return std::nullopt;
  const std::byte* p = frame.data();
  if (detail::get16(p + 12) != kEtherTypeIpv4) return std::nullopt;
  const std::byte* ip = p + kEthHeader;
  if ((std::to_integer<uint8_t>(ip[0]) >> 4) != 4) return std::nullopt;
  size_t ihl = (std::to_integer<size_t>(ip[0]) & 0xf) * 4;
  if (ihl < kIpv4Header || std::to_integer<uint8_t>(ip[9]) != kIpProtoUdp) return std::nullopt;
  size_t ip_total = detail::get16(ip + 2);
  if (ip_total < ihl + kUdpHeader || kEthHeader + ip_total > frame.size()) return std::nullopt;
  const std::byte* udp = ip + ihl;
  size_t udp_len = detail::get16(udp + 4);
  if (udp_len < kUdpHeader || udp_len > ip_total - ihl) return std::nullopt;
  UdpFrame f;
  f.src = {detail::get32(ip + 12), detail::get16(udp)};
  f.dst = {detail::get32(ip + 16), detail::get16(udp + 2)};
  f.payload_offset = kEthHeader + ihl + kUdpHeader;
  f.payload_length = udp_len - kUdpHeader;
  return f;
}

}  // namespace daqiri::frame
