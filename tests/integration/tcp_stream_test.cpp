// TCP streams through a flow: a server flow accepting connections, a client flow dialling
// and redialling, every byte in order, pollers that sleep while nothing happens; and messages
// written to those connections through a tcp TX queue, whole, in order, to the connection they
// name, a slow or vanished peer holding back only what was for it.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/abi.h"
#include "daqiri/test_pattern.hpp"
#include "daqiri/v1/control.grpc.pb.h"
#include "dataplane_fixture.hpp"
#include "harness.hpp"
#include "support/tcp_messages.hpp"
#include "thread_stop.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

uint64_t fnv(const std::vector<uint8_t>& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : bytes)
    h = (h ^ b) * 1099511628211ull;
  return h;
}

std::vector<uint8_t> noise(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = static_cast<uint8_t>(seed >> 24);
  }
  return v;
}

void send_all(int fd, const std::vector<uint8_t>& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << std::strerror(errno);
    off += size_t(n);
  }
}

std::string stream_line(size_t bytes, uint64_t hash) {
  char buf[80];
  std::snprintf(buf, sizeof buf, " bytes %zu fnv %016llx", bytes,
                static_cast<unsigned long long>(hash));
  return buf;
}

class TcpStreamTest : public DataPlaneTest {
 protected:
  // The daemon on the test configuration plus flow tcp_in, a TCP server on `port`.
  void start_with_tcp_flow(uint16_t port) {
    socket_ = dir_.file("d.sock");
    config_ = dir_.write("d.yaml", test_config(socket_) +
                                       "  - {name: tcp_in, interface: lo, queue: rx0, match: "
                                       "{tcp_dst: " +
                                       std::to_string(port) + "}, allow_block: true}\n");
    daemon_ = std::make_unique<DaemonProcess>(dir_, std::vector<std::string>{"--config", config_});
    ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
    control_.emplace(socket_);
  }
};

TEST_F(TcpStreamTest, ServerFlowDeliversEveryConnectionsBytesInOrder) {
  start_with_tcp_flow(4400);
  if (HasFatalFailure()) return;
  // More than the flow's whole pool (4096 x 2 KiB): TCP flow control must hold the sender back
  // while the client catches up, and nothing may be lost.
  auto a = noise(12 << 20, 1);
  auto b = noise(1 << 20, 2);
  // Compact descriptors carry no connection number: the daemon refuses them on a TCP flow.
  Spawned compact(dir_, client({"frames-rx", "tcp_in", "1", "compact"}));
  EXPECT_EQ(compact.wait(), 3);
  EXPECT_THAT(compact.output(),
              HasSubstr("flow \"tcp_in\" delivers connections (TCP or RDMA), whose numbers "
                        "compact descriptors do not carry: attach without compact"));
  Spawned rx(dir_, client({"stream-rx", "tcp_in", std::to_string(a.size() + b.size())}));
  ASSERT_TRUE(rx.wait_for_output("attached"));
  int fa = ::socket(AF_INET, SOCK_STREAM, 0);
  int fb = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = loopback(4400);
  ASSERT_EQ(::connect(fa, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::connect(fb, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::thread ta([&] { send_all(fa, a); });
  send_all(fb, b);
  ta.join();
  ::close(fa);
  ::close(fb);
  ASSERT_EQ(rx.wait(), 0) << rx.output();
  EXPECT_THAT(rx.output(), HasSubstr(stream_line(a.size(), fnv(a))));
  EXPECT_THAT(rx.output(), HasSubstr(stream_line(b.size(), fnv(b))));
}

// A TCP flow whose client holds nothing needs no timer: its poller sleeps up to a second at a
// time with a connection open and idle (with a timer, about 500 parks in half a second), and
// the bytes that come next still wake it.
TEST_F(TcpStreamTest, AnIdleConnectionLetsThePollerSleep) {
  start_with_tcp_flow(4401);
  if (HasFatalFailure()) return;
  auto first = noise(300000, 5);
  auto second = noise(200000, 6);
  Spawned rx(dir_, client({"stream-rx", "tcp_in", std::to_string(first.size() + second.size())}));
  ASSERT_TRUE(rx.wait_for_output("attached"));
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = loopback(4401);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  send_all(fd, first);
  ASSERT_TRUE(eventually([&](const v1::Stats& s) {
    const v1::FlowStats* f = flow_stats(s, "tcp_in");
    return f != nullptr && f->bytes() == first.size() && f->buffers_on_loan() == 0;
  })) << stats().DebugString();
  std::this_thread::sleep_for(100ms);  // the last spins and parks after the bytes
  uint64_t before = control_->parks("poll:rx:lo/rx0");
  std::this_thread::sleep_for(500ms);
  EXPECT_LE(control_->parks("poll:rx:lo/rx0") - before, 3u);
  send_all(fd, second);
  ::close(fd);
  ASSERT_EQ(rx.wait(), 0) << rx.output();
  std::vector<uint8_t> all = first;
  all.insert(all.end(), second.begin(), second.end());
  EXPECT_THAT(rx.output(), HasSubstr("stream 1" + stream_line(all.size(), fnv(all))));
}

// A client flow whose peer is away dials again 50 ms after a failure, doubling to 2 s: its
// poller sleeps from one dial to the next (on a 1 ms timer it parked about 500 times in half a
// second), and the dial that finds the peer back still comes on time.
TEST_F(TcpStreamTest, AClientFlowWhosePeerIsAwaySleepsUntilItsNextDial) {
  if (!is_root()) GTEST_SKIP() << "needs the admin role (root) to create the flow";
  start();
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr = loopback();
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(listener);  // a free port, nobody listening: every dial is refused
  std::string endpoint = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto r = run({ctl_path(), "--socket", socket_, "flows", "add", "tcp_out", "-i", "lo", "--connect",
                endpoint, "--allow-block"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::this_thread::sleep_for(300ms);  // dials at 0, 50 and 150 ms have failed
  uint64_t before = control_->parks("poll:rx:lo/rx0");
  std::this_thread::sleep_for(500ms);  // two more, at 350 and 750 ms
  EXPECT_LE(control_->parks("poll:rx:lo/rx0") - before, 10u);
  // The peer comes back; the next dial (at 1.55 s, then 3.15 s) finds it.
  listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  auto bytes = noise(100000, 7);
  Spawned rx(dir_, client({"stream-rx", "tcp_out", std::to_string(bytes.size())}));
  ASSERT_TRUE(rx.wait_for_output("attached"));
  pollfd p{listener, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << "no dial within 5 s of the peer's return";
  int c = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(c, 0);
  send_all(c, bytes);
  ::close(c);
  ::close(listener);
  ASSERT_EQ(rx.wait(), 0) << rx.output();
  EXPECT_THAT(rx.output(), HasSubstr(stream_line(bytes.size(), fnv(bytes))));
}

TEST_F(TcpStreamTest, ClientFlowConnectsAndReconnects) {
  if (!is_root()) GTEST_SKIP() << "needs the admin role (root) to create the flow";
  start();
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = loopback();
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::string endpoint = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto r = run({ctl_path(), "--socket", socket_, "flows", "add", "tcp_out", "-i", "lo", "--connect",
                endpoint, "--allow-block"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(run({ctl_path(), "--socket", socket_, "flows", "list"}).out,
              HasSubstr("connect=" + endpoint));
  auto first = noise(500000, 3);
  auto second = noise(700000, 4);
  Spawned rx(dir_, client({"stream-rx", "tcp_out", std::to_string(first.size() + second.size())}));
  ASSERT_TRUE(rx.wait_for_output("attached"));
  int c1 = ::accept(listener, nullptr, nullptr);  // the daemon dialled in
  ASSERT_GE(c1, 0);
  send_all(c1, first);
  ::close(c1);                                    // the peer goes away ...
  int c2 = ::accept(listener, nullptr, nullptr);  // ... and the daemon dials again
  ASSERT_GE(c2, 0);
  send_all(c2, second);
  ::close(c2);
  ::close(listener);
  ASSERT_EQ(rx.wait(), 0) << rx.output();
  EXPECT_THAT(rx.output(), HasSubstr("stream 1" + stream_line(first.size(), fnv(first))));
  EXPECT_THAT(rx.output(), HasSubstr("stream 2" + stream_line(second.size(), fnv(second))));
}

// ---- TX: messages on the flow's connections ----

// A peer dialled in to the flow; a small `rcvbuf` keeps what the daemon can write ahead of its
// reads short.
int dial(uint16_t port, int rcvbuf = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in addr = loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads up to `n` bytes within `timeout`: how many came, and whether the stream ended (the
// peer closed or reset it) rather than the time running out.
struct Read {
  size_t got = 0;
  bool ended = false;
};
Read read_up_to(int fd, uint8_t* out, size_t n, std::chrono::milliseconds timeout = 30s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  Read r;
  while (r.got < n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) != 1) break;
    ssize_t k = ::recv(fd, out + r.got, n - r.got, 0);
    if (k <= 0) {
      r.ended = true;
      break;
    }
    r.got += size_t(k);
  }
  return r;
}

// Reads `count` messages of `size` bytes: each one's tag and seq, or a failure naming the first
// that is not whole.
::testing::AssertionResult read_messages(int fd, size_t size, size_t count,
                                         std::vector<std::pair<uint32_t, uint32_t>>& got) {
  std::vector<uint8_t> m(size);
  for (size_t i = 0; i < count; ++i) {
    size_t n = read_up_to(fd, m.data(), size).got;
    if (n != size) {
      return ::testing::AssertionFailure()
             << "message " << i << ": " << n << " of " << size << " bytes came";
    }
    uint32_t tag = 0;
    uint32_t seq = 0;
    if (!tcp_messages::check(m, tag, seq)) {
      return ::testing::AssertionFailure()
             << "message " << i << " (tag " << tag << ", seq " << seq << ") is not whole";
    }
    got.emplace_back(tag, seq);
  }
  return ::testing::AssertionSuccess();
}

std::vector<std::pair<uint32_t, uint32_t>> messages(uint32_t tag, uint32_t count) {
  std::vector<std::pair<uint32_t, uint32_t>> v;
  for (uint32_t i = 0; i < count; ++i)
    v.emplace_back(tag, i);
  return v;
}

// Nothing more comes within `quiet`.
bool nothing_more(int fd, std::chrono::milliseconds quiet = 200ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, int(quiet.count())) == 0;
}

class TcpTxTest : public DataPlaneTest {
 protected:
  static constexpr uint16_t kPort = 4410;

  // Flow tcp_in, a TCP server on kPort, and on the same interface TX queue tcp0 (tx_policy
  // tcp) of `ring` slots and buffers of `size` bytes.
  void start_tcp_tx(uint32_t size, uint32_t ring) {
    socket_ = dir_.file("d.sock");
    uint32_t batch = std::max(1u, ring / 2);
    uint32_t bufs = ring * 3 / 2 + batch;
    start_config("daemon:\n  socket: " + socket_ +
                 "\n  metrics: \"off\"\n"
                 "memory_regions:\n"
                 "  - {name: rx_host, kind: host, buf_size: 2048, num_bufs: 4096}\n"
                 "  - {name: messages, kind: host, buf_size: " +
                 std::to_string(size) + ", num_bufs: " + std::to_string(bufs) +
                 "}\n"
                 "interfaces:\n"
                 "  - name: lo\n"
                 "    backend: socket\n"
                 "    address: 127.0.0.1\n"
                 "    rx: {queues: [{name: rx0, regions: [rx_host]}]}\n"
                 "    tx: {queues: [{name: tcp0, tx_policy: tcp, ring_size: " +
                 std::to_string(ring) + ", batch_size: " + std::to_string(batch) +
                 ", regions: [messages]}]}\n"
                 "flows:\n"
                 "  - {name: tcp_in, interface: lo, queue: rx0, match: {tcp_dst: " +
                 std::to_string(kPort) + "}, allow_block: true}\n");
  }
  // Waits until the flow has `n` connections open.
  bool connections(uint32_t n) {
    return eventually([&](const v1::Stats& s) {
      const v1::FlowStats* f = flow_stats(s, "tcp_in");
      return f != nullptr && f->connections() == n;
    });
  }
  // Peers dialled in one after another: the flow numbers them 1, 2, ... in that order.
  std::vector<int> peers(const std::vector<int>& rcvbufs) {
    std::vector<int> fds;
    for (int rcvbuf : rcvbufs) {
      fds.push_back(dial(kPort, rcvbuf));
      EXPECT_GE(fds.back(), 0);
      EXPECT_TRUE(connections(uint32_t(fds.size()))) << stats().DebugString();
    }
    return fds;
  }
  std::vector<std::string> stream_tx(uint16_t conn, uint32_t count, size_t size, uint32_t tag) {
    return client({"stream-tx", "lo", std::to_string(conn), std::to_string(count),
                   std::to_string(size), std::to_string(tag)});
  }
  static std::string sent(uint32_t count, uint32_t failed) {
    return "sent " + std::to_string(count) + ", " + std::to_string(failed) + " failed";
  }
};

// Each message goes whole to the connection it names (0: the one opened first); one naming a
// connection that is not open, or no longer, comes back failed and goes nowhere.
TEST_F(TcpTxTest, MessagesGoWholeToTheConnectionTheyName) {
  start_tcp_tx(4096, 64);
  if (HasFatalFailure()) return;
  auto fds = peers({0, 0});
  auto run_tx = [&](uint16_t conn, uint32_t count, uint32_t tag) {
    auto r = run(stream_tx(conn, count, 3000, tag));
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r.out;
  };
  EXPECT_THAT(run_tx(1, 100, 1), HasSubstr(sent(100, 0)));
  EXPECT_THAT(run_tx(2, 50, 2), HasSubstr(sent(50, 0)));
  EXPECT_THAT(run_tx(0, 10, 3), HasSubstr(sent(10, 0)));
  EXPECT_THAT(run_tx(77, 5, 4), HasSubstr(sent(5, 5)));
  std::vector<std::pair<uint32_t, uint32_t>> a;
  std::vector<std::pair<uint32_t, uint32_t>> b;
  ASSERT_TRUE(read_messages(fds[0], 3000, 110, a));
  ASSERT_TRUE(read_messages(fds[1], 3000, 50, b));
  auto want_a = messages(1, 100);
  auto tail = messages(3, 10);
  want_a.insert(want_a.end(), tail.begin(), tail.end());
  EXPECT_EQ(a, want_a);
  EXPECT_EQ(b, messages(2, 50));
  EXPECT_TRUE(nothing_more(fds[0]));
  EXPECT_TRUE(nothing_more(fds[1]));
  // A connection that closed: its number names nothing now.
  ::close(fds[1]);
  ASSERT_TRUE(connections(1));
  EXPECT_THAT(run_tx(2, 5, 5), HasSubstr(sent(5, 5)));
  EXPECT_TRUE(nothing_more(fds[0]));
  ::close(fds[0]);
}

// A peer that does not read fills its socket: the messages for it wait in the daemon, whole and
// in order, and their sender's ring fills; another sender's messages to another peer go on.
TEST_F(TcpTxTest, ASlowPeerHoldsBackOnlyTheMessagesForIt) {
  start_tcp_tx(65536, 64);
  if (HasFatalFailure()) return;
  auto fds = peers({4096, 0});
  Spawned slow(dir_, stream_tx(1, 300, 65536, 1));
  ASSERT_TRUE(slow.wait_for_output("attached"));
  std::this_thread::sleep_for(300ms);
  EXPECT_THAT(slow.output(), Not(HasSubstr("sent"))) << "20 MB went to a peer that reads nothing";
  auto other = run(stream_tx(2, 20, 65536, 2));
  EXPECT_THAT(other.out, HasSubstr(sent(20, 0))) << other.err;
  std::vector<std::pair<uint32_t, uint32_t>> b;
  ASSERT_TRUE(read_messages(fds[1], 65536, 20, b));
  EXPECT_EQ(b, messages(2, 20));
  std::vector<std::pair<uint32_t, uint32_t>> a;
  ASSERT_TRUE(read_messages(fds[0], 65536, 300, a));
  EXPECT_EQ(a, messages(1, 300));
  ASSERT_EQ(slow.wait(), 0) << slow.output();
  EXPECT_THAT(slow.output(), HasSubstr(sent(300, 0)));
  for (int fd : fds)
    ::close(fd);
}

// Two senders to one connection whose peer reads slowly: a message the socket took part of
// keeps the connection until its rest went, so the peer reads each message whole, never
// another's bytes inside it.
TEST_F(TcpTxTest, TwoSendersToOneConnectionNeverInterleave) {
  start_tcp_tx(65536, 64);
  if (HasFatalFailure()) return;
  auto fds = peers({4096});
  Spawned x(dir_, stream_tx(1, 100, 65536, 1));
  Spawned y(dir_, stream_tx(1, 100, 65536, 2));
  ASSERT_TRUE(x.wait_for_output("attached"));
  ASSERT_TRUE(y.wait_for_output("attached"));
  std::this_thread::sleep_for(200ms);
  std::vector<std::pair<uint32_t, uint32_t>> got;
  ASSERT_TRUE(read_messages(fds[0], 65536, 200, got));
  std::map<uint32_t, std::vector<std::pair<uint32_t, uint32_t>>> by_tag;
  for (const auto& m : got)
    by_tag[m.first].push_back(m);
  EXPECT_EQ(by_tag[1], messages(1, 100));
  EXPECT_EQ(by_tag[2], messages(2, 100));
  EXPECT_EQ(x.wait(), 0) << x.output();
  EXPECT_EQ(y.wait(), 0) << y.output();
  ::close(fds[0]);
}

// Caps the kernel's TCP send buffers of this test's network namespace at `bytes`, so that a
// larger message cannot go whole to a peer that reads nothing. Only in a namespace of the
// test's own (tests/own-network says so), never the host's: false elsewhere.
bool cap_tcp_send_buffers(size_t bytes) {
  if (std::getenv("DAQIRI_OWN_NETWORK") == nullptr) return false;
  std::ofstream f("/proc/sys/net/ipv4/tcp_wmem");
  f << "4096 16384 " << bytes << "\n";
  f.flush();
  return f.good();
}

// Bytes the peer's socket holds unread.
int unread(int fd) {
  int n = 0;
  ::ioctl(fd, FIONREAD, &n);
  return n;
}

// A sender killed while its message is half in the socket: the daemon ends that connection
// (its peer would read the next message's bytes as this one's rest) and nothing else; another
// peer's connection goes on, and the daemon stays healthy.
TEST_F(TcpTxTest, ASenderKilledMidMessageEndsThatConnectionOnly) {
  constexpr uint32_t kSize = 256 << 10;
  if (!cap_tcp_send_buffers(64 << 10)) GTEST_SKIP() << "needs a network namespace of its own";
  start_tcp_tx(kSize, 64);
  if (HasFatalFailure()) return;
  auto fds = peers({4096, 0});
  Spawned x(dir_, stream_tx(1, 4, kSize, 1));
  ASSERT_TRUE(x.wait_for_output("submitted"));
  // The first message is under way, and cannot go whole: the socket holds less.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (unread(fds[0]) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  ASSERT_GT(unread(fds[0]), 0);
  x.kill(SIGKILL);
  x.wait();
  std::vector<uint8_t> bytes(kSize);
  Read r = read_up_to(fds[0], bytes.data(), bytes.size(), 10s);
  EXPECT_GT(r.got, 0u);
  EXPECT_LT(r.got, kSize);
  EXPECT_TRUE(r.ended) << "the connection of a cut message is still open (" << r.got
                       << " bytes came)";
  ASSERT_TRUE(connections(1));
  auto y = run(stream_tx(2, 3, 1000, 2));
  EXPECT_THAT(y.out, HasSubstr(sent(3, 0))) << y.err;
  std::vector<std::pair<uint32_t, uint32_t>> b;
  ASSERT_TRUE(read_messages(fds[1], 1000, 3, b));
  EXPECT_EQ(b, messages(2, 3));
  EXPECT_TRUE(healthy());
  for (int fd : fds)
    ::close(fd);
}

}  // namespace
}  // namespace daqiri::test
