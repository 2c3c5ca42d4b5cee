// Received frames, as anyone on the wire can make them: the fields software steering reads
// (core::PacketFields, up to two VLAN tags, IPv4, UDP/TCP ports, eCPRI) and the payload offset
// the ABI's readers find (daqiri_udp_payload_offset, which clients use for frames the daemon did
// not read). Both must stay within the frame and find the same payload. And each decapsulation
// (VLAN pop, VXLAN, GRE, NVGRE, over all-zero outer addresses the fuzzer can write) stays within
// the frame too, and leaves an inner frame whose fields are read within it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/decap.hpp"
#include "core/flow_match.hpp"
#include "core/packet_fields.hpp"
#include "daqiri/abi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65535) return 0;  // a frame's length is 16 bits in a descriptor
  // An allocation of exactly the frame: a read past its end is seen.
  std::vector<uint8_t> frame(data, data + size);
  auto length = static_cast<uint32_t>(size);
  auto fields =
      daqiri::core::PacketFields::parse(reinterpret_cast<const std::byte*>(frame.data()), length);
  uint16_t offset = daqiri_udp_payload_offset(frame.data(), length);
  if (fields.payload_offset != offset) __builtin_trap();
  if (offset > length) __builtin_trap();
  if (!fields.ipv4 && (offset != 0 || fields.src_port != 0 || fields.dst_port != 0)) {
    __builtin_trap();
  }
  daqiri_rx_desc d{};
  d.length = length;
  d.payload_offset = DAQIRI_PAYLOAD_UNREAD;
  if (daqiri_rx_payload_offset(&d, frame.data()) != offset) __builtin_trap();

  using Kind = daqiri::core::Decap::Kind;
  for (Kind kind : {Kind::kVlan, Kind::kVxlan, Kind::kGre, Kind::kNvgre}) {
    daqiri::core::Decap decap;
    decap.kind = kind;
    decap.gre_protocol = size % 2 == 0 ? 0x0800 : daqiri::core::Decap::kTransparentEthernet;
    auto got = decap.decapsulate(frame.data(), length);
    if (!got) continue;
    if (got->strip + 14 > length) __builtin_trap();  // apply() writes up to there
    const auto& inner = got->inner;
    if (inner.payload_offset > length - got->strip) __builtin_trap();
    std::vector<uint8_t> copy(frame);
    daqiri::core::apply(*got, copy.data());
    daqiri::core::FlowMatch any_udp;
    any_udp.udp_dst = daqiri::core::PortRange{1, 65535};
    (void)any_udp.matches_inner(inner);
  }
  daqiri::core::FlowMatch flex;
  flex.flex = daqiri::core::FlexMatch{0, fields.dst_port, 28, 0, 0};
  (void)flex.matches(fields);  // reads 32 bits 28 bytes into the payload, if the frame has them
  return 0;
}
