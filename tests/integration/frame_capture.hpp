// Counts the UDP frames one interface carries between two ports, and those of them that break a
// checked TX queue's policy (another source address or MAC, another protocol, IP options, a
// fragment), from an AF_PACKET socket: outside the daemon, as the wire sees them.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "harness.hpp"

namespace daqiri::test {

struct CaptureRule {
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint32_t source_ipv4 = 0;                          // what every frame must come from
  std::optional<std::array<uint8_t, 6>> source_mac;  // and, where set, its source MAC
};

// What a frame is to `rule`: not one of its frames (another port pair, not IPv4), one of them
// that keeps the policy, or one that breaks it. `f`: `n` bytes from the Ethernet header on.
enum class Seen { kOther, kGood, kBad };
inline Seen judge(const CaptureRule& rule, const unsigned char* f, size_t n) {
  if (n < 34 || (f[12] << 8 | f[13]) != ETH_P_IP) return Seen::kOther;
  const unsigned char* p = f + 14;
  size_t ihl = (p[0] & 0xfu) * 4;
  if (p[9] == IPPROTO_ICMP || n < 14 + ihl + 4) return Seen::kOther;
  uint16_t sport = static_cast<uint16_t>(p[ihl] << 8 | p[ihl + 1]);
  uint16_t dport = static_cast<uint16_t>(p[ihl + 2] << 8 | p[ihl + 3]);
  if (sport != rule.src_port || dport != rule.dst_port) return Seen::kOther;
  uint32_t source = uint32_t{p[12]} << 24 | uint32_t{p[13]} << 16 | p[14] << 8 | p[15];
  bool fragment = ((p[6] << 8 | p[7]) & 0x3fff) != 0;
  bool mac = !rule.source_mac || std::memcmp(f + 6, rule.source_mac->data(), 6) == 0;
  bool bad = source != rule.source_ipv4 || p[9] != IPPROTO_UDP || ihl != 20 || fragment || !mac;
  return bad ? Seen::kBad : Seen::kGood;
}

class FrameCapture {
 public:
  // `netns`: a network namespace's name (ip netns), or empty for the test's own.
  FrameCapture(const std::string& interface, const std::string& netns, CaptureRule rule)
      : rule_(rule) {
    // A socket belongs to the namespace it was created in: open it from a thread that entered
    // that namespace (setns moves only the calling thread).
    std::thread([&] {
      if (!netns.empty()) {
        UniqueFd ns(::open(("/var/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC));
        if (!ns || ::setns(ns.get(), CLONE_NEWNET) != 0) return;
      }
      fd_.reset(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_IP)));
      int big = 256 << 20;
      ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
      sockaddr_ll at{};
      at.sll_family = AF_PACKET;
      at.sll_protocol = htons(ETH_P_IP);
      at.sll_ifindex = static_cast<int>(if_nametoindex(interface.c_str()));
      ok_ = fd_ && at.sll_ifindex != 0 &&
            ::bind(fd_.get(), reinterpret_cast<sockaddr*>(&at), sizeof at) == 0;
    }).join();
    if (ok_) thread_ = std::thread([this] { run(); });
  }
  ~FrameCapture() { stop(); }
  [[nodiscard]] bool ok() const { return ok_; }
  // Stops reading; then frames(), bad() and dropped() are final.
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  [[nodiscard]] uint64_t frames() const { return frames_; }
  [[nodiscard]] uint64_t bad() const { return bad_; }
  [[nodiscard]] uint64_t dropped() const { return dropped_; }

 private:
  void run() {
    unsigned char f[2048];
    for (;;) {
      pollfd pfd{fd_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, 100) == 0 && stop_.load()) break;
      sockaddr_ll from{};
      socklen_t len = sizeof from;
      ssize_t n = ::recvfrom(fd_.get(), f, sizeof f, MSG_DONTWAIT,
                             reinterpret_cast<sockaddr*>(&from), &len);
      // lo shows each packet twice, outgoing and received: count it as received.
      if (n <= 0 || from.sll_pkttype == PACKET_OUTGOING) continue;
      Seen seen = judge(rule_, f, static_cast<size_t>(n));
      frames_ += seen != Seen::kOther;
      bad_ += seen == Seen::kBad;
    }
    tpacket_stats st{};
    socklen_t len = sizeof st;
    if (::getsockopt(fd_.get(), SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) {
      dropped_ = st.tp_drops;
    }
  }

  CaptureRule rule_;
  UniqueFd fd_;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  uint64_t frames_ = 0, bad_ = 0, dropped_ = 0;
  std::thread thread_;
};

}  // namespace daqiri::test
