#include "control/tcp_gate.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "system/fd_headroom.hpp"

namespace daqiri::control {

// One direction of a relayed connection: bytes read from one socket, not yet written to the
// other; `eof` once the source said it is done, `shut` once that was passed on.
struct TcpGate::Pipe {
  std::array<char, 16384> bytes{};
  size_t begin = 0, end = 0;
  bool eof = false, shut = false;
};

struct TcpGate::Connection {
  uint64_t id = 0;
  UniqueFd outer, inner;
  Pipe up, down;  // outer -> inner, inner -> outer
  std::string ip;
  uint16_t inner_port = 0;  // the relay's local port: what gRPC calls the peer
};

namespace {

// "ipv4:10.0.0.2:5000" or "ipv6:[::1]:5000" (gRPC's own way of naming a peer), and the
// address alone, the key the per-peer limit counts by.
std::pair<std::string, std::string> describe(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    return {"ipv4:" + std::string(text) + ":" + std::to_string(ntohs(v4.sin_port)), text};
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
  ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
  return {"ipv6:[" + std::string(text) + "]:" + std::to_string(ntohs(v6.sin6_port)), text};
}

Result<UniqueFd> listen_on(const std::string& address) {
  size_t colon = address.rfind(':');
  std::string host = address.substr(0, colon);
  std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return fail(ErrorCode::kInvalidArgument,
                "daemon.tcp.address " + address + ": " + ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, &::freeaddrinfo);
  UniqueFd fd(::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail_errno("daemon.tcp.address " + address + ": socket");
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), found->ai_addr, found->ai_addrlen) != 0 ||
      ::listen(fd.get(), SOMAXCONN) != 0) {
    return fail_errno("daemon.tcp.address: cannot listen on " + address);
  }
  return fd;
}

}  // namespace

Result<std::unique_ptr<TcpGate>> TcpGate::start(const std::string& address, uint16_t inner_port,
                                                Limits limits, ConnectionRegistry& registry) {
  auto listener = listen_on(address);
  if (!listener) return std::unexpected(listener.error());
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!ep || !wake) return fail_errno("TCP gate: epoll/eventfd");
  std::unique_ptr<TcpGate> g(new TcpGate(std::move(*listener), std::move(ep), std::move(wake),
                                         inner_port, limits, registry));
  for (int fd : {g->listener_.get(), g->wake_.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = fd == g->wake_.get() ? 0 : UINT64_MAX;  // connections are 1, 2, ...
    if (::epoll_ctl(g->epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return fail_errno("TCP gate: epoll_ctl");
    }
  }
  g->thread_ = std::thread([raw = g.get()] { raw->run(); });
  return g;
}

TcpGate::TcpGate(UniqueFd listener, UniqueFd epoll, UniqueFd wake, uint16_t inner_port,
                 Limits limits, ConnectionRegistry& registry)
    : listener_(std::move(listener)),
      epoll_(std::move(epoll)),
      wake_(std::move(wake)),
      acceptor_("TCP control listener", listener_.get(), SOCK_CLOEXEC | SOCK_NONBLOCK),
      inner_port_(inner_port),
      limits_(limits),
      registry_(registry) {}

TcpGate::~TcpGate() {
  uint64_t one = 1;
  [[maybe_unused]] auto w = ::write(wake_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  for (const auto& [id, c] : connections_)
    registry_.forget_tcp(c->inner_port);
}

void TcpGate::run() {
  std::array<epoll_event, 64> events{};
  for (;;) {
    int n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), -1);
    for (int i = 0; i < n; ++i) {
      uint64_t key = events[i].data.u64;
      if (key == 0) return;  // the destructor's wake
      if (key == UINT64_MAX) {
        accept_all();
        continue;
      }
      auto it = connections_.find(key >> 1);
      if (it != connections_.end() && !pump(*it->second)) close(it->first);
    }
  }
}

void TcpGate::accept_all() {
  for (;;) {
    // Out of fds, the acceptor takes the connection with its reserve and closes it: the
    // listener never stays readable with a connection nobody takes (a spinning gate thread).
    UniqueFd fd = acceptor_.accept();
    if (!fd) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EMFILE && errno != ENFILE) {
        spdlog::warn("TCP control listener: accept: {}", std::strerror(errno));
      }
      return;  // the next readable event brings it back
    }
    // The relay's socket and gRPC's end of it, beside the fds gRPC needs of its own.
    if (!system::fds_to_spare(2)) {
      acceptor_.count_refused();
      continue;
    }
    acceptor_.kept();
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&from), &len) != 0) continue;
    auto [peer, ip] = describe(from);
    auto counted = per_ip_.find(ip);
    uint32_t held = counted == per_ip_.end() ? 0 : counted->second;
    if (held >= limits_.per_peer || connections_.size() >= limits_.total) {
      if (refused_ip_ != ip) {  // once a spell
        spdlog::warn(
            "TCP control listener: refused {}: it holds {} connections ({} in all), the "
            "most daemon.limits.tcp_connections_per_peer ({}) and _total ({}) allow",
            peer, held, connections_.size(), limits_.per_peer, limits_.total);
        refused_ip_ = ip;
      }
      continue;  // closing it is the answer: the client's calls fail UNAVAILABLE
    }
    if (refused_ip_ == ip) refused_ip_.clear();
    admit(std::move(fd), peer, ip);
  }
}

void TcpGate::admit(UniqueFd outer, const std::string& peer, const std::string& ip) {
  // A loopback connect completes at once: blocking, then non-blocking for the relay.
  UniqueFd inner(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(inner_port_);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sockaddr_in local{};
  socklen_t len = sizeof local;
  if (!inner || ::connect(inner.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 ||
      ::getsockname(inner.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
      ::fcntl(inner.get(), F_SETFL, O_NONBLOCK) != 0) {
    spdlog::warn("TCP control listener: {} dropped: cannot reach the TLS listener: {}", peer,
                 std::strerror(errno));
    return;
  }
  auto c = std::make_unique<Connection>();
  c->id = next_id_++;
  c->outer = std::move(outer);
  c->inner = std::move(inner);
  c->ip = ip;
  c->inner_port = ntohs(local.sin_port);
  // Recorded before a byte goes through: gRPC sees no call of it before the TLS handshake.
  registry_.record_tcp(c->inner_port, peer);
  ++per_ip_[ip];
  watch(*c, true);
  connections_[c->id] = std::move(c);
}

bool TcpGate::pump(Connection& c) {
  auto move = [](int from, int to, Pipe& p) {
    for (;;) {
      bool progress = false;
      if (!p.eof && p.end < p.bytes.size()) {
        ssize_t n = ::read(from, p.bytes.data() + p.end, p.bytes.size() - p.end);
        if (n > 0) {
          p.end += static_cast<size_t>(n);
          progress = true;
        } else if (n == 0) {
          p.eof = true;
        } else if (errno != EAGAIN && errno != EINTR) {
          return false;
        }
      }
      if (p.begin < p.end) {
        ssize_t n = ::send(to, p.bytes.data() + p.begin, p.end - p.begin, MSG_NOSIGNAL);
        if (n > 0) {
          p.begin += static_cast<size_t>(n);
          progress = true;
          if (p.begin == p.end) p.begin = p.end = 0;
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
          return false;
        }
      }
      if (p.eof && p.begin == p.end && !p.shut) {
        ::shutdown(to, SHUT_WR);
        p.shut = true;
      }
      if (!progress) return true;
    }
  };
  if (!move(c.outer.get(), c.inner.get(), c.up) || !move(c.inner.get(), c.outer.get(), c.down)) {
    return false;
  }
  if (c.up.shut && c.down.shut) return false;
  watch(c, false);
  return true;
}

void TcpGate::watch(Connection& c, bool add) {
  // Level-triggered: read while the pipe out of a socket has room, write while the pipe into
  // it has bytes.
  auto interest = [](const Pipe& out, const Pipe& in) {
    uint32_t e = 0;
    if (!out.eof && out.end < out.bytes.size()) e |= EPOLLIN;
    if (in.begin < in.end) e |= EPOLLOUT;
    return e;
  };
  for (int side = 0; side < 2; ++side) {
    epoll_event ev{};
    ev.events = side == 0 ? interest(c.up, c.down) : interest(c.down, c.up);
    ev.data.u64 = c.id << 1 | static_cast<uint64_t>(side);
    ::epoll_ctl(epoll_.get(), add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD,
                side == 0 ? c.outer.get() : c.inner.get(), &ev);
  }
}

void TcpGate::close(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  registry_.forget_tcp(it->second->inner_port);
  auto held = per_ip_.find(it->second->ip);
  if (held != per_ip_.end() && --held->second == 0) per_ip_.erase(held);
  connections_.erase(it);  // closing the fds takes them out of the epoll set
}

}  // namespace daqiri::control
