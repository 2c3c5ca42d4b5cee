// Received frames, as anyone on the wire can make them: the fields software steering reads
// (core::PacketFields, up to two VLAN tags, IPv4, UDP/TCP ports) and the payload offset the
// ABI's readers find (daqiri_udp_payload_offset, which clients use for frames the daemon did
// not read). Both must stay within the frame and find the same payload.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

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
  return 0;
}
