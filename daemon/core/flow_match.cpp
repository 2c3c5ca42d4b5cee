#include "core/flow_match.hpp"

#include <arpa/inet.h>

#include <cstdio>

#include "daqiri/common/match_text.hpp"

namespace daqiri::core {
namespace {

template <typename Dim>
bool dims_overlap(const std::optional<Dim>& a, const std::optional<Dim>& b) {
  return !a || !b || a->overlaps(*b);
}

template <typename T>
bool values_overlap(const std::optional<T>& a, const std::optional<T>& b) {
  return !a || !b || *a == *b;
}

bool flex_overlap(const std::optional<FlexMatch>& a, const std::optional<FlexMatch>& b) {
  if (!a || !b || a->udp_dst_port != b->udp_dst_port || a->offset != b->offset) return true;
  return ((a->value ^ b->value) & a->mask & b->mask) == 0;
}

}  // namespace

std::string PortRange::to_string() const {
  return first == last ? std::to_string(first) : std::to_string(first) + '-' + std::to_string(last);
}

std::string Ipv4Prefix::to_string() const {
  in_addr a{htonl(address)};
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  std::string out(buf);
  if (length != 32) out += '/' + std::to_string(length);
  return out;
}

bool FlowMatch::overlaps(const FlowMatch& o) const {
  if (any || o.any) return any && o.any;
  // Decapsulating flows are tried before the others: what their outer headers match is theirs.
  if (decap.has_value() != o.decap.has_value()) return false;
  if (decap && !decap->overlaps(*o.decap)) return false;
  if (ecpri.has_value() != o.ecpri.has_value()) return false;  // not IPv4 at all
  if (ecpri)
    return values_overlap(ecpri->msg_type, o.ecpri->msg_type) &&
           values_overlap(ecpri->id, o.ecpri->id);
  if (is_tcp() != o.is_tcp()) return false;  // a UDP datagram is never a TCP stream
  return dims_overlap(udp_src, o.udp_src) && dims_overlap(udp_dst, o.udp_dst) &&
         dims_overlap(ipv4_src, o.ipv4_src) && dims_overlap(ipv4_dst, o.ipv4_dst) &&
         dims_overlap(tcp_dst, o.tcp_dst) && values_overlap(ipv4_length, o.ipv4_length) &&
         flex_overlap(flex, o.flex);
}

std::string FlowMatch::to_string() const {
  if (any) return "any";
  std::string out;
  auto add = [&out](const char* key, const std::string& value) {
    if (!out.empty()) out += ' ';
    out += key;
    out += '=';
    out += value;
  };
  if (udp_src) add("udp_src", udp_src->to_string());
  if (udp_dst) add("udp_dst", udp_dst->to_string());
  if (ipv4_src) add("ipv4_src", ipv4_src->to_string());
  if (ipv4_dst) add("ipv4_dst", ipv4_dst->to_string());
  if (tcp_dst) add("tcp_dst", tcp_dst->to_string());
  if (ipv4_length) add("ipv4_len", std::to_string(*ipv4_length));
  if (ecpri) {
    add("ecpri", ecpri->msg_type ? "type " + std::to_string(*ecpri->msg_type) : "any");
    if (ecpri->id) out += " id " + std::to_string(*ecpri->id);
  }
  if (flex) {
    char text[64];
    std::snprintf(text, sizeof text, "%u val=0x%08x mask=0x%08x", unsigned{flex->item_id},
                  flex->value, flex->mask);
    add("flex_item", text);
  }
  if (decap) add("decap", decap->to_string());
  return out.empty() ? "any" : out;
}

Result<PortRange> make_port_range(uint64_t first, uint64_t last) {
  if (first < 1 || first > 65535 || last < 1 || last > 65535) {
    return fail(ErrorCode::kInvalidArgument, "UDP ports are 1 to 65535");
  }
  if (first > last) {
    return fail(ErrorCode::kInvalidArgument, "a port range runs from low to high (" +
                                                 std::to_string(first) + " > " +
                                                 std::to_string(last) + ")");
  }
  return PortRange{static_cast<uint16_t>(first), static_cast<uint16_t>(last)};
}

Result<PortRange> parse_port_range(std::string_view text) {
  auto r = match_text::port_range(text);
  if (!r) {
    return fail(ErrorCode::kInvalidArgument,
                "expected a UDP port or a range like 4096-4100, got \"" + std::string(text) + "\"");
  }
  return make_port_range(r->first, r->last);
}

Result<Ipv4Prefix> parse_ipv4_prefix(std::string_view text) {
  auto bad = [&text](const std::string& why) {
    return fail(ErrorCode::kInvalidArgument,
                "expected an IPv4 address or prefix like 10.0.0.0/24, got \"" + std::string(text) +
                    "\"" + (why.empty() ? "" : " (" + why + ")"));
  };
  auto split = match_text::ipv4_prefix(text);
  uint64_t length = split ? split->length.value_or(32) : 0;
  if (!split || length > 32) return bad("prefix length must be 0 to 32");
  std::string addr(split->address);
  in_addr a{};
  if (inet_pton(AF_INET, addr.c_str(), &a) != 1) return bad("");
  Ipv4Prefix p{ntohl(a.s_addr), static_cast<uint8_t>(length)};
  if ((p.address & ~p.mask()) != 0) return bad("host bits set after the prefix");
  return p;
}

std::string Endpoint::to_string() const {
  Ipv4Prefix p{ipv4, 32};
  return p.to_string() + ':' + std::to_string(port);
}

Result<Endpoint> parse_endpoint(std::string_view text) {
  auto colon = text.rfind(':');
  auto bad = [&text] {
    return fail(ErrorCode::kInvalidArgument,
                "expected IPV4:PORT like 10.0.0.5:6000, got \"" + std::string(text) + "\"");
  };
  if (colon == std::string_view::npos) return bad();
  auto addr = parse_ipv4_prefix(text.substr(0, colon));
  uint64_t port = 0;
  if (!addr || addr->length != 32 || !match_text::whole_number(text.substr(colon + 1), port) ||
      port < 1 || port > 65535) {
    return bad();
  }
  return Endpoint{addr->address, static_cast<uint16_t>(port)};
}

Result<> check_rdma_flow(const FlowMatch& match, const std::optional<Endpoint>& connect,
                         bool server) {
  if (!server) {
    if (connect) return {};
    return fail(ErrorCode::kInvalidArgument,
                "a flow on an RDMA client interface connects to an endpoint: connect: HOST:PORT",
                "connect");
  }
  if (connect) {
    return fail(ErrorCode::kInvalidArgument,
                "an RDMA server interface takes connections; connect is for client interfaces",
                "connect");
  }
  if (match.udp_src || match.udp_dst || match.ipv4_dst || match.tcp_dst || match.ipv4_length ||
      match.raw_ethernet() || (!match.any && !match.ipv4_src)) {
    return fail(ErrorCode::kInvalidArgument,
                "a flow on an RDMA server interface matches its peers: any: true, or ipv4_src",
                "match");
  }
  return {};
}

}  // namespace daqiri::core
