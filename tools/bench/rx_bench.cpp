// Receive-side benchmark peer and subject, built the same way so they measure the same thing:
//   rx-bench recvmmsg PORT BURST COUNT   a plain kernel UDP reader (the peer)
//   rx-bench recvmmsg-meta PORT BURST COUNT   the same, also asking for each datagram's
//                                        source address, as daqirid does
//   rx-bench daqiri SOCKET FLOW BURST COUNT   a libdaqiri client of daqirid (the subject);
//                                        FLOW queue:IF/Q: every flow of that RX queue
//   rx-bench daqiri-wait SOCKET FLOW BURST COUNT   daqiri, but sleeping on the stream's eventfd
//                                        (wait_burst) whenever the ring is empty, as a
//                                        consumer sharing its core with the daemon's poller
//                                        should (run-daqiri)
//   rx-bench daqiri-frames SOCKET FLOW BURST COUNT   the same with RxOptions::find_payloads
//                                        off: it reads descriptors only, never a frame the
//                                        daemon left unread (as testpmd rxonly reads none)
//   rx-bench daqiri-compact SOCKET FLOW BURST COUNT   daqiri-frames in 16-byte descriptors
//                                        (RxOptions::compact)
//     (each daqiri mode takes `block` last: blocking backpressure, as a TCP stream wants)
//   rx-bench attach SOCKET FLOW RUNS     time from attach_rx() to the first packet, per run
//   rx-bench uring PORT BURST COUNT      the same reader on io_uring: one multishot recvmsg
//                                        over a ring of provided buffers, completions reaped
//                                        BURST at a time (to decide whether the socket backend
//                                        should have an io_uring path)
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

#include <liburing.h>

#include "arrival_clock.hpp"
#include "daqiri/client.hpp"

namespace {

using daqiri::bench::ArrivalClock;
using daqiri::bench::Clock;

// The receive socket both peers read: loopback UDP with a deep buffer. -1 on failure.
int bind_loopback_udp(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  int big = 8 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::perror("bind");
    ::close(fd);
    return -1;
  }
  return fd;
}

// `meta`: also ask for what daqirid's socket backend asks of each datagram (the sender's
// address), to tell the kernel's cost of that from daqirid's.
int plain(uint16_t port, uint32_t burst, uint64_t count, bool meta) {
  int fd = bind_loopback_udp(port);
  if (fd < 0) return 1;
  std::printf("ready\n");
  std::fflush(stdout);
  std::vector<std::vector<char>> bufs(burst, std::vector<char>(9216));
  std::vector<iovec> iov(burst);
  std::vector<mmsghdr> msgs(burst);
  std::vector<sockaddr_in> from(burst);
  for (uint32_t i = 0; i < burst; ++i) {
    iov[i] = {bufs[i].data(), bufs[i].size()};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    if (meta) {
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
    }
  }
  uint64_t packets = 0, bytes = 0;
  ArrivalClock clock;
  while (packets < count) {
    int n = ::recvmmsg(fd, msgs.data(), burst, MSG_DONTWAIT, nullptr);
    if (!clock.after_poll(n > 0 ? uint64_t(n) : 0)) break;
    if (n <= 0) continue;
    for (int i = 0; i < n; ++i) {
      bytes += msgs[i].msg_len;
      if (meta) msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
    }
    packets += uint64_t(n);
  }
  clock.report(packets, bytes);
  return 0;
}

int uring_rx(uint16_t port, uint32_t burst, uint64_t count) {
  int fd = bind_loopback_udp(port);
  if (fd < 0) return 1;
  io_uring ring{};
  if (io_uring_queue_init(1024, &ring, 0) != 0) {
    std::perror("io_uring_queue_init");
    return 1;
  }
  constexpr unsigned kBufs = 4096;  // a power of two, as buffer rings require
  constexpr unsigned kBufSize = 9216 + 256;
  constexpr int kGroup = 1;
  void* ring_mem = nullptr;
  if (::posix_memalign(&ring_mem, 4096, kBufs * sizeof(io_uring_buf)) != 0) return 1;
  auto* br = static_cast<io_uring_buf_ring*>(ring_mem);
  io_uring_buf_ring_init(br);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<uint64_t>(br);
  reg.ring_entries = kBufs;
  reg.bgid = kGroup;
  if (io_uring_register_buf_ring(&ring, &reg, 0) != 0) {
    std::fprintf(stderr, "io_uring_register_buf_ring failed\n");
    return 1;
  }
  std::vector<char> bufs(size_t{kBufs} * kBufSize);
  for (unsigned i = 0; i < kBufs; ++i) {
    io_uring_buf_ring_add(br, bufs.data() + size_t{i} * kBufSize, kBufSize,
                          static_cast<uint16_t>(i), io_uring_buf_ring_mask(kBufs),
                          static_cast<int>(i));
  }
  io_uring_buf_ring_advance(br, kBufs);
  msghdr msg{};
  msg.msg_namelen = sizeof(sockaddr_in);
  auto arm = [&] {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_recvmsg_multishot(sqe, fd, &msg, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kGroup;
    io_uring_submit(&ring);
  };
  arm();
  std::printf("ready\n");
  std::fflush(stdout);
  std::vector<io_uring_cqe*> cqes(burst);
  uint64_t packets = 0, bytes = 0;
  ArrivalClock clock;
  while (packets < count) {
    unsigned n = io_uring_peek_batch_cqe(&ring, cqes.data(), burst);
    if (!clock.after_poll(n)) break;
    if (n == 0) {
      io_uring_get_events(&ring);  // let the kernel post completions it has ready
      continue;
    }
    bool rearm = false;
    for (unsigned i = 0; i < n; ++i) {
      io_uring_cqe* c = cqes[i];
      if (!(c->flags & IORING_CQE_F_MORE)) rearm = true;
      if (c->res > 0 && (c->flags & IORING_CQE_F_BUFFER)) {
        unsigned bid = c->flags >> IORING_CQE_BUFFER_SHIFT;
        char* buf = bufs.data() + size_t{bid} * kBufSize;
        auto* out = io_uring_recvmsg_validate(buf, c->res, &msg);
        if (out) {
          bytes += io_uring_recvmsg_payload_length(out, c->res, &msg);
          ++packets;
        }
        io_uring_buf_ring_add(br, buf, kBufSize, static_cast<uint16_t>(bid),
                              io_uring_buf_ring_mask(kBufs), 0);
        io_uring_buf_ring_advance(br, 1);
      }
    }
    io_uring_cq_advance(&ring, n);
    if (rearm) arm();
  }
  clock.report(packets, bytes);
  io_uring_queue_exit(&ring);
  return 0;
}

int daqiri_rx(const std::string& socket, const std::string& flow, uint32_t burst, uint64_t count,
              bool find_payloads, bool compact, bool sleep, bool block) {
  auto c = daqiri::Client::connect({socket, "rx-bench", std::chrono::seconds(5)});
  if (!c) return 1;
  daqiri::RxOptions o;
  if (flow.starts_with("queue:") && flow.find('/') != std::string::npos) {  // queue:IF/Q
    o.interface = flow.substr(6, flow.find('/') - 6);
    o.queue = flow.substr(flow.find('/') + 1);
  } else {
    o.flow = flow;
  }
  o.find_payloads = find_payloads;
  o.block = block;
  o.compact = compact;
  auto rx = (*c)->attach_rx(o);
  if (!rx) {
    std::fprintf(stderr, "attach: %s\n", rx.error().message.c_str());
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  uint64_t packets = 0, bytes = 0;
  ArrivalClock clock;
  while (packets < count) {
    auto b = (*rx)->next_burst(burst);
    if (b.empty() && sleep) {
      if (auto w = (*rx)->wait_burst(std::chrono::milliseconds(100), burst); w) b = *w;
    }
    if (!clock.after_poll(b.size())) break;
    if (b.empty()) continue;
    for (const auto& p : b)
      bytes += p.payload.size();  // touch what a consumer would
    packets += b.size();
    (*rx)->release(b);
  }
  clock.report(packets, bytes);
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
  if (a.size() == 4 && (a[0] == "recvmmsg" || a[0] == "recvmmsg-meta")) {
    return plain(static_cast<uint16_t>(std::stoi(a[1])), std::stoul(a[2]), std::stoull(a[3]),
                 a[0] == "recvmmsg-meta");
  }
  const bool block = a.size() == 6 && a[5] == "block";
  if ((a.size() == 5 || block) && (a[0] == "daqiri" || a[0] == "daqiri-wait" ||
                                   a[0] == "daqiri-frames" || a[0] == "daqiri-compact")) {
    return daqiri_rx(a[1], a[2], std::stoul(a[3]), std::stoull(a[4]),
                     a[0] == "daqiri" || a[0] == "daqiri-wait", a[0] == "daqiri-compact",
                     a[0] == "daqiri-wait", block);
  }
  if (a.size() == 4 && a[0] == "attach") return attach_latency(a[1], a[2], std::stoi(a[3]));
  if (a.size() == 4 && a[0] == "uring") {
    return uring_rx(static_cast<uint16_t>(std::stoi(a[1])), std::stoul(a[2]), std::stoull(a[3]));
  }
  std::fprintf(stderr, "usage: see the comment at the top of rx_bench.cpp\n");
  return 2;
}
