#include "backends/socket/tcp_rx_flow.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "backends/socket/poller_syscalls.hpp"
#include "dataplane/clock.hpp"
#include "dataplane/receive_clock.hpp"

namespace daqiri::backends::socket {
namespace {
// What TX queues write goes out at once, as DAQIRI's sockets send it: a message is not held
// back waiting for the peer's acknowledgement of the last one (Nagle).
void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}
}  // namespace

Result<std::unique_ptr<TcpRxFlow>> TcpRxFlow::create(const core::Flow& flow, uint32_t bind_ipv4,
                                                     uint32_t buf_size, uint32_t num_bufs,
                                                     bool huge, memory::PageArena* arena,
                                                     uint32_t batch, TcpConnections* connections) {
  if (flow.match.tcp_dst && uint32_t(flow.match.tcp_dst->last - flow.match.tcp_dst->first) >= 64) {
    return fail(ErrorCode::kFailedPrecondition,
                "flow \"" + flow.name + "\": TCP flows listen on up to 64 ports", "match");
  }
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  if (!ep) return fail_errno("epoll_create1");
  auto pool = memory::BufferPool::create("flow-" + flow.name, buf_size, num_bufs, huge, arena);
  if (!pool) return std::unexpected(pool.error());
  std::unique_ptr<TcpRxFlow> f(
      new TcpRxFlow(flow, std::move(*pool), std::move(ep), batch, connections));
  if (flow.match.tcp_dst) {
    uint32_t addr = bind_ipv4;
    if (flow.match.ipv4_dst && flow.match.ipv4_dst->length == 32)
      addr = flow.match.ipv4_dst->address;
    for (uint32_t p = flow.match.tcp_dst->first; p <= flow.match.tcp_dst->last; ++p) {
      UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      if (!fd) return fail_errno("socket(TCP)");
      int one = 1;
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in a = ipv4_address(addr, static_cast<uint16_t>(p));
      if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
          ::listen(fd.get(), 64) != 0) {
        int err = errno;
        in_addr ia{htonl(addr)};
        return fail(err == EADDRINUSE ? ErrorCode::kFailedPrecondition : ErrorCode::kInternal,
                    std::string("cannot listen on TCP ") + inet_ntoa(ia) + ":" + std::to_string(p) +
                        ": " + std::strerror(err));
      }
      f->watch(fd.get(), EPOLLIN, true);
      f->listeners_.push_back(std::move(fd));
    }
  }
  return f;
}

TcpRxFlow::TcpRxFlow(core::Flow flow, memory::BufferPool pool, UniqueFd epoll, uint32_t batch,
                     TcpConnections* connections)
    : flow_(std::move(flow)),
      pool_(std::move(pool)),
      epoll_(std::move(epoll)),
      batch_(batch),
      connections_(connections) {}

TcpRxFlow::~TcpRxFlow() {
  for (size_t i = 0; i < count_; ++i)
    connections_->remove(conns_[i].stream);
}

void TcpRxFlow::watch(int fd, uint32_t events, bool add) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  ::epoll_ctl(epoll_.get(), add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
}

TcpRxFlow::Connection* TcpRxFlow::find(int fd) {
  for (size_t i = 0; i < count_; ++i) {
    if (conns_[i].fd == fd) return &conns_[i];
  }
  return nullptr;
}

void TcpRxFlow::accept_all(int listener) {
  for (;;) {
    UniqueFd fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) return;
    if (count_ == kMaxConnections) continue;  // full: refuse (close) rather than grow
    int raw = fd.get();
    no_delay(raw);
    uint16_t stream = connections_->add(std::move(fd), true);
    if (stream == 0) continue;  // the interface's table is full: closed
    watch(raw, EPOLLIN | EPOLLRDHUP, true);
    conns_[count_++] = {raw, stream, false, false};
  }
}

void TcpRxFlow::gather(Connection& c, bool on) {
  int lowat = 1;
  if (on) {
    int rcvbuf = 0;
    socklen_t len = sizeof rcvbuf;
    ::getsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
    // Past a quarter of the buffer the kernel would grow it and clamp the window to the mark.
    lowat = std::clamp(rcvbuf / 4, 1, kGatherBytes);
  }
  ::setsockopt(c.fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
  c.gathering = on;
  if (on) {
    ++gathering_;
  } else {
    --gathering_;
  }
}

// Ends the gathering of connections that went quiet: what waits below the mark becomes
// readable (the kernel checks as the mark drops), and the epoll set says so.
void TcpRxFlow::end_quiet_gathers() {
  uint64_t mono = dataplane::monotonic_ns();
  for (size_t i = 0; i < count_; ++i) {
    Connection& c = conns_[i];
    if (c.gathering && mono - c.last_read_ns > kQuietNs) {
      gather(c, false);
      skip_ = 0;
    }
  }
}

void TcpRxFlow::close_connection(size_t index) {
  if (conns_[index].gathering) --gathering_;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, conns_[index].fd, nullptr);
  connections_->remove(conns_[index].stream);  // closes it, or its writer will
  if (index != --count_) conns_[index] = conns_[count_];
}

void TcpRxFlow::start_connect(uint64_t now_ns) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return;
  sockaddr_in a = ipv4_address(flow_.connect->ipv4, flow_.connect->port);
  int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  if (rc != 0 && errno != EINPROGRESS) {
    redial_.failed(now_ns);
    return;
  }
  int raw = fd.get();
  no_delay(raw);
  uint16_t stream = connections_->add(std::move(fd), rc == 0);
  if (stream == 0) {
    redial_.failed(now_ns);
    return;
  }
  watch(raw, rc != 0 ? EPOLLOUT : EPOLLIN | EPOLLRDHUP, true);
  conns_[count_++] = {raw, stream, rc != 0, false};
}

bool TcpRxFlow::read_some(Connection& c, uint64_t now_ns, uint64_t mono_ns) {
  bool work = false;
  for (uint32_t i = 0; i < batch_; ++i) {
    if (fanout_.active() > 0 && fanout_.must_wait(1)) return work;  // blocking backpressure
    uint32_t buf = 0;
    if (pool_.alloc(&buf, 1) == 0) return work;  // pool dry: TCP flow control holds the sender
    ssize_t n = recv_now(c.fd, pool_.buffer(buf), pool_.buf_size(), MSG_DONTWAIT);
    if (n <= 0) {
      pool_.set_refs(buf, 0);
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) c.ended = true;  // reaped below
      return work;
    }
    daqiri_rx_desc d{};
    d.offset = pool_.offset(buf);
    d.timestamp_ns = now_ns;
    d.length = static_cast<uint32_t>(n);
    d.flow_id = flow_.id;
    d.flags = DAQIRI_DESC_STREAM;
    d.stream = c.stream;
    uint16_t refs = fanout_.deliver(d, buf, &pool_);
    if (refs == 0)
      dataplane::bump(fanout_.active() == 0 ? counters.no_attachment : counters.rings_full, 1);
    pool_.lend(buf, refs);
    dataplane::bump(counters.packets, 1);
    dataplane::bump(counters.bytes, uint64_t(n));
    work = true;
    c.burst_bytes = (mono_ns - c.last_read_ns <= kQuietNs ? c.burst_bytes : 0) + uint64_t(n);
    c.last_read_ns = mono_ns;
    if (!c.gathering && c.burst_bytes >= kGatherBytes) gather(c, true);
  }
  return work;
}

bool TcpRxFlow::poll() {
  // Whether a full ring holds the flow back, judged each poll as the UDP flow does (and
  // again before each read): a stall ends with a release even when no data is waiting.
  if (fanout_.begin() > 0) (void)fanout_.must_wait(1);
  uint64_t now = 0;   // receive stamps
  uint64_t mono = 0;  // when gathering connections last read
  // Dials are timed on the monotonic clock, which the poller's sleeps end by (wakeup_due_ns).
  if (flow_.connect && count_ == 0) {
    uint64_t dial_at = dataplane::monotonic_ns();
    if (redial_.due(dial_at)) start_connect(dial_at);
  }
  bool work = false;
  if (skip_ > 0) {
    --skip_;
  } else {
    epoll_event events[16];
    int n = ::epoll_wait(epoll_.get(), events, 16, 0);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      bool is_listener = std::any_of(listeners_.begin(), listeners_.end(),
                                     [fd](const UniqueFd& l) { return l.get() == fd; });
      if (is_listener) {
        accept_all(fd);
        continue;
      }
      Connection* c = find(fd);
      if (!c) continue;
      if (c->connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          c->ended = true;
        } else {
          c->connecting = false;
          connections_->opened(c->stream);
          redial_.connected();
          watch(fd, EPOLLIN | EPOLLRDHUP, false);
        }
        continue;
      }
      if (now == 0) {
        now = dataplane::ReceiveClock::now_ns();
        mono = dataplane::monotonic_ns();
      }
      work |= read_some(*c, now, mono);
    }
    if (n > 0) {
      idle_ = 0;
    } else {
      skip_ = (1u << std::min(idle_, 6u)) - 1;
      ++idle_;
    }
  }
  if (gathering_ > 0) end_quiet_gathers();
  // Reap connections that ended; a client flow dials again after a pause.
  for (size_t i = 0; i < count_;) {
    if (conns_[i].ended) {
      close_connection(i);
      if (flow_.connect) redial_.failed(dataplane::monotonic_ns());
    } else {
      ++i;
    }
  }
  if (work) fanout_.publish();
  counters.on_loan.store(pool_.num_bufs() - pool_.available(), std::memory_order_relaxed);
  counters.connections.store(static_cast<uint32_t>(count_), std::memory_order_relaxed);
  return work;
}

}  // namespace daqiri::backends::socket
