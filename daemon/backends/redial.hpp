// What the backends that dial out (TCP client flows, RDMA client flows) share: the IPv4 socket
// address of an endpoint, and when to dial again after a failure or a hang-up.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdint>

namespace daqiri::backends {

inline sockaddr_in ipv4_address(uint32_t ipv4, uint16_t port) {  // host byte order in
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(ipv4);
  return a;
}

// Dial again 50 ms after the first failure, doubling up to 2 s; a connection that opens resets
// it. Times are CLOCK_MONOTONIC (or any clock, as long as one) in ns.
class RedialBackoff {
 public:
  static constexpr uint64_t kMinNs = 50'000'000;
  static constexpr uint64_t kMaxNs = 2'000'000'000;

  [[nodiscard]] bool due(uint64_t now_ns) const { return now_ns >= at_ns_; }
  // When the next dial is due (0 before the first failure: at once).
  [[nodiscard]] uint64_t due_ns() const { return at_ns_; }
  void failed(uint64_t now_ns) {
    delay_ns_ = std::min(std::max(delay_ns_ * 2, kMinNs), kMaxNs);
    at_ns_ = now_ns + delay_ns_;
  }
  void connected() { delay_ns_ = 0; }

 private:
  uint64_t at_ns_ = 0;
  uint64_t delay_ns_ = 0;
};

}  // namespace daqiri::backends
