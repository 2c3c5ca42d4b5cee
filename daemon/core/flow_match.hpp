// What a flow matches: UDP ports (single or ranges) and IPv4 prefixes. Unset fields match
// anything. Used by the config parser, the control API and, later, the steering tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

struct FlowMatch {
  std::optional<PortRange> udp_src;
  std::optional<PortRange> udp_dst;
  std::optional<Ipv4Prefix> ipv4_src;
  std::optional<Ipv4Prefix> ipv4_dst;
  std::optional<PortRange> tcp_dst;  // TCP streams to these ports (the daemon listens)
  // The queue's catch-all: every frame no other flow of the queue takes, IP or not (DPDK).
  bool any = false;

  [[nodiscard]] bool empty() const {
    return !any && !udp_src && !udp_dst && !ipv4_src && !ipv4_dst && !tcp_dst;
  }
  [[nodiscard]] bool is_tcp() const { return tcp_dst.has_value(); }
  // True when some packet would match both: steering between them would be ambiguous.
  // A catch-all overlaps nothing (it takes what is left) but another catch-all.
  [[nodiscard]] bool overlaps(const FlowMatch& o) const;
  // Whether a received frame's fields match (software steering). Inline: pollers call it for
  // every frame.
  [[nodiscard]] bool matches(const PacketFields& p) const {
    if (any) return true;
    if (!p.ipv4) return false;
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
