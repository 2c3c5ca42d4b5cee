// What a flow matches: UDP ports (single or ranges), IPv4 prefixes and total length, eCPRI
// message types and ids, 32 bits of a UDP payload (a flex item), and the tunnel or VLAN tag
// the frame arrives in (decap). Unset fields match anything. Used by the config parser, the
// control API and the steering tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/decap.hpp"
#include "core/packet_fields.hpp"
#include "daqiri/common/result.hpp"

namespace daqiri::core {

struct PortRange {
  uint16_t first = 0;
  uint16_t last = 0;  // inclusive

  [[nodiscard]] bool overlaps(const PortRange& o) const {
    return first <= o.last && o.first <= last;
  }
  [[nodiscard]] bool contains(uint16_t port) const { return first <= port && port <= last; }
  // "4096" or "4096-4100"
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const PortRange&, const PortRange&) = default;
};

struct Ipv4Prefix {
  uint32_t address = 0;  // host byte order, host bits cleared
  uint8_t length = 32;

  [[nodiscard]] uint32_t mask() const { return length == 0 ? 0 : ~uint32_t{0} << (32 - length); }
  [[nodiscard]] bool overlaps(const Ipv4Prefix& o) const {
    uint32_t m = mask() & o.mask();  // the shorter prefix decides
    return (address & m) == (o.address & m);
  }
  [[nodiscard]] bool contains(uint32_t addr) const { return (addr & mask()) == address; }
  // "10.0.0.1" or "10.0.0.0/24"
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Ipv4Prefix&, const Ipv4Prefix&) = default;
};

// eCPRI over Ethernet (EtherType 0xAEFE): every such frame, or those of one message type, or
// of one type and one PC_ID / RTC_ID (which needs the type to be found).
struct EcpriMatch {
  std::optional<uint8_t> msg_type;
  std::optional<uint16_t> id;
  friend bool operator==(const EcpriMatch&, const EcpriMatch&) = default;
};

// DAQIRI's flex item: UDP datagrams to `udp_dst_port` whose 32 bits at `offset` bytes into the
// payload, read as DAQIRI's DPDK engine hands them to the NIC (the value's bytes in the host's
// little-endian order), equal `value` under `mask`.
struct FlexMatch {
  uint16_t item_id = 0;  // the interface's flex item, by its id
  uint16_t udp_dst_port = 0;
  uint8_t offset = 0;
  uint32_t value = 0;
  uint32_t mask = 0;
  [[nodiscard]] bool matches(const PacketFields& p) const {
    if (p.protocol != PacketFields::kUdp || p.dst_port != udp_dst_port || p.payload_offset == 0)
      return false;
    uint32_t at = uint32_t{p.payload_offset} + offset;
    if (p.length < at + 4) return false;
    uint32_t sample = uint32_t{p.frame[at]} | uint32_t{p.frame[at + 1]} << 8 |
                      uint32_t{p.frame[at + 2]} << 16 | uint32_t{p.frame[at + 3]} << 24;
    return (sample & mask) == (value & mask);
  }
  friend bool operator==(const FlexMatch&, const FlexMatch&) = default;
};

struct FlowMatch {
  std::optional<PortRange> udp_src;
  std::optional<PortRange> udp_dst;
  std::optional<Ipv4Prefix> ipv4_src;
  std::optional<Ipv4Prefix> ipv4_dst;
  std::optional<PortRange> tcp_dst;     // TCP streams to these ports (the daemon listens)
  std::optional<uint16_t> ipv4_length;  // IPv4 total length
  std::optional<EcpriMatch> ecpri;      // instead of the IPv4 fields
  std::optional<FlexMatch> flex;        // instead of the IPv4 fields (DPDK)
  // The frame arrives in this tunnel or VLAN tag (DPDK): the fields above are the inner
  // packet's, and the flow's clients receive the inner frame (core/decap.hpp). Steering
  // decapsulates before it calls matches().
  std::optional<Decap> decap;
  // The queue's catch-all: every frame no other flow of the queue takes, IP or not (DPDK).
  bool any = false;

  [[nodiscard]] bool empty() const {
    return !any && !udp_src && !udp_dst && !ipv4_src && !ipv4_dst && !tcp_dst && !ipv4_length &&
           !ecpri && !flex && !decap;
  }
  // Matches on more than the IPv4 and UDP/TCP fields kernel sockets and NICs' plain rules see.
  [[nodiscard]] bool raw_ethernet() const { return ecpri || flex || decap; }
  [[nodiscard]] bool is_tcp() const { return tcp_dst.has_value(); }
  // True when some packet would match both: steering between them would be ambiguous.
  // A catch-all overlaps nothing (it takes what is left) but another catch-all.
  [[nodiscard]] bool overlaps(const FlowMatch& o) const;
  // Whether a received frame's fields match (software steering). Inline: pollers call it for
  // every frame.
  [[nodiscard]] bool matches(const PacketFields& p) const {
    if (any) return true;
    if (ecpri) [[unlikely]]
      return matches_ecpri(p);
    if (!p.ipv4) return false;
    if (ipv4_length && p.ipv4_length != *ipv4_length) return false;
    if (flex && !flex->matches(p)) return false;
    if (ipv4_src && !ipv4_src->contains(p.src_ip)) return false;
    if (ipv4_dst && !ipv4_dst->contains(p.dst_ip)) return false;
    if (udp_src || udp_dst) {
      if (p.protocol != PacketFields::kUdp) return false;
      if (udp_src && !udp_src->contains(p.src_port)) return false;
      if (udp_dst && !udp_dst->contains(p.dst_port)) return false;
    }
    if (tcp_dst && (p.protocol != PacketFields::kTcp || !tcp_dst->contains(p.dst_port))) {
      return false;
    }
    return true;
  }
  // A decapsulating flow's match on the inner packet (decapsulate()'s fields): with no field of
  // its own, every inner frame.
  [[nodiscard]] bool matches_inner(const PacketFields& p) const {
    if (!udp_src && !udp_dst && !ipv4_src && !ipv4_dst && !tcp_dst && !ipv4_length) return true;
    return matches(p);
  }
  [[nodiscard]] bool matches_ecpri(const PacketFields& p) const {
    if (!p.ecpri) return false;
    if (ecpri->msg_type && p.ecpri_type != *ecpri->msg_type) return false;
    return !ecpri->id || (p.ecpri_has_id && p.ecpri_id == *ecpri->id);
  }
  // "udp_dst=4096 ipv4_dst=10.0.0.0/24"
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const FlowMatch&, const FlowMatch&) = default;
};

// "4096", "4096-4100"; ports 1..65535, first <= last.
Result<PortRange> parse_port_range(std::string_view text);
Result<PortRange> make_port_range(uint64_t first, uint64_t last);
// "10.0.0.1", "10.0.0.0/24"; host bits must be zero.
Result<Ipv4Prefix> parse_ipv4_prefix(std::string_view text);

// A remote TCP endpoint the daemon connects to: "10.0.0.5:6000".
struct Endpoint {
  uint32_t ipv4 = 0;  // host byte order
  uint16_t port = 0;
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};
Result<Endpoint> parse_endpoint(std::string_view text);

// What a flow on an RDMA interface may say: on a server, which peers' connections it takes
// (match any, or ipv4_src); on a client, the endpoint its one connection dials (connect).
Result<> check_rdma_flow(const FlowMatch& match, const std::optional<Endpoint>& connect,
                         bool server);

}  // namespace daqiri::core
