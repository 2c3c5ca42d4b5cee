// TX latency on an idle sender: from just before a frame is handed over to the moment a plain
// UDP socket in this process has it, one frame at a time with a pause between (long enough
// for daqirid's TX poller to go to sleep). The pauses are drawn from [GAP_US, 2 GAP_US): a
// fixed one locks onto the sleeping poller's wake-ups (every ~1.1 ms) and measures the phase.
//   tx-latency sendto COUNT GAP_US                  the peer: sendto() on a UDP socket
//   tx-latency daqiri SOCKET COUNT GAP_US [nokick]  a libdaqiri TX client on interface lo
//                                                   (nokick: TxOptions::kick = false)
// Prints "p50 A p90 B p99 C max D us" over COUNT frames of 64 payload bytes.
#include <netinet/in.h>
#include <sys/socket.h>
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

using Clock = std::chrono::steady_clock;
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

// Sends COUNT frames with `send` (which returns false on failure), GAP_US apart, and reports.
template <typename Send>
int measure(int rx, uint64_t count, int gap_us, Send send) {
  std::vector<double> us;
  char buf[2048];
  std::minstd_rand pause(42);
  for (uint64_t i = 0; i < count; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us + int(pause() % gap_us)));
    auto t0 = Clock::now();
    if (!send()) return 1;
    if (::recv(rx, buf, sizeof buf, 0) != ssize_t(kPayload)) {
      std::fprintf(stderr, "frame %llu did not arrive\n", static_cast<unsigned long long>(i));
      return 1;
    }
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, size_t(q * double(us.size())))]; };
  std::printf("p50 %.1f p90 %.1f p99 %.1f max %.1f us\n", at(0.5), at(0.9), at(0.99), us.back());
  return 0;
}

int plain(uint64_t count, int gap_us) {
  uint16_t port = 0;
  auto rx = receiver(port);
  daqiri::UniqueFd tx(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  char payload[kPayload] = {};
  return measure(rx.get(), count, gap_us, [&] {
    return ::sendto(tx.get(), payload, sizeof payload, 0, reinterpret_cast<sockaddr*>(&to),
                    sizeof to) == ssize_t(sizeof payload);
  });
}

int daqiri_client(const std::string& socket, uint64_t count, int gap_us, bool kick) {
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
  return measure(rx.get(), count, gap_us, [&] {
    daqiri::TxBuffer b;
    if (s.reserve({&b, 1}) != 1) return false;
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
  if ((a.size() == 4 || (a.size() == 5 && a[4] == "nokick")) && a[0] == "daqiri") {
    return daqiri_client(a[1], std::stoull(a[2]), std::stoi(a[3]), a.size() == 4);
  }
  std::fprintf(stderr, "usage: see the comment at the top of tx_latency.cpp\n");
  return 2;
}
