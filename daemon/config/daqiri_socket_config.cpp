#include "config/daqiri_socket_config.hpp"

#include <charconv>
#include <string>
#include <string_view>

namespace daqiri::config {
namespace {

struct ParsedUri {
  SocketTransport transport;
  core::Endpoint endpoint;
};

// "scheme://a.b.c.d[:port][?engine=ibverbs]". `port_optional`: a RoCE client's local address.
std::optional<ParsedUri> parse_uri(const YamlNode& node, bool port_optional) {
  auto text = node.to_string();
  if (!text) return std::nullopt;
  std::string_view s = *text;
  auto sep = s.find("://");
  if (sep == std::string_view::npos) {
    node.error("\"" + *text + "\" is not an endpoint URI: write udp://, tcp:// or roce://IP:PORT");
    return std::nullopt;
  }
  std::string_view scheme = s.substr(0, sep);
  std::string_view rest = s.substr(sep + 3);
  ParsedUri out{};
  if (scheme == "udp") {
    out.transport = SocketTransport::kUdp;
  } else if (scheme == "tcp") {
    out.transport = SocketTransport::kTcp;
  } else if (scheme == "roce" || scheme == "rdma") {
    out.transport = SocketTransport::kRoce;
  } else {
    node.error("unknown endpoint scheme \"" + std::string(scheme) +
               "\": udp, tcp, roce (or rdma, its older name)");
    return std::nullopt;
  }
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    if (out.transport != SocketTransport::kRoce || query != "engine=ibverbs") {
      node.error("the only query an endpoint takes is ?engine=ibverbs, on roce:// URIs");
      return std::nullopt;
    }
  }
  std::string_view host = rest;
  std::string_view port_text;
  if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port_text = rest.substr(colon + 1);
  }
  auto ip = parse_ipv4(std::string(host));
  if (!ip) {
    node.error("\"" + std::string(host) + "\" is not an IPv4 address");
    return std::nullopt;
  }
  out.endpoint.ipv4 = *ip;
  if (port_text.empty()) {
    if (!port_optional) {
      node.error("\"" + *text + "\" needs a port (1 to 65535)");
      return std::nullopt;
    }
    return out;
  }
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port == 0 ||
      port > 65535) {
    node.error("port \"" + std::string(port_text) + "\" is not 1 to 65535");
    return std::nullopt;
  }
  out.endpoint.port = static_cast<uint16_t>(port);
  return out;
}

// The legacy {side}_ip / {side}_port pair, when either is given.
std::optional<core::Endpoint> read_legacy(YamlMap& map, const std::string& side, bool& bad) {
  auto ip_node = map.get(side + "_ip");
  auto port_node = map.get(side + "_port");
  if (!ip_node && !port_node) return std::nullopt;
  core::Endpoint e;
  if (ip_node) {
    auto text = ip_node->to_string();
    auto ip = text ? parse_ipv4(*text) : std::nullopt;
    if (!ip) {
      if (text) ip_node->error("\"" + *text + "\" is not an IPv4 address");
      bad = true;
      return std::nullopt;
    }
    e.ipv4 = *ip;
  }
  if (port_node) {
    auto port = port_node->to_uint(0, 65535);
    if (!port) {
      bad = true;
      return std::nullopt;
    }
    e.port = static_cast<uint16_t>(*port);
  }
  return e;
}

}  // namespace

std::optional<DaqiriSocketConfig> read_daqiri_socket_config(
    const YamlNode& node, std::optional<SocketTransport> engine_transport) {
  DaqiriSocketConfig out;
  YamlMap map(node);
  bool bad = false;
  if (auto mode = map.require("mode")) {
    auto i = mode->to_choice({"server", "client"});
    if (!i) bad = true;
    out.server = i.value_or(0) == 0;
  } else {
    bad = true;
  }
  std::optional<SocketTransport> transport = engine_transport;
  auto take = [&](std::optional<YamlNode> uri, const char* legacy_side, bool port_optional,
                  std::optional<core::Endpoint>& into) {
    auto legacy = read_legacy(map, legacy_side, bad);
    if (uri && legacy) {
      uri->error(std::string("give either this URI or ") + legacy_side + "_ip/" + legacy_side +
                 "_port, not both");
      bad = true;
      return;
    }
    if (legacy) {
      into = legacy;
      return;
    }
    if (!uri) return;
    auto parsed = parse_uri(*uri, port_optional);
    if (!parsed) {
      bad = true;
      return;
    }
    if (transport && *transport != parsed->transport) {
      uri->error(
          "its scheme names another transport than the interface's other endpoint or "
          "the top-level engine");
      bad = true;
      return;
    }
    transport = parsed->transport;
    into = parsed->endpoint;
  };
  take(map.get("local_addr"), "local", !out.server, out.local);
  take(map.get("remote_addr"), "remote", false, out.remote);
  map.ignore("max_payload_size",
             "daqirid receives a datagram or a stretch of a stream up to the queue region's "
             "buf_size (less 42 header bytes for a datagram; a longer datagram is delivered "
             "truncated and flagged so)");
  map.ignore("max_burst_interval_ms", "daqirid delivers each burst as soon as it is polled");
  map.ignore("min_ipg_ns", "daqirid does not space out socket sends");
  map.ignore("retry_connect_s",
             "a TCP client flow redials after 50 ms, doubling up to 2 s, for as long as it exists");
  map.finish();
  if (bad) return std::nullopt;
  if (!transport) {
    node.error(
        "no transport: write the endpoints as udp://, tcp:// or roce:// URIs "
        "(local_ip/local_port need a top-level engine that implies one)");
    return std::nullopt;
  }
  out.transport = *transport;
  const bool roce = out.transport == SocketTransport::kRoce;
  if (out.server) {
    if (!out.local || out.local->ipv4 == 0 || out.local->port == 0) {
      node.error("a server needs local_addr with an address and a port");
      return std::nullopt;
    }
  } else if (roce) {
    if (out.remote) {
      node.error(
          "a RoCE client's peer is chosen by the application, not in socket_config: "
          "remove remote_addr (with daqirid, add a flow with connect: at runtime)");
      return std::nullopt;
    }
    if (!out.local || out.local->ipv4 == 0) {
      node.error("a RoCE client needs local_addr with its address");
      return std::nullopt;
    }
  } else if (!out.remote || out.remote->ipv4 == 0 || out.remote->port == 0) {
    node.error("a client needs remote_addr with an address and a port");
    return std::nullopt;
  }
  return out;
}

std::optional<RdmaConfig::Transport> read_daqiri_roce_config(const YamlNode& node) {
  YamlMap map(node);
  std::optional<RdmaConfig::Transport> out;
  if (auto mode = map.require("transport_mode")) {
    if (auto i = mode->to_choice({"RC", "UC"})) {
      out = *i == 0 ? RdmaConfig::Transport::kRc : RdmaConfig::Transport::kUc;
    }
  }
  map.finish();
  return out;
}

}  // namespace daqiri::config
