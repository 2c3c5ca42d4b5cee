// The xdp backend's peer in tools/bench/run-xdp: a plain AF_XDP reader with the daemon's own
// pieces (the flow filter with one rule, an XskSocket with the same chunks and rings), that
// counts each frame and posts its buffer again at once: what reading the socket costs without
// the daemon's handoff to a client.
//   xsk-bench IFNAME QUEUE UDP_PORT BURST COUNT [busy]
// Reads until COUNT packets or 1 s without traffic, and prints "packets P bytes B seconds S"
// from the first packet to the last, as rx-bench does. An empty ring sends it to sleep in
// poll(2) on the socket, as daqirid's poller parks on it; `busy`: it spins instead, with the
// kernel's preferred busy polling on the socket (as a daqirid queue with busy_poll).
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "arrival_clock.hpp"
#include "backends/xdp/xdp_program.hpp"
#include "backends/xdp/xsk_socket.hpp"

using daqiri::backends::xdp::XdpProgram;
using daqiri::backends::xdp::XskSocket;
using daqiri::backends::xdp::XskSocketSetup;

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: xsk-bench IFNAME QUEUE UDP_PORT BURST COUNT [busy]\n");
    return 2;
  }
  const std::string ifname = argv[1];
  const auto queue = static_cast<uint32_t>(std::stoul(argv[2]));
  const auto port = static_cast<uint16_t>(std::stoul(argv[3]));
  const auto burst = static_cast<uint32_t>(std::stoul(argv[4]));
  const uint64_t count = std::stoull(argv[5]);
  const bool busy = argc > 6 && std::string(argv[6]) == "busy";
  auto program = XdpProgram::attach(static_cast<int>(if_nametoindex(ifname.c_str())));
  if (!program) {
    std::fprintf(stderr, "xsk-bench: %s\n", program.error().message.c_str());
    return 1;
  }
  XskSocketSetup s;
  s.ifname = ifname;
  s.queue_id = queue;
  s.chunk_size = 2048;
  s.pool_name = "xsk-bench";
  s.rx_buffers = 8192;
  s.rx_ring = 4096;
  auto socket = XskSocket::create(s);
  if (!socket) {
    std::fprintf(stderr, "xsk-bench: %s\n", socket.error().message.c_str());
    return 1;
  }
  XskSocket& x = **socket;
  daqiri_xdp_rule rule{};
  rule.src_port_hi = 0xffff;
  rule.dst_port_lo = rule.dst_port_hi = port;
  rule.queue = static_cast<uint16_t>(queue);
  if (!(*program)->set_rule(0, rule) || !(*program)->set_socket(queue, x.fd())) {
    std::fprintf(stderr, "xsk-bench: the filter's maps\n");
    return 1;
  }
  if (busy) {
    int on = 1, usecs = 20, budget = static_cast<int>(burst);
    setsockopt(x.fd(), SOL_SOCKET, SO_PREFER_BUSY_POLL, &on, sizeof on);
    setsockopt(x.fd(), SOL_SOCKET, SO_BUSY_POLL, &usecs, sizeof usecs);
    setsockopt(x.fd(), SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget, sizeof budget);
  }
  // Every buffer but a burst's on the fill ring; each frame read goes straight back.
  const uint64_t base = x.rx_base();
  uint32_t slot = 0;
  const uint32_t posted = s.rx_ring;
  xsk_ring_prod__reserve(&x.fill(), posted, &slot);
  for (uint32_t i = 0; i < posted; ++i)
    *xsk_ring_prod__fill_addr(&x.fill(), slot + i) = base + uint64_t{i} * s.chunk_size;
  xsk_ring_prod__submit(&x.fill(), posted);
  std::printf("ready %s\n", x.zero_copy() ? "zero-copy" : "copy");
  std::fflush(stdout);
  daqiri::bench::ArrivalClock clock;
  uint64_t packets = 0, bytes = 0;
  while (packets < count) {
    uint32_t first = 0;
    const uint32_t n = xsk_ring_cons__peek(&x.rx(), burst, &first);
    if (!clock.after_poll(n)) break;
    if (n == 0) {
      if (busy || xsk_ring_prod__needs_wakeup(&x.fill())) {
        recvfrom(x.fd(), nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
      }
      if (!busy) {
        pollfd p{x.fd(), POLLIN, 0};
        poll(&p, 1, 100);
      }
      continue;
    }
    xsk_ring_prod__reserve(&x.fill(), n, &slot);
    for (uint32_t i = 0; i < n; ++i) {
      const xdp_desc* d = xsk_ring_cons__rx_desc(&x.rx(), first + i);
      bytes += d->len;
      // The chunk's start, as daqirid posts them.
      const uint64_t addr = xsk_umem__extract_addr(d->addr) - base;
      *xsk_ring_prod__fill_addr(&x.fill(), slot + i) = base + addr / s.chunk_size * s.chunk_size;
    }
    xsk_ring_prod__submit(&x.fill(), n);
    xsk_ring_cons__release(&x.rx(), n);
    packets += n;
  }
  clock.report(packets, bytes);
  return 0;
}
