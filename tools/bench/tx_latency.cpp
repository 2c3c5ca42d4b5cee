// TX latency on an idle sender: from just before a frame is handed over to the moment a plain
// UDP socket in this process has it, one frame at a time with a pause between (long enough
// for daqirid's TX poller to go to sleep). The pauses are drawn from [GAP_US, 2 GAP_US): a
// fixed one locks onto the sleeping poller's wake-ups (every ~1.1 ms) and measures the phase.
//   tx-latency sendto COUNT GAP_US                  the peer: sendto() on a UDP socket
//   tx-latency daqiri SOCKET COUNT GAP_US [nokick]  a libdaqiri TX client on interface lo
//                                                   (nokick: TxOptions::kick = false)
// Lateness of a frame given a time to leave at, LEAD_US after it is handed over: from that
// time (CLOCK_REALTIME) to the frame's arrival.
//   tx-latency sleep-sendto COUNT GAP_US LEAD_US    the peer: sleeps until the time, sendto()
//   tx-latency daqiri-at SOCKET COUNT GAP_US LEAD_US  submitted at once with the time in
//                                                   TxBuffer::send_at_ns (accurate_send)
// Prints "p50 A p90 B p99 C max D us" over COUNT frames of 64 payload bytes.
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/client.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "daqiri/frame.hpp"

namespace {

constexpr size_t kPayload = 64;

// The receiving socket: loopback, an ephemeral port, a 1 s timeout. Its port in `port`.
daqiri::UniqueFd receiver(uint16_t& port) {
  daqiri::UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return {};
  socklen_t len = sizeof a;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  timeval tv{1, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

uint64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

// Sends COUNT frames with `send`, GAP_US apart, and reports. `send(from)` returns false on
// failure and sets `from`, the CLOCK_REALTIME time the frame's latency counts from.
template <typename Send>
int measure(int rx, uint64_t count, int gap_us, Send send) {
  std::vector<double> us;
  char buf[2048];
  std::minstd_rand pause(42);
  for (uint64_t i = 0; i < count; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us + int(pause() % gap_us)));
    uint64_t from = 0;
    if (!send(from)) return 1;
    if (::recv(rx, buf, sizeof buf, 0) != ssize_t(kPayload)) {
      std::fprintf(stderr, "frame %llu did not arrive\n", static_cast<unsigned long long>(i));
      return 1;
    }
    us.push_back(double(int64_t(realtime_ns() - from)) / 1e3);
  }
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, size_t(q * double(us.size())))]; };
  std::printf("p50 %.1f p90 %.1f p99 %.1f max %.1f us\n", at(0.5), at(0.9), at(0.99), us.back());
  return 0;
}

// `lead_us` < 0: at once; else sleeps until that long after the call, then sends.
int plain(uint64_t count, int gap_us, int lead_us = -1) {
  uint16_t port = 0;
  auto rx = receiver(port);
  daqiri::UniqueFd tx(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  char payload[kPayload] = {};
  return measure(rx.get(), count, gap_us, [&](uint64_t& from) {
    from = realtime_ns();
    if (lead_us >= 0) {
      from += uint64_t(lead_us) * 1000;
      timespec at{time_t(from / 1'000'000'000), long(from % 1'000'000'000)};
      ::clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, nullptr);
    }
    return ::sendto(tx.get(), payload, sizeof payload, 0, reinterpret_cast<sockaddr*>(&to),
                    sizeof to) == ssize_t(sizeof payload);
  });
}

// `lead_us` < 0: at once; else each frame's send_at_ns is that long after its submit.
int daqiri_client(const std::string& socket, uint64_t count, int gap_us, bool kick,
                  int lead_us = -1) {
  uint16_t port = 0;
  auto rx = receiver(port);
  auto c = daqiri::Client::connect({.socket = socket, .name = "tx-latency"});
  if (!c) {
    std::fprintf(stderr, "connect: %s\n", c.error().message.c_str());
    return 1;
  }
  auto t = (*c)->attach_tx({.interface = "lo", .queue = "", .kick = kick});
  if (!t) {
    std::fprintf(stderr, "attach_tx: %s\n", t.error().message.c_str());
    return 1;
  }
  daqiri::TxStream& s = **t;
  return measure(rx.get(), count, gap_us, [&](uint64_t& from) {
    from = realtime_ns();
    daqiri::TxBuffer b;
    if (s.reserve({&b, 1}) != 1) return false;
    if (lead_us >= 0) b.send_at_ns = from += uint64_t(lead_us) * 1000;
    size_t h =
        daqiri::frame::write_udp_headers(b.data, {0x7f000001, 40000}, {0x7f000001, port}, kPayload);
    std::fill_n(b.data.begin() + h, kPayload, std::byte{0});
    b.length = static_cast<uint32_t>(h + kPayload);
    auto n = s.submit({&b, 1});
    return n && *n == 1;
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 3 && a[0] == "sendto") return plain(std::stoull(a[1]), std::stoi(a[2]));
  if (a.size() == 4 && a[0] == "sleep-sendto") {
    return plain(std::stoull(a[1]), std::stoi(a[2]), std::stoi(a[3]));
  }
  if (a.size() == 5 && a[0] == "daqiri-at") {
    return daqiri_client(a[1], std::stoull(a[2]), std::stoi(a[3]), true, std::stoi(a[4]));
  }
  if ((a.size() == 4 || (a.size() == 5 && a[4] == "nokick")) && a[0] == "daqiri") {
    return daqiri_client(a[1], std::stoull(a[2]), std::stoi(a[3]), a.size() == 4);
  }
  std::fprintf(stderr, "usage: see the comment at the top of tx_latency.cpp\n");
  return 2;
}
