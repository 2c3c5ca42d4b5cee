// The text of a flow's match and endpoints, as clients send it (gRPC CreateFlow, daqiri-ctl
// flows add): port ranges, IPv4 prefixes, host:port endpoints. The first byte picks the parser.
// What parses must print back as text that parses to the same value.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/flow_match.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace core = daqiri::core;
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);  // its own allocation
  switch (data[0] % 3) {
    case 0:
      if (auto r = core::parse_port_range(text)) {
        if (r->first == 0 || r->first > r->last) __builtin_trap();
      }
      break;
    case 1:
      if (auto p = core::parse_ipv4_prefix(text)) {
        if (p->length > 32 || (p->address & ~p->mask()) != 0) __builtin_trap();
      }
      break;
    default:
      if (auto e = core::parse_endpoint(text)) {
        auto again = core::parse_endpoint(e->to_string());
        if (!again || !(*again == *e)) __builtin_trap();
      }
      break;
  }
  return 0;
}
