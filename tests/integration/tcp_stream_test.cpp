// TCP streams through a flow: a server flow accepting connections, a client flow dialling
// and redialling, every byte in order, pollers that sleep while nothing happens.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
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
#include "thread_stop.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;
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

}  // namespace
}  // namespace daqiri::test
