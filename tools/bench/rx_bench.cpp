// Receive-side benchmark peer and subject, built the same way so they measure the same thing:
//   rx-bench recvmmsg PORT BURST COUNT   a plain kernel UDP reader (the peer)
//   rx-bench daqiri SOCKET FLOW BURST COUNT   a libdaqiri client of daqirid (the subject)
//   rx-bench attach SOCKET FLOW RUNS     time from attach_rx() to the first packet, per run
// Both receivers busy-poll and count until COUNT packets or 1 s without traffic, and print
// "packets P seconds S" from the first packet to the last.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "daqiri/client.hpp"

namespace {

using Clock = std::chrono::steady_clock;

void report(uint64_t packets, uint64_t bytes, Clock::time_point first, Clock::time_point last) {
  double s = std::chrono::duration<double>(last - first).count();
  std::printf("packets %llu bytes %llu seconds %.6f\n", static_cast<unsigned long long>(packets),
              static_cast<unsigned long long>(bytes), s);
}

int plain(uint16_t port, uint32_t burst, uint64_t count) {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  int big = 8 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::perror("bind");
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  std::vector<std::vector<char>> bufs(burst, std::vector<char>(9216));
  std::vector<iovec> iov(burst);
  std::vector<mmsghdr> msgs(burst);
  for (uint32_t i = 0; i < burst; ++i) {
    iov[i] = {bufs[i].data(), bufs[i].size()};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  uint64_t packets = 0, bytes = 0;
  Clock::time_point first{}, last = Clock::now();
  while (packets < count) {
    int n = ::recvmmsg(fd, msgs.data(), burst, MSG_DONTWAIT, nullptr);
    auto now = Clock::now();
    if (n <= 0) {
      if (packets > 0 && now - last > std::chrono::seconds(1)) break;
      continue;
    }
    if (packets == 0) first = now;
    for (int i = 0; i < n; ++i)
      bytes += msgs[i].msg_len;
    packets += uint64_t(n);
    last = now;
  }
  report(packets, bytes, first, last);
  return 0;
}

int daqiri_rx(const std::string& socket, const std::string& flow, uint32_t burst, uint64_t count) {
  auto c = daqiri::Client::connect({socket, "rx-bench", std::chrono::seconds(5)});
  if (!c) return 1;
  daqiri::RxOptions o;
  o.flow = flow;
  auto rx = (*c)->attach_rx(o);
  if (!rx) {
    std::fprintf(stderr, "attach: %s\n", rx.error().message.c_str());
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  uint64_t packets = 0, bytes = 0;
  Clock::time_point first{}, last = Clock::now();
  while (packets < count) {
    auto b = (*rx)->next_burst(burst);
    auto now = Clock::now();
    if (b.empty()) {
      if (packets > 0 && now - last > std::chrono::seconds(1)) break;
      continue;
    }
    if (packets == 0) first = now;
    for (const auto& p : b)
      bytes += p.payload.size();  // touch what a consumer would
    packets += b.size();
    last = now;
    (*rx)->release(b);
  }
  report(packets, bytes, first, last);
  return 0;
}

int attach_latency(const std::string& socket, const std::string& flow, int runs) {
  auto c = daqiri::Client::connect({socket, "rx-bench-attach", std::chrono::seconds(5)});
  if (!c) return 1;
  std::vector<double> us;
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    daqiri::RxOptions o;
    o.flow = flow;
    auto rx = (*c)->attach_rx(o);
    if (!rx) return 1;
    for (;;) {
      auto b = (*rx)->next_burst();
      if (!b.empty()) {
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        (*rx)->release(b);
        break;
      }
    }
    (*c)->detach(*rx);
  }
  std::sort(us.begin(), us.end());
  std::printf("attach_to_first_packet_us p50 %.0f p90 %.0f max %.0f\n", us[us.size() / 2],
              us[us.size() * 9 / 10], us.back());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 4 && a[0] == "recvmmsg") {
    return plain(static_cast<uint16_t>(std::stoi(a[1])), std::stoul(a[2]), std::stoull(a[3]));
  }
  if (a.size() == 5 && a[0] == "daqiri")
    return daqiri_rx(a[1], a[2], std::stoul(a[3]), std::stoull(a[4]));
  if (a.size() == 4 && a[0] == "attach") return attach_latency(a[1], a[2], std::stoi(a[3]));
  std::fprintf(stderr, "usage: see the comment at the top of rx_bench.cpp\n");
  return 2;
}
