#include "backends/socket/socket_rx_flow.hpp"

#include <arpa/inet.h>
#include <linux/sock_diag.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>

#include "backends/socket/poller_syscalls.hpp"
#include "daqiri/frame.hpp"
#include "dataplane/receive_clock.hpp"

namespace daqiri::backends::socket {
namespace {

// The poll's clock reading (0: not taken yet), taken when something first needs it: packets to
// stamp, or a drop count to read.
uint64_t poll_time(uint64_t& now_ns) {
  if (now_ns == 0) now_ns = dataplane::ReceiveClock::now_ns();
  return now_ns;
}

Result<UniqueFd> bind_udp(uint32_t ipv4, uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail_errno("socket(UDP)");
  int rcvbuf = 8 << 20;  // absorb bursts while the poller is busy elsewhere
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(ipv4);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    in_addr a{htonl(ipv4)};
    return fail(err == EADDRINUSE ? ErrorCode::kFailedPrecondition : ErrorCode::kInternal,
                std::string("cannot bind UDP ") + inet_ntoa(a) + ":" + std::to_string(port) + ": " +
                    std::strerror(err) +
                    (err == EADDRINUSE ? " (another program owns that port)" : ""));
  }
  return fd;
}

}  // namespace

Result<std::unique_ptr<SocketRxFlow>> SocketRxFlow::create(const core::Flow& flow,
                                                           uint32_t bind_ipv4, uint32_t buf_size,
                                                           uint32_t num_bufs, bool huge,
                                                           memory::PageArena* arena,
                                                           uint32_t batch) {
  if (!flow.match.udp_dst) {
    return fail(ErrorCode::kFailedPrecondition,
                "flow \"" + flow.name +
                    "\": the socket backend needs a udp_dst match (it binds a "
                    "socket per destination port)",
                "match");
  }
  const core::PortRange& ports = *flow.match.udp_dst;
  if (uint32_t(ports.last - ports.first) + 1 > kMaxPortsPerFlow) {
    return fail(ErrorCode::kFailedPrecondition,
                "flow \"" + flow.name +
                    "\": the socket backend binds one socket per port; "
                    "ranges of up to " +
                    std::to_string(kMaxPortsPerFlow) + " ports",
                "match");
  }
  if (buf_size < frame::kUdpHeaders + 64) {
    return fail(ErrorCode::kFailedPrecondition, "buffers too small for the socket backend");
  }
  // The destination address of the match, when it is one host, is what to bind.
  uint32_t addr = bind_ipv4;
  if (flow.match.ipv4_dst && flow.match.ipv4_dst->length == 32) addr = flow.match.ipv4_dst->address;

  auto pool = memory::BufferPool::create("flow-" + flow.name, buf_size, num_bufs, huge, arena);
  if (!pool) return std::unexpected(pool.error());
  std::unique_ptr<SocketRxFlow> f(
      new SocketRxFlow(flow, std::move(*pool), addr, std::clamp(batch, kMinRead, kMaxBatch)));
  for (uint32_t p = ports.first; p <= ports.last; ++p) {
    auto fd = bind_udp(addr, static_cast<uint16_t>(p));
    if (!fd) return std::unexpected(fd.error());  // the ones bound so far close with `f`
    auto port = std::make_unique<Port>();
    port->fd = std::move(*fd);
    port->number = static_cast<uint16_t>(p);
    f->ports_.push_back(std::move(port));
  }
  for (auto& port : f->ports_) {
    f->link(*port);
    f->arm(*port);
  }
  return f;
}

SocketRxFlow::SocketRxFlow(core::Flow flow, memory::BufferPool pool, uint32_t bind_ipv4,
                           uint32_t batch)
    : flow_(std::move(flow)), pool_(std::move(pool)), bind_ipv4_(bind_ipv4), batch_(batch) {}

SocketRxFlow::~SocketRxFlow() = default;

std::vector<int> SocketRxFlow::fds() const {
  std::vector<int> out;
  out.reserve(ports_.size());
  for (const auto& p : ports_)
    out.push_back(p->fd.get());
  return out;
}

void SocketRxFlow::link(Port& port) const {
  uint32_t room = pool_.buf_size() - uint32_t(frame::kUdpHeaders);
  for (uint32_t i = 0; i < kPortEntries; ++i) {
    port.iov[i] = {nullptr, room};
    port.msg[i].msg_hdr = {};
    port.msg[i].msg_hdr.msg_iov = &port.iov[i];
    port.msg[i].msg_hdr.msg_iovlen = 1;
    port.msg[i].msg_hdr.msg_name = &port.from[i];
  }
}

void SocketRxFlow::arm(Port& port) {
  // The posted entries are a window [first, first + armed) that a receive of n moves n up, so
  // that the buffers left unfilled keep their entries and their order (the pool hands buffers
  // out in the order they came back, and a burst in consecutive buffers is one strided array
  // to a client). Shifting them all down after each receive would rewrite every posted entry,
  // a cache line each, on every poll, however few datagrams came. The window slides back to 0
  // only when it reaches the end.
  if (port.first + batch_ > kPortEntries) {
    for (uint32_t i = 0; i < port.armed; ++i) {
      port.buffer[i] = port.buffer[port.first + i];
      port.iov[i].iov_base = port.iov[port.first + i].iov_base;
      port.msg[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
    }
    port.first = 0;
  }
  uint32_t end = port.first + port.armed;
  uint32_t added = pool_.alloc(port.buffer.data() + end, batch_ - port.armed);
  // Only the new entries: the buffer and the address length (the rest link() set once).
  for (uint32_t i = end; i < end + added; ++i) {
    port.iov[i].iov_base = pool_.buffer(port.buffer[i]) + frame::kUdpHeaders;
    port.msg[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
  }
  port.armed += added;
}

bool SocketRxFlow::poll() {
  // What clients released is taken back after the first receive (RxFanout::reclaim, once a
  // poll): the syscall hides the wait for their consumer indices. Room is judged on the last
  // poll's (a poll late at worst).
  size_t active = fanout_.gather();
  if (active > 0 && fanout_.must_wait(batch_)) {  // blocking backpressure
    fanout_.reclaim();
    return false;
  }
  bool work = false;
  uint64_t now = 0;
  for (auto& port : ports_) {
    if (port->skip > 0) {
      --port->skip;
      continue;
    }
    if (port->armed < batch_) arm(*port);
    if (port->armed == 0) {  // pool exhausted: the kernel buffers until clients release
      if (!port->starved) {
        count_drops(*port, poll_time(now));  // the drops before it were ours
        port->starved = true;
      }
      continue;
    }
    if (receive(*port, now)) {
      work = true;
      port->idle = 0;
    } else {
      constexpr uint32_t kMaxSkipShift = 6;
      port->skip = (1u << std::min(port->idle, kMaxSkipShift)) - 1;
      ++port->idle;
    }
  }
  fanout_.reclaim();  // nothing came: not done yet
  if (work) fanout_.publish();
  uint32_t armed = 0;
  for (const auto& port : ports_)
    armed += port->armed;
  counters.on_loan.store(pool_.num_bufs() - pool_.available() - armed, std::memory_order_relaxed);
  return work;
}

bool SocketRxFlow::needs_timed_wakeup() const {
  if (fanout_.holds_buffers()) return true;
  return std::ranges::any_of(ports_, [](const auto& p) { return p->unread_drops || p->starved; });
}

bool SocketRxFlow::waits_for_releases() const {
  return fanout_.stalled() || std::ranges::any_of(ports_, [](const auto& p) { return p->starved; });
}

void SocketRxFlow::count_drops(Port& port, uint64_t now_ns) {
  port.unread_drops = false;
  port.drops_due_ns = now_ns + kDropReadNs;
  std::array<uint32_t, SK_MEMINFO_VARS> meminfo{};
  socklen_t len = sizeof meminfo;
  if (::getsockopt(port.fd.get(), SOL_SOCKET, SO_MEMINFO, meminfo.data(), &len) != 0 ||
      len <= SK_MEMINFO_DROPS * sizeof(uint32_t)) {
    return;
  }
  uint32_t drops = meminfo[SK_MEMINFO_DROPS];
  uint32_t delta = drops - port.drops_seen;  // the count wraps at 2^32
  port.drops_seen = drops;
  if (delta == 0) return;
  if (port.starved) {
    dataplane::bump(counters.no_buffer, delta);
    fanout_.count_no_buffer(delta);
  } else {
    dataplane::bump(counters.overflow, delta);
  }
}

void SocketRxFlow::read_drops_if_due(Port& port, uint64_t& now_ns, bool drained) {
  if (drained && port.starved) {
    // Drained after a starved time: every drop so far was the empty pool's (the backlog it
    // left kept the socket full until now).
    count_drops(port, poll_time(now_ns));
    port.starved = false;
  } else if (port.unread_drops && poll_time(now_ns) >= port.drops_due_ns) {
    // While datagrams come, and once after they stop (an empty socket keeps being polled).
    count_drops(port, now_ns);
  }
}

bool SocketRxFlow::receive(Port& port, uint64_t& now_ns) {
  fanout_.prepare(port.armed);  // the ring lines come over while the kernel copies
  int n = recvmmsg_now(port.fd.get(), port.msg.data() + port.first, port.armed, MSG_DONTWAIT);
  if (n <= 0) {
    read_drops_if_due(port, now_ns, true);
    return false;
  }
  fanout_.reclaim();
  poll_time(now_ns);  // the packets' stamp
  const core::FlowMatch& m = flow_.match;
  uint64_t bytes = 0;
  dataplane::RxFanout::Run delivery(fanout_, &pool_, false);
  for (uint32_t i = port.first; i < port.first + uint32_t(n); ++i) {
    uint32_t buf = port.buffer[i];
    const sockaddr_in& from = port.from[i];
    uint32_t len = port.msg[i].msg_len;
    uint16_t flags = DAQIRI_DESC_HEADERS_SYNTHESIZED;
    if (port.msg[i].msg_hdr.msg_flags & MSG_TRUNC) {
      flags |= DAQIRI_DESC_TRUNCATED;
      dataplane::bump(counters.truncated, 1);
    }
    uint32_t src_ip = ntohl(from.sin_addr.s_addr);
    uint16_t src_port = ntohs(from.sin_port);
    if ((m.udp_src && !m.udp_src->contains(src_port)) ||
        (m.ipv4_src && !m.ipv4_src->contains(src_ip))) {
      dataplane::bump(counters.filtered, 1);
      pool_.set_refs(buf, 0);
      continue;
    }
    std::byte* frame_start = pool_.buffer(buf);
    frame::write_udp_headers({frame_start, frame::kUdpHeaders + len}, {src_ip, src_port},
                             {bind_ipv4_, port.number}, len);
    daqiri_rx_desc d{};
    d.offset = pool_.offset(buf);
    d.timestamp_ns = now_ns;
    d.length = uint32_t(frame::kUdpHeaders) + len;
    d.flow_id = flow_.id;
    d.region = 0;
    d.flags = flags;
    d.payload_offset = frame::kUdpHeaders;
    uint16_t refs = delivery.deliver(d, buf);
    if (refs == 0)
      dataplane::bump(fanout_.active() == 0 ? counters.no_attachment : counters.rings_full, 1);
    pool_.lend(buf, refs);
    bytes += d.length;
  }
  delivery.finish();
  dataplane::bump(counters.packets, uint64_t(n));
  dataplane::bump(counters.bytes, bytes);
  port.unread_drops = true;
  read_drops_if_due(port, now_ns, uint32_t(n) < port.armed);
  port.first += uint32_t(n);  // the posted buffers not filled stay; arm() adds the rest
  port.armed -= uint32_t(n);
  if (port.armed == 0) port.first = 0;
  return true;
}

uint64_t SocketRxFlow::kernel_drops() const {
  // /proc/net/udp: the last column is drops, the inode identifies our sockets.
  uint64_t total = 0;
  std::ifstream in("/proc/net/udp");
  std::string line;
  std::getline(in, line);
  std::vector<uint64_t> inodes;
  for (const auto& p : ports_) {
    struct stat st {};
    if (::fstat(p->fd.get(), &st) == 0) inodes.push_back(st.st_ino);
  }
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string field;
    std::vector<std::string> f;
    while (s >> field)
      f.push_back(field);
    if (f.size() < 13) continue;
    uint64_t inode = std::stoull(f[9]);
    for (uint64_t i : inodes) {
      if (i == inode) total += std::stoull(f.back());
    }
  }
  return total;
}

}  // namespace daqiri::backends::socket
