// What a TX flow puts around the frames it matches before they leave: one VLAN tag, or a VXLAN,
// GRE or NVGRE tunnel with the outer headers named. The client's buffer keeps the frame as it
// wrote it; the daemon writes the new headers into a buffer of its own and sends the frame's
// bytes behind them (all of it, but for the MAC addresses a pushed tag goes behind, or the
// Ethernet header an L3 tunnel replaces).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/decap.hpp"
#include "core/flow_match.hpp"

namespace daqiri::core {

struct Encap {
  static constexpr uint32_t kMaxHeaders = 64;  // the most write() puts in front

  Decap::Kind kind = Decap::Kind::kVlan;
  // A pushed tag.
  uint16_t vlan_id = 0;
  uint8_t pcp = 0;
  uint8_t dei = 0;
  uint16_t tpid = 0x8100;
  // A tunnel: its outer headers, as a decapsulating flow of the same fields matches them.
  Decap tunnel;
  uint8_t ttl = 64;
  uint8_t tos = 0;

  // The headers in front of a frame of `length` bytes whose first bytes are `frame` (at least
  // 14, and the IPv4 and UDP headers where the frame has them, for VXLAN's source port),
  // written to `out` (kMaxHeaders bytes). `skip`: how many of the frame's first bytes are not
  // sent behind them. Returns the header bytes written.
  uint32_t write(const uint8_t* frame, uint32_t head, uint32_t length, uint8_t* out,
                 uint32_t& skip) const;
  // How many bytes the frame grows by, at most.
  [[nodiscard]] uint32_t overhead() const;
  // "vlan_push vid=5" or "vxlan vni=100 ..."
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Encap&, const Encap&) = default;
};

// A TX flow: the frames a client writes that it matches get its encapsulation.
struct TxFlow {
  std::string name;
  FlowMatch match;
  Encap encap;
};

}  // namespace daqiri::core
