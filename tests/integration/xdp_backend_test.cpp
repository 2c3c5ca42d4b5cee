// The xdp backend on the host end of a veth pair: the kernel's senders in the peer's namespace
// (daqiri-gen, ping, bash's /dev/tcp), the daemon's flows taken into AF_XDP sockets and read by
// unprivileged clients, everything else answered by the host's own kernel. Needs root.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/common/unique_fd.hpp"
#include "daqiri/test_pattern.hpp"
#include "harness.hpp"
#include "stats_client.hpp"
#include "veth_pair.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

constexpr uint32_t kHostAddress = 0x0a4d0001;  // 10.77.0.1, VethPair's host end

// A kernel socket on the host end's address: what the kernel keeps reaches it.
UniqueFd host_socket(int type, uint16_t port) {
  UniqueFd fd(::socket(AF_INET, type, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(kHostAddress);
  int on = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
  if (type == SOCK_STREAM) ::listen(fd.get(), 4);
  return fd;
}

// Datagrams that reach `fd` within `wait` (then none for 200 ms).
int datagrams(int fd, std::chrono::milliseconds wait = 3s) {
  int n = 0;
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (::poll(&p, 1, n > 0 ? 200 : static_cast<int>(std::max(left.count(), 0L))) <= 0) return n;
    char buf[2048];
    if (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) ++n;
  }
}

class XdpBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!is_root()) GTEST_SKIP() << "XDP and AF_XDP need root";
    if (VethPair::ip_path().empty()) GTEST_SKIP() << "no ip command";
  }
  void TearDown() override {
    if (daemon_) {
      EXPECT_EQ(daemon_->stop(), 0) << daemon_->log();
    }
  }

  // `queues`: RX queue ids 0..queues-1 (rx0, rx1, ...); `flows`: YAML list items; `tx`: a
  // checked TX queue tx0 (id 0, beside rx0), sending from 10.77.0.1; `rx_extra`: more keys of
  // each RX queue.
  void start(const VethPair& veth, const std::string& flows, int queues = 1, bool tx = false,
             const std::string& rx_extra = "") {
    group_.emplace();
    user_.emplace(group_->name());
    socket_ = dir_.file("d.sock");
    std::string yaml = "daemon:\n  socket: " + socket_ +
                       "\n  metrics: \"off\"\n  socket_group: " + group_->name() +
                       "\n  access:\n    clients:\n      users: [" + user_->name() +
                       "]\n"
                       "memory_regions:\n"
                       "  - {name: rx, kind: host, buf_size: 2048, num_bufs: 4096}\n"
                       "  - {name: tx, kind: host, buf_size: 2048, num_bufs: 1024}\n"
                       "interfaces:\n"
                       "  - name: veth0\n    backend: xdp\n    address: " +
                       veth.host() + "\n";
    if (tx) {
      yaml +=
          "    source_ipv4: 10.77.0.1\n"
          "    tx:\n      queues:\n        - {name: tx0, id: 0, ring_size: 256, regions: [tx]}\n";
    }
    yaml += "    rx:\n      queues:\n";
    for (int q = 0; q < queues; ++q) {
      yaml += "        - {name: rx" + std::to_string(q) + ", id: " + std::to_string(q) +
              ", regions: [rx]" + rx_extra + "}\n";
    }
    yaml += "flows:\n" + flows;
    daemon_ = std::make_unique<DaemonProcess>(
        dir_, std::vector<std::string>{"--config", dir_.write("d.yaml", yaml)});
    ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
    control_.emplace(socket_);
  }

  std::vector<std::string> tap(const std::string& flow, uint64_t count) {
    return {ctl_path(), "--socket", socket_,     "tap", flow, "--count", std::to_string(count),
            "--quiet",  "--verify", "--timeout", "30"};
  }
  // daqiri-gen in the peer's namespace, to 10.77.0.1:port (on CPU `cpu` when >= 0).
  static std::vector<std::string> gen(const VethPair& veth, uint16_t port, int count,
                                      int cpu = -1) {
    std::vector<std::string> argv{gen_path(),
                                  "--dest",
                                  "10.77.0.1:" + std::to_string(port),
                                  "--size",
                                  "300",
                                  "--count",
                                  std::to_string(count),
                                  "--rate",
                                  "5000"};
    if (cpu >= 0) argv.insert(argv.begin(), {"/usr/bin/taskset", "-c", std::to_string(cpu)});
    return veth.in_namespace(argv);
  }
  std::string ctl(const std::vector<std::string>& args) {
    std::vector<std::string> a{ctl_path(), "--socket", socket_};
    a.insert(a.end(), args.begin(), args.end());
    auto r = run(a);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r.out;
  }
  v1::Stats stats() { return control_->get(); }
  bool eventually(const std::function<bool(const v1::Stats&)>& pred) {
    return control_->eventually(pred, 10s);
  }
  static uint64_t xstat(const v1::Stats& s, const std::string& name) {
    for (const auto& nic : s.nics()) {
      for (const auto& x : nic.xstats()) {
        if (x.name() == name) return x.value();
      }
    }
    ADD_FAILURE() << "no NIC counter " << name;
    return 0;
  }
  // The tap for `flow` attached and claimed, ready for frames.
  void attached(int taps) {
    ASSERT_TRUE(eventually([taps](const v1::Stats& s) { return claimed(s) == taps; }))
        << daemon_->log();
  }

  TempDir dir_;
  std::string socket_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::optional<StatsClient> control_;
  std::optional<TempGroup> group_;
  std::optional<TempUser> user_;
};

// A flow's datagrams reach an unprivileged client byte-exact while, on the same interface and
// at the same time, the kernel resolves ARP, answers ping, accepts a TCP connection and gets
// the datagrams of a port no flow takes.
TEST_F(XdpBackendTest, FlowsReachClientsWhileTheKernelKeepsEverythingElse) {
  VethPair veth({.host_address = true});
  start(veth, "  - {name: gen, interface: veth0, match: {udp_dst: 7100}}\n");
  UniqueFd udp = host_socket(SOCK_DGRAM, 7101);
  UniqueFd tcp = host_socket(SOCK_STREAM, 7102);
  Spawned rx(dir_, tap("gen", 3000), user_->ids());
  attached(1);
  Spawned flow_sender(dir_, gen(veth, 7100, 3000));  // 0.6 s at 5000 a second
  // Meanwhile: ARP (no static neighbour on the peer), ping, TCP and a plain UDP port.
  auto ping =
      run(veth.in_namespace({"/usr/bin/ping", "-c", "3", "-i", "0.2", "-W", "2", "10.77.0.1"}));
  EXPECT_EQ(ping.exit_code, 0) << ping.out << ping.err;
  EXPECT_THAT(ping.out, HasSubstr("3 received"));
  auto connect = run(
      veth.in_namespace({"/bin/bash", "-c", "exec 3<>/dev/tcp/10.77.0.1/7102 && echo hello >&3"}));
  EXPECT_EQ(connect.exit_code, 0) << connect.out << connect.err;
  UniqueFd accepted(::accept(tcp.get(), nullptr, nullptr));
  ASSERT_GE(accepted.get(), 0);
  char text[16] = {};
  EXPECT_EQ(::recv(accepted.get(), text, sizeof text, MSG_WAITALL), 6);
  EXPECT_STREQ(text, "hello\n");
  auto other = run(gen(veth, 7101, 5));
  EXPECT_EQ(other.exit_code, 0) << other.out;
  EXPECT_EQ(datagrams(udp.get()), 5);

  ASSERT_EQ(flow_sender.wait(), 0) << flow_sender.output();
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log() << stats().DebugString();
  EXPECT_THAT(rx.output(), HasSubstr("received 3000 packets, 900000 payload bytes"));
  EXPECT_THAT(rx.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  auto s = stats();
  EXPECT_EQ(flow_stats(s, "gen").packets(), 3000u);
  EXPECT_EQ(xstat(s, "flow_gen_redirected"), 3000u);
  EXPECT_EQ(xstat(s, "flow_gen_other_queue"), 0u);
  EXPECT_GE(xstat(s, "passed_to_kernel"), 5u + 3u + 3u);  // UDP, echo requests, TCP, ARP
  EXPECT_EQ(xstat(s, "rx0_rx_dropped"), 0u);
  EXPECT_THAT(ctl({"queues"}), HasSubstr("copy (AF_XDP, native XDP)"));
  EXPECT_THAT(ctl({"interfaces"}), HasSubstr("up, native XDP, copy"));
  ASSERT_EQ(s.nics_size(), 1);
  EXPECT_EQ(s.nics(0).driver(), "xdp (native XDP, copy) on " + veth.host());
  EXPECT_EQ(s.nics(0).link(), "up");
}

// A flow added at runtime takes its packets from the next one on; deleted, they reach the
// kernel again (a plain UDP socket on the port gets them), and the filter is not reloaded.
TEST_F(XdpBackendTest, FlowsAddedAndDeletedLiveMoveTheirPacketsAtOnce) {
  VethPair veth({.host_address = true});
  start(veth, "  - {name: keep, interface: veth0, match: {udp_dst: 7100}}\n");
  UniqueFd udp = host_socket(SOCK_DGRAM, 7200);
  ASSERT_EQ(run(gen(veth, 7200, 5)).exit_code, 0);
  EXPECT_EQ(datagrams(udp.get()), 5);

  ctl({"flows", "add", "late", "-i", "veth0", "--udp-dst", "7200"});
  Spawned rx(dir_, tap("late", 200), user_->ids());
  attached(1);
  ASSERT_EQ(run(gen(veth, 7200, 200)).exit_code, 0);
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log();
  EXPECT_THAT(rx.output(), HasSubstr("received 200 packets, 60000 payload bytes"));
  EXPECT_EQ(datagrams(udp.get(), 300ms), 0);  // none reached the kernel meanwhile
  EXPECT_EQ(xstat(stats(), "flow_late_redirected"), 200u);

  ctl({"flows", "delete", "late"});
  ASSERT_EQ(run(gen(veth, 7200, 5)).exit_code, 0);
  EXPECT_EQ(datagrams(udp.get()), 5);
  auto r = run(
      {ctl_path(), "--socket", socket_, "flows", "add", "tcp", "-i", "veth0", "--tcp-dst", "7300"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out + r.err, HasSubstr("an xdp interface takes UDP flows"));
}

// A client killed while it holds buffers gives every one back: the queue lends them again,
// and the next client receives everything sent to it.
TEST_F(XdpBackendTest, AKilledClientsBuffersAllComeBack) {
  VethPair veth({.host_address = true});
  start(veth, "  - {name: gen, interface: veth0, match: {udp_dst: 7100}}\n");
  Spawned slow(dir_, {test_client_path(), "slow", socket_, "gen", "1000"}, user_->ids());
  ASSERT_TRUE(slow.wait_for_output("attached")) << slow.output() << daemon_->log();
  attached(1);
  ASSERT_EQ(run(gen(veth, 7100, 500)).exit_code, 0);
  ASSERT_TRUE(eventually([](const v1::Stats& s) {
    return s.nics_size() == 1 && s.nics(0).queues(0).buffers_on_loan() >= 400;
  })) << stats().DebugString();
  slow.kill(SIGKILL);
  ASSERT_TRUE(eventually([](const v1::Stats& s) {
    return s.attachments_size() == 0 && s.nics(0).queues(0).buffers_on_loan() == 0;
  })) << stats().DebugString();
  Spawned rx(dir_, tap("gen", 3000), user_->ids());
  attached(1);
  ASSERT_EQ(run(gen(veth, 7100, 3000)).exit_code, 0);
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log();
  EXPECT_THAT(rx.output(), HasSubstr("received 3000 packets, 900000 payload bytes"));
}

// Two queues of a veth with two channels (the peer sends on the queue of its CPU, XPS): each
// queue's flow gets what arrives on its queue; a flow's packets that arrive on another queue go
// on to the kernel, counted, instead of vanishing.
TEST_F(XdpBackendTest, EachQueueTakesItsOwnFlowsAndLeavesOtherQueuesPacketsToTheKernel) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two CPUs";
  VethPair veth({.host_address = true, .queues = 2});
  for (int q = 0; q < 2; ++q) {  // CPU q sends on queue q
    auto xps =
        run(veth.in_namespace({"/bin/sh", "-c",
                               "echo " + std::to_string(1 << q) + " > /sys/class/net/" +
                                   veth.peer() + "/queues/tx-" + std::to_string(q) + "/xps_cpus"}));
    ASSERT_EQ(xps.exit_code, 0) << xps.out << xps.err;
  }
  start(veth,
        "  - {name: a, interface: veth0, queue: rx0, match: {udp_dst: 7100}}\n"
        "  - {name: b, interface: veth0, queue: rx1, match: {udp_dst: 7101}}\n",
        2);
  UniqueFd udp = host_socket(SOCK_DGRAM, 7100);
  Spawned rx_a(dir_, tap("a", 1000), user_->ids());
  Spawned rx_b(dir_, tap("b", 1000), user_->ids());
  attached(2);
  ASSERT_EQ(run(gen(veth, 7100, 1000, 0)).exit_code, 0);
  ASSERT_EQ(run(gen(veth, 7101, 1000, 1)).exit_code, 0);
  ASSERT_EQ(rx_a.wait(), 0) << rx_a.output() << daemon_->log() << stats().DebugString();
  ASSERT_EQ(rx_b.wait(), 0) << rx_b.output() << daemon_->log() << stats().DebugString();
  EXPECT_THAT(rx_a.output(), HasSubstr("received 1000 packets, 300000 payload bytes"));
  EXPECT_THAT(rx_b.output(), HasSubstr("received 1000 packets, 300000 payload bytes"));
  // Flow a's packets sent from CPU 1 arrive on queue 1: the kernel's.
  ASSERT_EQ(run(gen(veth, 7100, 5, 1)).exit_code, 0);
  EXPECT_EQ(datagrams(udp.get()), 5);
  auto s = stats();
  EXPECT_EQ(xstat(s, "flow_a_other_queue"), 5u);
  EXPECT_EQ(s.nics(0).queues(0).packets(), 1000u);
  EXPECT_EQ(s.nics(0).queues(1).packets(), 1000u);
}

// A busy_poll queue: its poller never parks and drives the kernel's preferred busy polling
// on the socket (a receive call whenever its ring is empty); every frame still arrives.
TEST_F(XdpBackendTest, ABusyPollQueueSpinsAndDeliversEverything) {
  VethPair veth({.host_address = true});
  start(veth, "  - {name: gen, interface: veth0, match: {udp_dst: 7100}}\n", 1, false,
        ", busy_poll: true");
  Spawned rx(dir_, tap("gen", 3000), user_->ids());
  attached(1);
  const uint64_t parks = control_->parks("poll:rx:veth0/rx0");
  ASSERT_EQ(run(gen(veth, 7100, 3000)).exit_code, 0);
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log();
  EXPECT_THAT(rx.output(), HasSubstr("received 3000 packets, 900000 payload bytes"));
  EXPECT_EQ(control_->parks("poll:rx:veth0/rx0"), parks);
}

// Every datagram to 10.77.0.2:9000, length-prefixed, into the file argv[1]; "ready" once bound,
// "received N" at the end (two seconds after the last).
constexpr const char* kReceiver = R"(
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
s.bind(("10.77.0.2", 9000))
s.settimeout(20)
n = 0
with open(sys.argv[1], "wb") as out:
    print("ready", flush=True)
    try:
        while True:
            d = s.recv(65536)
            out.write(len(d).to_bytes(4, "big") + d)
            n += 1
            s.settimeout(2)
    except socket.timeout:
        pass
print("received", n, flush=True)
)";

// Frames an unprivileged client submits leave through the queue's socket, byte-exact, to a
// kernel receiver on the peer; a frame from an address not the interface's comes back failed.
TEST_F(XdpBackendTest, ClientFramesLeaveThroughTheSocketByteExact) {
  VethPair veth({.host_address = true});
  start(veth, "  - {name: gen, interface: veth0, match: {udp_dst: 7100}}\n", 1, true);
  const std::string got = dir_.file("got.bin");
  Spawned receiver(dir_, veth.in_namespace({"/usr/bin/python3", "-c", kReceiver, got}));
  ASSERT_TRUE(receiver.wait_for_output("ready")) << receiver.output();
  auto mac = run(veth.in_namespace({"/bin/cat", "/sys/class/net/" + veth.peer() + "/address"}));
  ASSERT_EQ(mac.exit_code, 0);
  mac.out.erase(mac.out.find_last_not_of('\n') + 1);
  constexpr int kFrames = 3000;
  auto tx = run({test_client_path(), "tx-to", socket_, "veth0", "10.77.0.1:5555", "10.77.0.2:9000",
                 mac.out, std::to_string(kFrames), "777"},
                user_->ids());
  ASSERT_EQ(tx.exit_code, 0) << tx.out << tx.err << daemon_->log();
  EXPECT_THAT(tx.out + tx.err, HasSubstr("sent 3000, 0 failed"));
  auto spoofed = run({test_client_path(), "tx-to", socket_, "veth0", "10.77.0.9:5555",
                      "10.77.0.2:9000", mac.out, "10", "777"},
                     user_->ids());
  EXPECT_THAT(spoofed.out + spoofed.err, HasSubstr("sent 10, 10 failed"));
  ASSERT_EQ(receiver.wait(), 0) << receiver.output();
  EXPECT_THAT(receiver.output(), HasSubstr("received 3000"));
  std::ifstream in(got, std::ios::binary);
  std::vector<std::byte> expected(777);
  for (int i = 0; i < kFrames; ++i) {
    std::array<unsigned char, 4> length{};
    ASSERT_TRUE(in.read(reinterpret_cast<char*>(length.data()), 4)) << "datagram " << i;
    ASSERT_EQ((length[2] << 8) | length[3], 777) << "datagram " << i;
    std::vector<std::byte> datagram(777);
    in.read(reinterpret_cast<char*>(datagram.data()), 777);
    pattern::fill(expected, 9000, static_cast<uint64_t>(i));
    ASSERT_EQ(datagram, expected) << "datagram " << i;
  }
  auto s = stats();
  ASSERT_NE(nic_queue(s, "tx0"), nullptr);
  EXPECT_EQ(nic_queue(s, "tx0")->packets(), static_cast<uint64_t>(kFrames));
  EXPECT_EQ(xstat(s, "tx0_tx_invalid_descs"), 0u);
}

// A daemon killed leaves its filter on the interface; the next start removes it (and only it),
// and a stop leaves the interface without any.
TEST_F(XdpBackendTest, AKilledDaemonsFilterIsRemovedByTheNextStart) {
  VethPair veth({.host_address = true});
  auto attached_program = [&] {
    return run({VethPair::ip_path(), "link", "show", "dev", veth.host()}).out;
  };
  start(veth, "  - {name: gen, interface: veth0, match: {udp_dst: 7100}}\n");
  EXPECT_THAT(attached_program(), HasSubstr("xdp"));
  daemon_->stop(SIGKILL);
  daemon_.reset();
  EXPECT_THAT(attached_program(), HasSubstr("xdp"));  // left behind
  start(veth, "  - {name: gen, interface: veth0, match: {udp_dst: 7100}}\n");
  EXPECT_THAT(daemon_->log(), HasSubstr("removed 1 flow filter(s)"));
  Spawned rx(dir_, tap("gen", 100), user_->ids());
  attached(1);
  ASSERT_EQ(run(gen(veth, 7100, 100)).exit_code, 0);
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log();
  ASSERT_EQ(daemon_->stop(), 0) << daemon_->log();
  daemon_.reset();
  EXPECT_THAT(attached_program(), Not(HasSubstr("xdp")));
}

}  // namespace
}  // namespace daqiri::test
