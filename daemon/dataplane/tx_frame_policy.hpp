// What a client may send through a TX queue, checked on the daemon's private copy of the
// frame (never on the client's buffer, which it can still change). `checked`, the default:
// Ethernet/IPv4/UDP with no IP options and no fragment, from the interface's own address and
// an unprivileged source port (what the user's own UDP socket could send). `raw`, which only
// an admin configures per queue: any IPv4 packet, any source.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "config/config.hpp"
#include "daqiri/frame.hpp"

namespace daqiri::dataplane {

struct TxVerdict {
  const char* refused = nullptr;  // why the frame may not go out; null: it may
  uint32_t dst_ipv4 = 0;          // host order
  uint32_t ip_length = 0;         // the IPv4 packet's bytes after the Ethernet header
};

inline constexpr uint16_t kFirstUnprivilegedPort = 1024;
// The bytes a check reads: Ethernet, IPv4 without options, UDP.
inline constexpr size_t kCheckedHeaders = frame::kUdpHeaders;

// `head`: the frame's first min(frame_length, kCheckedHeaders) bytes or more, in memory the
// client cannot write; `frame_length`: the whole frame's.
inline TxVerdict check_tx_frame(std::span<const std::byte> head, size_t frame_length,
                                uint32_t source_ipv4, config::TxPolicy policy) {
  using frame::detail::get16;
  using frame::detail::get32;
  TxVerdict v;
  if (frame_length < frame::kEthHeader + frame::kIpv4Header) return {"shorter than IPv4 headers"};
  const std::byte* p = head.data();
  if (get16(p + 12) != frame::kEtherTypeIpv4) return {"not IPv4"};
  const std::byte* ip = p + frame::kEthHeader;
  uint8_t vihl = std::to_integer<uint8_t>(ip[0]);
  size_t ihl = size_t{vihl & 0xfu} * 4;
  if ((vihl >> 4) != 4 || ihl < frame::kIpv4Header) return {"not IPv4"};
  uint32_t ip_total = get16(ip + 2);
  // Bytes past the IP packet (Ethernet padding) are not sent.
  if (ip_total < ihl || frame::kEthHeader + ip_total > frame_length) {
    return {"IPv4 total length outside the frame"};
  }
  v.dst_ipv4 = get32(ip + 16);
  v.ip_length = ip_total;
  if (policy == config::TxPolicy::kRaw) return v;
  if (ihl != frame::kIpv4Header) return {"IPv4 options"};
  if ((get16(ip + 6) & 0x3fff) != 0) return {"an IPv4 fragment"};
  if (std::to_integer<uint8_t>(ip[9]) != frame::kIpProtoUdp) return {"not UDP"};
  if (get32(ip + 12) != source_ipv4) return {"a source address not the interface's"};
  // From here on ip_total >= 28, so the frame, and `head`, hold all kCheckedHeaders bytes.
  if (ip_total < frame::kIpv4Header + frame::kUdpHeader) {
    return {"a UDP length that is not the packet's"};
  }
  const std::byte* udp = ip + frame::kIpv4Header;
  if (get16(udp + 4) != ip_total - frame::kIpv4Header) {
    return {"a UDP length that is not the packet's"};
  }
  if (get16(udp) < kFirstUnprivilegedPort) return {"a privileged source port"};
  return v;
}

}  // namespace daqiri::dataplane
