// TX frames as a hostile client writes them, through the checks the daemon runs on its own
// copy of a frame's headers: check_tx_frame under each policy, given exactly the bytes its
// contract promises (the first min(length, 42), in an allocation of their own, so that any read
// past them is seen), and the UDP frame parser. A frame the checked policy lets through must be
// the IPv4/UDP frame from the interface's address that it claims to be.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "daqiri/frame.hpp"
#include "dataplane/tx_frame_policy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using daqiri::config::TxPolicy;
  namespace dp = daqiri::dataplane;
  namespace frame = daqiri::frame;
  if (size < 4) return 0;
  uint32_t source = 0;  // the interface's address
  std::memcpy(&source, data, sizeof source);
  std::vector<std::byte> whole(reinterpret_cast<const std::byte*>(data) + 4,
                               reinterpret_cast<const std::byte*>(data) + size);
  std::vector<std::byte> head(whole.begin(),
                              whole.begin() + long(std::min(whole.size(), dp::kCheckedHeaders)));
  for (TxPolicy policy : {TxPolicy::kChecked, TxPolicy::kRaw}) {
    dp::TxVerdict v = dp::check_tx_frame(head, whole.size(), source, policy);
    if (v.refused != nullptr) continue;
    // What goes out is the IP packet, inside the frame.
    if (frame::kEthHeader + v.ip_length > whole.size()) __builtin_trap();
    if (policy != TxPolicy::kChecked) continue;
    auto udp =
        frame::parse_udp(std::span<const std::byte>(whole).first(frame::kEthHeader + v.ip_length));
    if (!udp || udp->src.ipv4 != source || udp->src.port < dp::kFirstUnprivilegedPort ||
        udp->dst.ipv4 != v.dst_ipv4 || udp->payload_offset != frame::kUdpHeaders ||
        udp->payload_offset + udp->payload_length != frame::kEthHeader + v.ip_length) {
      __builtin_trap();
    }
  }
  if (auto udp = frame::parse_udp(whole)) {
    if (udp->payload_offset + udp->payload_length > whole.size()) __builtin_trap();
  }
  return 0;
}
