// The outer headers the tunnel builders of pcap_frames.hpp write, as a decapsulating flow names
// them: the encap and decap tests build on the same tunnel.
#pragma once

#include "core/decap.hpp"
#include "pcap_frames.hpp"

namespace daqiri::core {

inline Decap test_tunnel(Decap::Kind kind) {
  Decap d;
  d.kind = kind;
  d.outer_eth_src = {2, 0, 0, 0, 0, 1};
  d.outer_eth_dst = {2, 0, 0, 0, 0, 2};
  d.outer_ipv4_src = test::kOuterIpv4Src;
  d.outer_ipv4_dst = test::kOuterIpv4Dst;
  return d;
}

}  // namespace daqiri::core
