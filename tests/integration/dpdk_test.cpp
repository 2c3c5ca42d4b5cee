// The DPDK backend with real DPDK: daqirid owns the EAL and drives virtual devices (net_null,
// net_ring, net_pcap, net_af_packet and net_af_xdp on a veth pair in a network namespace,
// net_memif against dpdk-testpmd); real clients, some unprivileged, check counts and bytes.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "core/rss_hash.hpp"
#include "daqiri/frame.hpp"
#include "daqiri/test_pattern.hpp"
#include "daqiri/v1/control.grpc.pb.h"
#include "harness.hpp"
#include "pcap_frames.hpp"
#include "stats_client.hpp"
#include "veth_pair.hpp"

namespace daqiri::test {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

uint64_t free_hugepages() {
  std::ifstream in("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
  uint64_t n = 0;
  in >> n;
  return n;
}

class DpdkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!is_root()) {
      GTEST_SKIP() << "DPDK's EAL needs root";
    }
  }
  void TearDown() override {
    if (daemon_) {
      EXPECT_EQ(daemon_->stop(), 0) << daemon_->log();
    }
  }

  // `interfaces` and `flows`: YAML list items, indented by two.
  std::string config(const std::string& socket, const std::string& interfaces,
                     const std::string& flows, bool huge = false,
                     const std::string& daemon_extra = "", uint32_t rx_buf_size = 2048) {
    return "daemon:\n  socket: " + socket + "\n  metrics: \"" + metrics_ + "\"\n" + daemon_extra +
           "dpdk:\n  hugepages: " + (huge ? "true" : "false") +
           "\n  memory_mb: 256\n"
           "memory_regions:\n"
           "  - {name: rx, kind: host, buf_size: " +
           std::to_string(rx_buf_size) +
           ", num_bufs: 4096}\n"
           "  - {name: tx, kind: host, buf_size: 2048, num_bufs: 2048}\n"
           "interfaces:\n" +
           interfaces + "flows:\n" + flows;
  }
  static std::string port(const std::string& name, const std::string& address, int rx_queues = 1,
                          bool tx = true) {
    // The test clients send from 127.0.0.1.
    std::string y = "  - name: " + name + "\n    backend: dpdk\n    address: \"" + address +
                    "\"\n    source_ipv4: 127.0.0.1\n    rx:\n      queues:\n";
    for (int q = 0; q < rx_queues; ++q)
      y += "        - {name: rx" + std::to_string(q) + ", regions: [rx]}\n";
    if (tx) y += "    tx:\n      queues:\n        - {name: tx0, regions: [tx]}\n";
    return y;
  }

  void start(const std::string& yaml) {
    socket_ = dir_.file("d.sock");
    std::string path = dir_.write("d.yaml", yaml);
    daemon_ = std::make_unique<DaemonProcess>(dir_, std::vector<std::string>{"--config", path});
    ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
    control_.emplace(socket_);
  }

  // An unprivileged user allowed to attach (the socket group and the clients list).
  std::string unprivileged_access() {
    group_.emplace();
    user_.emplace(group_->name());
    return "  socket_group: " + group_->name() + "\n  access:\n    clients:\n      users: [" +
           user_->name() + "]\n";
  }

  std::vector<std::string> tap(const std::string& flow, uint64_t count,
                               std::vector<std::string> extra = {}) {
    std::vector<std::string> a{
        ctl_path(), "--socket",  socket_, "tap", flow, "--count", std::to_string(count),
        "--quiet",  "--timeout", "30"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  v1::Stats stats() { return control_->get(); }
  bool eventually(const std::function<bool(const v1::Stats&)>& pred) {
    return control_->eventually(pred, 10s);
  }
  static const v1::FlowStats& flow(const v1::Stats& s, const std::string& name) {
    return flow_stats(s, name);
  }
  static const v1::NicQueueStats& queue(const v1::Stats& s, const std::string& name) {
    if (const v1::NicQueueStats* q = nic_queue(s, name)) return *q;
    static v1::NicQueueStats none;
    ADD_FAILURE() << "no NIC queue " << name;
    return none;
  }
  std::string ctl(const std::vector<std::string>& args) {
    std::vector<std::string> a{ctl_path(), "--socket", socket_};
    a.insert(a.end(), args.begin(), args.end());
    auto r = run(a);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r.out;
  }

  TempDir dir_;
  std::string metrics_ = "off";  // config()'s daemon.metrics
  std::string socket_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::optional<StatsClient> control_;
  std::optional<TempGroup> group_;
  std::optional<TempUser> user_;
};

// net_null: every frame is 64 zero bytes, taken by the queue's catch-all flow and read by an
// unprivileged client straight out of the queue's mbufs. Run with and without hugepages.
class NullPortTest : public DpdkTest, public ::testing::WithParamInterface<bool> {};

TEST_P(NullPortTest, DeliversBurstsToAnUnprivilegedClient) {
  bool huge = GetParam();
  if (huge && free_hugepages() < 256) {
    GTEST_SKIP() << "needs 256 free 2 MiB hugepages (tools/install-deps reserves them)";
  }
  start(config(dir_.file("d.sock"), port("null0", "net_null0"),
               "  - {name: all, interface: null0, match: {any: true}, allow_block: true}\n", huge,
               unprivileged_access()));
  auto r = run(tap("all", 200000), user_->ids());
  ASSERT_EQ(r.exit_code, 0) << r.out << daemon_->log();
  EXPECT_THAT(r.out, HasSubstr("received 200000 packets"));

  auto s = stats();
  const auto& f = flow(s, "all");
  EXPECT_GE(f.packets(), 200000u);
  EXPECT_EQ(f.bytes(), f.packets() * 64);  // net_null's frames: 64 bytes each
  ASSERT_EQ(s.nics_size(), 1);
  EXPECT_EQ(s.nics(0).driver(), "net_null");
  EXPECT_GE(s.nics(0).rx_packets(), f.packets());
  EXPECT_EQ(queue(s, "rx0").copied(), 0u);  // the PMD filled the client-shared buffers
  EXPECT_EQ(queue(s, "rx0").unmatched(), 0u);
  EXPECT_EQ(queue(s, "rx0").buffers_on_loan(), 0u);  // the client gave every buffer back
  // And every mbuf is in the queue's mempool again: none lost, none given back twice (net_null
  // holds none between polls, and the queue is not polled without a client).
  EXPECT_EQ(queue(s, "rx0").mbufs_free(), 4096u);

  EXPECT_THAT(ctl({"queues"}), HasSubstr("zero-copy"));
  EXPECT_THAT(ctl({"interfaces"}), HasSubstr("up"));
  std::string flows = ctl({"flows", "list"});
  EXPECT_THAT(flows, HasSubstr("any"));
  EXPECT_THAT(flows, HasSubstr("software"));

  // Its client gone, the RX queue is not polled and the TX queue has nothing in flight: their
  // pollers sleep up to a second at a time (with a timer, about a thousand parks a second each).
  auto parks = [&] {
    uint64_t n = 0;
    v1::Stats now = stats();
    for (const auto& p : now.pollers())
      n += p.parks();
    return n;
  };
  ASSERT_EQ(stats().pollers_size(), 2);
  std::this_thread::sleep_for(100ms);
  uint64_t before = parks();
  std::this_thread::sleep_for(500ms);
  EXPECT_LE(parks() - before, 4u);
  EXPECT_THAT(ctl({"stats"}), HasSubstr("WOKEN_TIMER"));
}

INSTANTIATE_TEST_SUITE_P(Memory, NullPortTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return std::string(p.param ? "Hugepages" : "NoHuge");
                         });

// A client that falls behind: once its ring is full, net_null's frames are dropped and counted
// against it (and against the flow, which nobody else took them for); what it was given is a
// ring's worth plus what it released; killed, it gives every buffer back.
TEST_F(DpdkTest, AClientThatFallsBehindIsCountedAndGivesEveryBufferBack) {
  start(config(dir_.file("d.sock"), port("null0", "net_null0"),
               "  - {name: all, interface: null0, match: {any: true}, allow_block: true}\n", false,
               unprivileged_access()));
  Spawned slow(dir_, {test_client_path(), "slow", socket_, "all", "5"}, user_->ids());
  ASSERT_TRUE(slow.wait_for_output("attached")) << slow.output() << daemon_->log();
  ASSERT_TRUE(eventually([](const v1::Stats& s) {
    return s.attachments_size() == 1 && s.attachments(0).dropped_ring_full() > 100000;
  })) << stats().DebugString();
  auto s = stats();
  const auto& a = s.attachments(0);
  ASSERT_EQ(a.ring_size(), 1024u);
  // One release every 5 ms: over the few seconds at most this takes, a few hundred.
  EXPECT_GE(a.packets(), 1024u);
  EXPECT_LT(a.packets(), 1024u + 2000u);
  EXPECT_GE(a.ring_used(), 1000u);  // full: a released slot is filled again at once
  EXPECT_GT(flow(s, "all").dropped_rings_full(), 100000u);
  EXPECT_EQ(queue(s, "rx0").unmatched(), 0u);
  slow.kill(SIGKILL);
  EXPECT_TRUE(eventually([](const v1::Stats& t) {
    return t.attachments_size() == 0 && t.nics(0).queues(0).buffers_on_loan() == 0;
  })) << stats().DebugString();
}

// A buffer lent to one client alone goes back to the mempool as its mbuf, in a run, once the
// client releases it; one lent to several clients goes back by its reference count once the
// last lets go. A slow client's ring holds both kinds while other clients come and go on its
// flow; when it is gone, every mbuf is back in the queue's mempool: none lost, none returned
// twice (a slot lent by count and given back as the object an earlier slot there was lent
// with would be both).
TEST_F(DpdkTest, BuffersLentAloneOrSharedAllComeBack) {
  // Once through the loop for a lone catch-all's frames, once through the loop that steers
  // each frame (a second flow on the queue, which net_null's frames never match).
  for (const char* other :
       {"", "  - {name: none, interface: null0, match: {udp_dst: 1}, allow_block: true}\n"}) {
    SCOPED_TRACE(*other != 0 ? "steered" : "unread");
    start(config(dir_.file("d.sock"), port("null0", "net_null0"),
                 std::string(other) +
                     "  - {name: all, interface: null0, match: {any: true}, allow_block: true}\n",
                 false, unprivileged_access()));
    Spawned slow(dir_, {test_client_path(), "slow", socket_, "all", "1"}, user_->ids());
    ASSERT_TRUE(slow.wait_for_output("attached")) << slow.output() << daemon_->log();
    for (int i = 0; i < 3; ++i) {  // each tap turns the 4096-mbuf pool over five times
      auto r = run(tap("all", 20000), user_->ids());
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err << daemon_->log();
      EXPECT_THAT(r.out, HasSubstr("received 20000 packets"));
      std::this_thread::sleep_for(300ms);  // the slow client alone: its ring turns over
    }
    auto s = stats();
    ASSERT_EQ(s.attachments_size(), 1);
    EXPECT_EQ(s.attachments(0).bad_index(), 0u);
    EXPECT_GE(s.attachments(0).packets(), 1024u + 500u);  // it released hundreds meanwhile
    slow.kill(SIGKILL);
    EXPECT_TRUE(eventually([](const v1::Stats& t) {
      return t.attachments_size() == 0 && t.nics(0).queues(0).buffers_on_loan() == 0 &&
             t.nics(0).queues(0).mbufs_free() == 4096;
    })) << stats().DebugString();
    ASSERT_EQ(daemon_->stop(), 0) << daemon_->log();
    daemon_.reset();
  }
}

// A lone catch-all's one client (the queue's own way, DpdkRxQueue::poll_single) that releases
// what it was never lent is cut off; every mbuf it held goes back, and the next client of the
// flow receives as if nothing had happened.
TEST_F(DpdkTest, ALoneClientThatLiesIsCutOffAndItsBuffersComeBack) {
  start(config(dir_.file("d.sock"), port("null0", "net_null0"),
               "  - {name: all, interface: null0, match: {any: true}, allow_block: true}\n", false,
               unprivileged_access()));
  Spawned bad(dir_, {test_client_path(), "hostile", socket_, "all", "consumer-index"},
              user_->ids());
  ASSERT_EQ(bad.wait(), 0) << bad.output() << daemon_->log();
  EXPECT_THAT(bad.output(), HasSubstr("cut off"));
  EXPECT_TRUE(eventually([](const v1::Stats& t) {
    return t.attachments_size() == 0 && t.nics(0).queues(0).buffers_on_loan() == 0 &&
           t.nics(0).queues(0).mbufs_free() == 4096;
  })) << stats().DebugString();
  EXPECT_EQ(stats().sessions_cut_off(), 1u);
  EXPECT_THAT(daemon_->log(), HasSubstr("cutting off"));

  auto r = run(tap("all", 100000), user_->ids());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << daemon_->log();
  EXPECT_THAT(r.out, HasSubstr("received 100000 packets"));
  EXPECT_TRUE(eventually([](const v1::Stats& t) {
    return t.attachments_size() == 0 && t.nics(0).queues(0).buffers_on_loan() == 0 &&
           t.nics(0).queues(0).mbufs_free() == 4096;
  })) << stats().DebugString();
}

// A lone catch-all's one client, whose releases the poller reads only every few bursts while
// frames come (RxFanout::begin_single), has every buffer back once the frames stop, while it
// stays attached: on its own ledger and on the queue's (poll_single counts what came back).
TEST_F(DpdkTest, ALoneClientsReleasesAllComeBackOnceFramesStop) {
  std::vector<Frame> frames;
  for (uint64_t i = 0; i < 1000; ++i)
    frames.push_back(make_frame(1000, 7000, i, 64 + i % 200));
  std::string pcap = dir_.file("in.pcap");
  write_pcap(pcap, frames);
  start(config(dir_.file("d.sock"), port("pcap0", "net_pcap0,rx_pcap=" + pcap),
               "  - {name: all, interface: pcap0, match: {any: true}, allow_block: true}\n", false,
               unprivileged_access()));
  Spawned taker(dir_, {test_client_path(), "take", socket_, "all", "1000"}, user_->ids());
  ASSERT_TRUE(taker.wait_for_output("released 1000")) << taker.output() << daemon_->log();
  EXPECT_TRUE(eventually([](const v1::Stats& t) {
    return t.attachments_size() == 1 && t.attachments(0).packets() == 1000 &&
           t.attachments(0).buffers_on_loan() == 0 && t.nics(0).queues(0).buffers_on_loan() == 0;
  })) << stats().DebugString();
  taker.kill(SIGKILL);
}

// libdaqiri's RxStream::release takes only a burst of its own stream: two streams of one flow
// in one process, both rings full and held, each handed the other's last burst (whose slots
// exist in its ring too) release nothing; their own bursts then free their rings.
TEST_F(DpdkTest, ReleaseTakesOnlyItsOwnStreamsBursts) {
  start(config(dir_.file("d.sock"), port("null0", "net_null0"),
               "  - {name: all, interface: null0, match: {any: true}, allow_block: true}\n", false,
               unprivileged_access()));
  auto r = run({test_client_path(), "cross-release", socket_, "all"}, user_->ids());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << daemon_->log();
  EXPECT_THAT(r.out, HasSubstr("holding 1024 and 1024"));
  EXPECT_THAT(r.out, HasSubstr("ignored"));
  EXPECT_THAT(r.out, HasSubstr("released"));
}

// accurate_send: five frames submitted at once, each to leave 40 ms after the one before, come
// back from net_null (which frees a frame as it is sent) none before its time and the last
// after 200 ms; the same send times on a queue without accurate_send cut the client off.
TEST_F(DpdkTest, AccurateSendHoldsEachFrameUntilItsTime) {
  start(config(dir_.file("d.sock"),
               "  - name: null0\n    backend: dpdk\n    address: net_null0\n"
               "    source_ipv4: 127.0.0.1\n    tx:\n      queues:\n"
               "        - {name: timed, regions: [tx], accurate_send: true}\n"
               "        - {name: plain, regions: [tx]}\n",
               "  []\n"));
  if (HasFatalFailure()) return;
  auto timed = run({test_client_path(), "tx-at", socket_, "null0", "timed", "5", "40"});
  ASSERT_EQ(timed.exit_code, 0) << timed.out << daemon_->log();
  EXPECT_THAT(timed.out, HasSubstr("sent 5, early 0,"));  // the last one 200 ms on at least
  // net_null has no send scheduling: the poller holds them, and says so.
  EXPECT_THAT(daemon_->log(),
              HasSubstr("TX queue timed: accurate_send: the TX poller holds each timed frame "
                        "(net_null offers no send scheduling (SEND_ON_TIMESTAMP))"));
  auto plain = run({test_client_path(), "tx-at", socket_, "null0", "plain", "5", "40"});
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_THAT(plain.out, HasSubstr("came back 0 of 5 (detached)"));
  EXPECT_THAT(daemon_->log(), HasSubstr("wrote an impossible ring index or descriptor"));
}

// net_ring: what the daemon sends on TX comes back on RX. A client's TX buffers go out as
// external mbufs, and an unprivileged client reads them on the RX flow: nothing lost (blocking
// backpressure), nothing reordered or changed. Once through a flow the poller steers, once
// through a catch-all alone on the queue (the poller's loop for frames it does not read).
TEST_F(DpdkTest, RingPortLoopsClientTxToRxByteExact) {
  for (const char* match : {"{udp_dst: 6000}", "{any: true}"}) {
    SCOPED_TRACE(match);
    start(config(dir_.file("d.sock"), port("ring0", "net_ring0"),
                 std::string("  - {name: back, interface: ring0, match: ") + match +
                     ", allow_block: true}\n",
                 false, unprivileged_access()));
    // The RX pool (4096 buffers) turns over twice, the TX region (2048) five times.
    constexpr uint64_t kFrames = 10000;
    Spawned rx(dir_, tap("back", kFrames, {"--verify", "--block"}), user_->ids());
    ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 1; }));
    auto tx = run({test_client_path(), "tx", socket_, "ring0", "5555", "6000",
                   std::to_string(kFrames), "777"});
    ASSERT_EQ(tx.exit_code, 0) << tx.out << daemon_->log();
    EXPECT_THAT(tx.out, HasSubstr("sent 10000"));  // every buffer came back (flush)
    ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log();
    EXPECT_THAT(rx.output(), HasSubstr("received 10000 packets, 7770000 payload bytes"));
    EXPECT_THAT(rx.output(),
                HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
    auto s = stats();
    EXPECT_EQ(flow(s, "back").packets(), kFrames);
    EXPECT_EQ(flow(s, "back").bytes(), kFrames * (777 + 42));
    EXPECT_EQ(queue(s, "tx0").packets(), kFrames);
    // net_ring hands the sender's mbufs to the receiver: the queue copies them into its own
    // buffers and says so.
    EXPECT_EQ(queue(s, "rx0").copied(), kFrames);
    EXPECT_EQ(queue(s, "rx0").packets(), kFrames);
    EXPECT_THAT(ctl({"queues"}), HasSubstr("copy (the PMD delivers its own buffers)"));
    ASSERT_EQ(daemon_->stop(), 0) << daemon_->log();
    daemon_.reset();
  }
}

// DAQIRI's TX path waited for mbufs that only its own thread could free. Here the TX queue's
// header pool (ring 64 + 4 batches + 512 = 832 mbufs) runs dry while net_ring holds every
// frame sent (nobody receives yet): the TX queue counts it and stops taking frames, and the
// poller it shares with the RX queue keeps running. Once a client attaches on RX, that poller
// drains the ring, the headers come back, and every frame arrives, in order and intact.
TEST_F(DpdkTest, TxHeaderPoolRunningDryStallsNothing) {
  // One poller for both queues: the one thread that could free the headers is the TX queue's.
  std::string pin = "core: " + std::to_string(std::thread::hardware_concurrency() - 1);
  std::string itf =
      "  - name: ring0\n    backend: dpdk\n    address: net_ring0\n    source_ipv4: 127.0.0.1\n";
  itf += "    rx: {queues: [{name: rx0, " + pin + ", regions: [rx]}]}\n";
  itf += "    tx: {queues: [{name: tx0, " + pin +
         ", ring_size: 64, batch_size: 64, regions: [tx]}]}\n";
  start(config(dir_.file("d.sock"), itf,
               "  - {name: back, interface: ring0, match: {udp_dst: 6000}, allow_block: true}\n",
               false, unprivileged_access()));
  constexpr uint64_t kFrames = 1500;
  Spawned tx(dir_, {test_client_path(), "tx", socket_, "ring0", "5555", "6000",
                    std::to_string(kFrames), "200"});
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return queue(s, "tx0").no_header() > 0; }))
      << tx.output() << daemon_->log();
  // The dry pool is counted while the headers already taken still go out (under ASan the
  // count was 800 then): the queue stops once every header is on the ring, when its count
  // holds still. (A refill that took whole batches only stopped up to 63 short, in CI.)
  constexpr uint64_t kHeaders = 64 + 4 * 64 + 512;
  uint64_t stalled_at = queue(stats(), "tx0").packets();
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(200ms);
    uint64_t now = queue(stats(), "tx0").packets();
    if (now == stalled_at) break;
    stalled_at = now;
  }
  EXPECT_EQ(stalled_at, kHeaders);
  std::this_thread::sleep_for(200ms);
  auto s = stats();  // the control plane answers, and the queue stays where it stopped
  EXPECT_EQ(queue(s, "tx0").packets(), stalled_at);
  EXPECT_EQ(flow(s, "back").packets(), 0u);

  Spawned rx(dir_, tap("back", kFrames, {"--verify", "--block"}), user_->ids());
  ASSERT_EQ(rx.wait(), 0) << rx.output() << tx.output() << daemon_->log();
  EXPECT_THAT(rx.output(), HasSubstr("received 1500 packets, 300000 payload bytes"));
  EXPECT_THAT(rx.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  ASSERT_EQ(tx.wait(), 0) << tx.output() << daemon_->log();
  EXPECT_THAT(tx.output(), HasSubstr("sent 1500"));  // every buffer came back
  s = stats();
  EXPECT_EQ(queue(s, "tx0").packets(), kFrames);
  EXPECT_EQ(flow(s, "back").packets(), kFrames);
}

// A port that never frees what it is given (net_ring with no RX queue: nothing takes the frames
// off its ring), and a TX client that submits frames there and goes away: its attachment cannot
// be freed while the PMD holds them. The close waits a bounded time outside the data plane's
// lock, parks the attachment (counted, logged, NOT_SERVING); meanwhile and after, GetStats, a
// metrics scrape answer within a second, another client can attach; the daemon stops cleanly.
TEST_F(DpdkTest, ATxQueueThatNeverCompletesCannotWedgeTheControlPath) {
  uint16_t metrics_port = free_tcp_port();
  metrics_ = "127.0.0.1:" + std::to_string(metrics_port);
  start(config(dir_.file("d.sock"),
               "  - name: ring0\n    backend: dpdk\n    address: net_ring0\n"
               "    tx: {queues: [{name: tx0, regions: [tx], tx_policy: raw}]}\n"
               "  - name: null0\n    backend: dpdk\n    address: net_null0\n"
               "    rx: {queues: [{name: rx0, regions: [rx]}]}\n",
               "  - {name: all, interface: null0, match: {any: true}}\n"));
  Spawned leaver(dir_, {adversary_path(), "tx-leave", socket_, "ring0", "100"});
  ASSERT_TRUE(leaver.wait_for_output("submitted 100")) << leaver.output();
  ASSERT_TRUE(eventually([](const v1::Stats& s) {  // the PMD has them all
    return s.attachments_size() == 1 && s.attachments(0).packets() == 100;
  }));
  leaver.kill(SIGKILL);
  auto within_a_second = [](const auto& call) {
    auto start = std::chrono::steady_clock::now();
    call();
    return std::chrono::steady_clock::now() - start < 1s;
  };
  // The session's close is under way or done: the control path answers all along.
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(within_a_second([&] { (void)stats(); }));
    EXPECT_TRUE(within_a_second([&] { EXPECT_TRUE(http_get(metrics_port, "/metrics")); }));
    std::this_thread::sleep_for(150ms);
  }
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return s.attachments_parked() == 1; }))
      << daemon_->log();
  EXPECT_EQ(stats().attachments_size(), 0);
  EXPECT_THAT(daemon_->log(), HasSubstr("was not let go by its poller (poll:tx:ring0/tx0)"));
  auto body = http_get(metrics_port, "/metrics");
  ASSERT_TRUE(body);
  EXPECT_THAT(*body, HasSubstr("\ndaqiri_attachments_parked 1\n"));
  bool not_serving = false;
  for (int i = 0; i < 40 && !not_serving; ++i) {  // the daemon's health tick: every 500 ms
    not_serving = run({ctl_path(), "--socket", socket_, "health"}).exit_code != 0;
    if (!not_serving) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(not_serving);
  // A new client still gets in. Its process start alone can take over a second under a
  // sanitizer on a loaded host; a wedged attach path would never answer.
  Spawned other(dir_, {test_client_path(), "tx-idle", socket_, "ring0", "1"});
  EXPECT_TRUE(other.wait_for_output("attached", 10s)) << other.output();
}

// The NIC's own counters (rte_eth_stats and every xstat) and the queues' reach GetStats,
// `daqiri-ctl stats` and the metrics, the same numbers in each: net_ring counts the frames the
// daemon sent on TX and took back on RX.
TEST_F(DpdkTest, NicCountersReachCtlAndMetrics) {
  uint16_t metrics_port = free_tcp_port();
  metrics_ = "127.0.0.1:" + std::to_string(metrics_port);
  start(config(dir_.file("d.sock"), port("ring0", "net_ring0"),
               "  - {name: back, interface: ring0, match: {udp_dst: 6000}, allow_block: true}\n",
               false, unprivileged_access()));
  Spawned rx(dir_, tap("back", 1000, {"--block"}), user_->ids());
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 1; }));
  auto tx = run({test_client_path(), "tx", socket_, "ring0", "5555", "6000", "1000", "100"});
  ASSERT_EQ(tx.exit_code, 0) << tx.out << daemon_->log();
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log();
  // Its client gone, the RX queue is not polled: the counters hold still from here, and every
  // mbuf of the RX queue's pool is back in it (net_ring's frames were copied into them).
  ASSERT_TRUE(eventually([](const v1::Stats& s) {
    return s.attachments_size() == 0 && queue(s, "rx0").mbufs_free() == 4096;
  })) << stats().DebugString();
  auto s = stats();
  ASSERT_EQ(s.nics_size(), 1);
  const v1::NicStats& n = s.nics(0);
  EXPECT_EQ(n.rx_packets(), 1000u);
  EXPECT_EQ(n.tx_packets(), 1000u);
  auto xstat = [&n](const std::string& name) -> int64_t {
    for (const auto& x : n.xstats()) {
      if (x.name() == name) return static_cast<int64_t>(x.value());
    }
    return -1;
  };
  EXPECT_EQ(xstat("rx_good_packets"), 1000);
  EXPECT_EQ(xstat("tx_good_packets"), 1000);
  EXPECT_EQ(xstat("rx_missed_errors"), 0);
  EXPECT_EQ(queue(s, "rx0").copied(), 1000u);

  auto body = http_get(metrics_port, "/metrics");
  ASSERT_TRUE(body);
  auto metric = [&body](const std::string& name, const std::string& label) {
    return metric_value(*body, name, label);
  };
  EXPECT_EQ(metric("daqiri_nic_link_up", "interface=\"ring0\""), 1);
  EXPECT_EQ(metric("daqiri_nic_packets_total", "direction=\"rx\""), 1000);
  EXPECT_EQ(metric("daqiri_nic_packets_total", "direction=\"tx\""), 1000);
  EXPECT_EQ(metric("daqiri_nic_xstat", "name=\"rx_good_packets\""), 1000);
  EXPECT_EQ(metric("daqiri_nic_xstat", "name=\"tx_good_packets\""), 1000);
  EXPECT_EQ(metric("daqiri_nic_rx_missed_packets_total", "interface=\"ring0\""), 0);
  EXPECT_EQ(metric("daqiri_nic_rx_nombuf_total", "interface=\"ring0\""), 0);
  EXPECT_EQ(metric("daqiri_nic_errors_total", "direction=\"rx\""), 0);
  EXPECT_EQ(metric("daqiri_nic_queue_copied_packets_total", "queue=\"rx0\""), 1000);
  EXPECT_EQ(metric("daqiri_nic_queue_unmatched_packets_total", "queue=\"rx0\""), 0);
  EXPECT_EQ(metric("daqiri_nic_queue_tx_no_header_total", "queue=\"tx0\""), 0);
  EXPECT_EQ(metric("daqiri_nic_queue_mbufs_free", "queue=\"rx0\""), 4096);

  std::string table = ctl({"stats"});
  EXPECT_THAT(table, ContainsRegex("ring0 +net_ring +up +1000 "));
  EXPECT_THAT(table, ContainsRegex("ring0 +rx_good_packets +1000\n"));
  EXPECT_THAT(table, ContainsRegex("ring0 +tx_good_packets +1000\n"));
  EXPECT_THAT(table, ContainsRegex("ring0 +rx0 +rx +1000 .* 0 +4096\n"));  // ON_LOAN, MBUFS_FREE
  EXPECT_THAT(table, ContainsRegex("ring0 +tx0 +tx +1000 .* -\n"));
}

// net_pcap: two RX queues replay two files the test wrote; each flow's client gets exactly its
// frames, byte for byte; the other flow's frames on a queue are counted as unmatched there.
// A client's TX goes to a pcap file, byte for byte.
TEST_F(DpdkTest, PcapReplayDeliversEachFlowToItsClientByteExact) {
  std::vector<Frame> q0, q1, a_frames;
  for (uint64_t i = 0; i < 500; ++i) {
    a_frames.push_back(make_frame(1000, 7000, i, 100 + i % 400));
    q0.push_back(a_frames.back());
    if (i % 70 == 0) q0.push_back(make_frame(1000, 7001, 9000 + i, 60));  // 8 strays
    q1.push_back(make_frame(1001, 7001, i, 1400));
  }
  std::string p0 = dir_.file("q0.pcap"), p1 = dir_.file("q1.pcap"), out = dir_.file("tx.pcap");
  write_pcap(p0, q0);
  write_pcap(p1, q1);
  std::string vdev = "net_pcap0,rx_pcap=" + p0 + ",rx_pcap=" + p1 + ",tx_pcap=" + out;
  start(config(
      dir_.file("d.sock"), port("pcap0", vdev, 2),
      "  - {name: a, interface: pcap0, queue: rx0, match: {udp_dst: 7000}, allow_block: true}\n"
      "  - {name: b, interface: pcap0, queue: rx1, match: {udp_dst: 7001}, allow_block: true}\n",
      false, unprivileged_access()));
  std::string got_a = dir_.file("a.pcap");
  Spawned a(dir_, tap("a", 500, {"--verify", "--pcap", got_a}));
  Spawned b(dir_, tap("b", 500, {"--verify"}), user_->ids());
  ASSERT_EQ(a.wait(), 0) << a.output() << daemon_->log();
  ASSERT_EQ(b.wait(), 0) << b.output() << daemon_->log();
  EXPECT_THAT(a.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  EXPECT_THAT(b.output(), HasSubstr("received 500 packets, 700000 payload bytes"));
  EXPECT_THAT(b.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  auto received = read_pcap(got_a);
  ASSERT_EQ(received.size(), a_frames.size());
  for (size_t i = 0; i < received.size(); ++i)
    ASSERT_EQ(received[i], a_frames[i]) << "frame " << i;
  auto s = stats();
  EXPECT_EQ(queue(s, "rx0").unmatched(), 8u);
  EXPECT_EQ(flow(s, "a").packets(), 500u);
  EXPECT_EQ(flow(s, "b").packets(), 500u);

  auto tx = run({test_client_path(), "tx", socket_, "pcap0", "5555", "6001", "300", "555"});
  ASSERT_EQ(tx.exit_code, 0) << tx.out;
  ASSERT_EQ(daemon_->stop(), 0) << daemon_->log();  // net_pcap flushes its file on close
  daemon_.reset();
  auto sent = read_pcap(out);
  ASSERT_EQ(sent.size(), 300u);
  std::vector<std::byte> expect(555);
  for (uint64_t i = 0; i < sent.size(); ++i) {
    ASSERT_EQ(sent[i].size(), frame::kUdpHeaders + 555) << "frame " << i;
    pattern::fill(expect, 6001, i);
    ASSERT_EQ(std::memcmp(sent[i].data() + frame::kUdpHeaders, expect.data(), expect.size()), 0)
        << "frame " << i;
  }
}

// A catch-all alone on its queue takes frames without the daemon reading them: their
// descriptors say DAQIRI_PAYLOAD_UNREAD and the client library finds each payload itself. With
// a second flow on the queue the daemon reads every frame to steer it and says where the payload
// starts. Either way the client sees the same payloads, for every kind of frame the search meets;
// a client that asks for frames only (find_payloads off) gets no payload of an unread frame.
TEST_F(DpdkTest, ClientsFindThePayloadsOfFramesTheDaemonDidNotRead) {
  std::vector<Frame> frames;
  uint64_t payload_bytes = 0, frame_bytes = 0;
  for (uint64_t i = 0; i < 100; ++i) {
    for (auto& [f, at] : payload_search_cases(i)) {
      if (at != 0) payload_bytes += f.size() - at;
      frame_bytes += f.size();
      frames.push_back(std::move(f));
    }
  }
  std::string pcap = dir_.file("mixed.pcap");
  write_pcap(pcap, frames);
  std::string expect = "received " + std::to_string(frames.size()) + " packets, " +
                       std::to_string(payload_bytes) + " payload bytes";
  for (const char* other :
       {"", "  - {name: none, interface: pcap0, match: {udp_dst: 1}, allow_block: true}\n"}) {
    SCOPED_TRACE(*other != 0 ? "the daemon reads the frames" : "unread");
    // net_pcap replays the file from the start each time the daemon starts.
    auto replay = [&] {
      start(config(dir_.file("d.sock"), port("pcap0", "net_pcap0,rx_pcap=" + pcap, 1, false),
                   std::string(other) +
                       "  - {name: all, interface: pcap0, match: {any: true}, allow_block: true}\n",
                   false, unprivileged_access()));
    };
    replay();
    auto rx = run(tap("all", frames.size()), user_->ids());
    ASSERT_EQ(rx.exit_code, 0) << rx.out << rx.err << daemon_->log();
    EXPECT_THAT(rx.out, HasSubstr(expect));
    ASSERT_EQ(daemon_->stop(), 0) << daemon_->log();
    daemon_.reset();
    // Again, for a client that wants frames only.
    replay();
    auto frames_only =
        run({test_client_path(), "frames-rx", socket_, "all", std::to_string(frames.size())},
            user_->ids());
    ASSERT_EQ(frames_only.exit_code, 0) << frames_only.out << daemon_->log();
    EXPECT_THAT(frames_only.out,
                HasSubstr("received " + std::to_string(frames.size()) + " packets, " +
                          std::to_string(frame_bytes) + " frame bytes, " +
                          std::to_string(*other != 0 ? payload_bytes : 0) + " payload bytes, " +
                          std::to_string(frames.size()) + " stamped"));
    ASSERT_EQ(daemon_->stop(), 0) << daemon_->log();
    daemon_.reset();
    // And for one in compact descriptors, which carry no payload offset and no stamp: every
    // payload is found in its frame.
    replay();
    auto compact = run(
        {test_client_path(), "frames-rx", socket_, "all", std::to_string(frames.size()), "compact"},
        user_->ids());
    ASSERT_EQ(compact.exit_code, 0) << compact.out << daemon_->log();
    EXPECT_THAT(compact.out,
                HasSubstr("received " + std::to_string(frames.size()) + " packets, " +
                          std::to_string(frame_bytes) + " frame bytes, " +
                          std::to_string(payload_bytes) + " payload bytes, 0 stamped"));
    ASSERT_EQ(daemon_->stop(), 0) << daemon_->log();
    daemon_.reset();
  }
}

// net_af_packet and net_af_xdp on the host end of a veth pair, a kernel sender (daqiri-gen)
// in the namespace on the other: every datagram arrives, in order, intact.
class VethPortTest : public DpdkTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(VethPortTest, ReceivesWhatAKernelSenderSends) {
  if (VethPair::ip_path().empty()) GTEST_SKIP() << "no ip command";
  VethPair veth;
  std::string pmd = GetParam();
  std::string vdev = pmd + "0,iface=" + veth.host();
  if (pmd == "net_af_xdp") vdev += ",start_queue=0,queue_count=1";
  // af_xdp configures RX and TX queues in pairs. Buffers: af_packet wants 2016 bytes past the
  // mbuf headroom, af_xdp a whole mbuf within a 4 KiB UMEM chunk.
  start(config(dir_.file("d.sock"), port("veth0", vdev, 1, true),
               "  - {name: gen, interface: veth0, match: {udp_dst: 7100}, allow_block: true}\n",
               false, unprivileged_access(), 3072));
  veth.add_neighbour();
  Spawned rx(dir_, tap("gen", 3000, {"--verify", "--block"}), user_->ids());
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 1; }));
  std::this_thread::sleep_for(20ms);  // the queue starts polling within a millisecond
  // A tap that falls behind (a sanitizer build on two CPUs beside a spinning poller) must not
  // turn into lost frames: at 20 000 pps with drop-new backpressure its ring overflowed in about
  // one run of twenty under ThreadSanitizer (480 frames counted as dropped_rings_full). It
  // blocks instead (--block: the queue waits, the PMD's ring absorbs), at 5000 pps. A failure
  // prints the daemon's counters and the veth's, to tell where frames went.
  auto g = run(veth.in_namespace({gen_path(), "--dest", "10.77.0.1:7100", "--size", "300",
                                  "--count", "3000", "--rate", "5000"}));
  ASSERT_EQ(g.exit_code, 0) << g.out;
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log() << stats().DebugString()
                          << run(veth.in_namespace({VethPair::ip_path(), "-s", "link"})).out;
  EXPECT_THAT(rx.output(), HasSubstr("received 3000 packets, 900000 payload bytes"));
  EXPECT_THAT(rx.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  auto s = stats();
  EXPECT_EQ(flow(s, "gen").packets(), 3000u);
  // af_packet copies from its kernel ring into the queue's client-shared mbufs; af_xdp cannot
  // use them as its UMEM, so the queue copies from the PMD's own pool and says so.
  // (The namespace's own stray frames, IPv6 neighbour discovery, may arrive too: unmatched.)
  const auto& q = queue(s, "rx0");
  EXPECT_EQ(q.copied(), pmd == "net_af_xdp" ? q.packets() : 0u);
}

INSTANTIATE_TEST_SUITE_P(Pmd, VethPortTest, ::testing::Values("net_af_packet", "net_af_xdp"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param).substr(4);
                         });

// RSS in software: net_af_packet with four queue pairs on the veth's host end (the kernel's
// fanout puts each datagram on one of them, by its own hash), one flow spread over the four
// queues, a client on each. Every one of 16 tuples (10.77.0.2:6000 to UDP ports 7200-7215)
// arrives whole on the queue the Toeplitz hash picks, wherever the kernel put it, and intact.
TEST_F(DpdkTest, RssSpreadsEachTupleWholeOntoTheQueueItsHashPicks) {
  if (VethPair::ip_path().empty()) GTEST_SKIP() << "no ip command";
  constexpr uint32_t kQueues = 4, kPorts = 16, kPerPort = 100;
  std::array<std::vector<uint16_t>, kQueues> ports_of;  // what each queue's client should get
  for (uint16_t p = 7200; p < 7200 + kPorts; ++p) {
    uint32_t hash = core::rss_hash_ipv4_udp(0x0a4d0002, 0x0a4d0001, 6000, p);
    ports_of[core::rss_queue_index(hash, kQueues)].push_back(p);
  }
  ASSERT_GE(
      std::count_if(ports_of.begin(), ports_of.end(), [](const auto& v) { return !v.empty(); }), 3);
  VethPair veth;
  start(config(dir_.file("d.sock"),
               port("veth0", "net_af_packet0,iface=" + veth.host() + ",qpairs=4", kQueues),
               "  - {name: spread, interface: veth0, queues: [rx0, rx1, rx2, rx3],\n"
               "     match: {udp_dst: 7200-7215}, allow_block: true}\n",
               false, unprivileged_access(), 3072));
  veth.add_neighbour();
  // Each queue is a ring of its own: the flow's name alone says none.
  auto by_name = run({ctl_path(), "--socket", socket_, "tap", "spread", "--count", "1"});
  EXPECT_NE(by_name.exit_code, 0);
  EXPECT_THAT(by_name.err, HasSubstr("flow \"spread\" spreads over RX queues rx0, rx1, rx2, rx3 "
                                     "of veth0 (RSS), each a ring of its own: attach to each "
                                     "queue"));
  std::vector<std::unique_ptr<Spawned>> clients;
  for (uint32_t q = 0; q < kQueues; ++q) {
    if (ports_of[q].empty()) continue;
    clients.push_back(std::make_unique<Spawned>(
        dir_,
        std::vector<std::string>{test_client_path(), "queue-rx", socket_, "veth0",
                                 "rx" + std::to_string(q),
                                 std::to_string(ports_of[q].size() * kPerPort)},
        user_->ids()));
  }
  ASSERT_TRUE(eventually(
      [n = clients.size()](const v1::Stats& s) { return claimed(s) == static_cast<int>(n); }));
  auto g =
      run(veth.in_namespace({gen_path(), "--dest", "10.77.0.1:7200", "--ports",
                             std::to_string(kPorts), "--source", "10.77.0.2:6000", "--size", "200",
                             "--count", std::to_string(kPorts * kPerPort), "--rate", "5000"}));
  ASSERT_EQ(g.exit_code, 0) << g.out;
  size_t c = 0;
  for (uint32_t q = 0; q < kQueues; ++q) {
    if (ports_of[q].empty()) continue;
    Spawned& client = *clients[c++];
    ASSERT_EQ(client.wait(), 0) << "rx" << q << ": " << client.output() << daemon_->log()
                                << stats().DebugString();
    for (uint16_t p : ports_of[q]) {
      EXPECT_THAT(client.output(), HasSubstr("port " + std::to_string(p) + " packets " +
                                             std::to_string(kPerPort) + "\n"))
          << "rx" << q;
    }
    EXPECT_THAT(client.output(), HasSubstr("bad 0"));
  }
  auto s = stats();
  EXPECT_EQ(flow(s, "spread").packets(), kPorts * kPerPort);
  EXPECT_EQ(flow(s, "spread").dropped_rings_full(), 0u);

  // Through the control API: deleted with every queue's member, made again over two queues.
  auto ctl = [this](std::vector<std::string> args) {
    args.insert(args.begin(), {ctl_path(), "--socket", socket_});
    return run(args);
  };
  ASSERT_EQ(ctl({"flows", "delete", "spread"}).exit_code, 0) << daemon_->log();
  auto added = ctl({"flows", "add", "pair", "-i", "veth0", "-q", "rx2,rx3", "--udp-dst", "7300"});
  ASSERT_EQ(added.exit_code, 0) << added.out << added.err;
  auto listed = ctl({"flows", "list"});
  EXPECT_THAT(listed.out, ContainsRegex("pair +[0-9]+ +veth0 +rx2,rx3 "));
  EXPECT_THAT(listed.out, Not(HasSubstr("spread")));
}

// net_memif: an independent DPDK application (dpdk-testpmd, txonly) is the peer; its frames
// reach a daqirid client.
TEST_F(DpdkTest, MemifInteroperatesWithTestpmd) {
  if (std::system("command -v dpdk-testpmd >/dev/null 2>&1") != 0) GTEST_SKIP() << "no testpmd";
  std::string sock = dir_.file("memif.sock");
  start(config(dir_.file("d.sock"), port("memif0", "net_memif0,role=server,socket=" + sock),
               "  - {name: all, interface: memif0, match: {any: true}, allow_block: true}\n"));
  Spawned rx(dir_, tap("all", 10000));
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 1; }));
  std::string prefix = "dqtestpmd" + std::to_string(::getpid());
  Spawned testpmd(
      dir_, {"/usr/bin/dpdk-testpmd", "--no-huge", "-m", "256", "--no-pci", "--no-shconf",
             "--file-prefix", prefix, "-l", "0,1", "--vdev",
             "net_memif0,role=client,socket=" + sock, "--", "--forward-mode=txonly", "--auto-start",
             "--txpkts=128", "--total-num-mbufs=8192", "--stats-period=1"});
  int rc = rx.wait(60s);
  testpmd.kill(SIGINT);
  testpmd.wait();
  std::filesystem::remove_all("/var/run/dpdk/" + prefix);  // its EAL leaves the directory
  ASSERT_EQ(rc, 0) << rx.output() << testpmd.output() << daemon_->log();
  EXPECT_THAT(rx.output(), HasSubstr("received 10000 packets"));
  auto s = stats();
  EXPECT_GE(flow(s, "all").packets(), 10000u);
  EXPECT_EQ(flow(s, "all").bytes(), flow(s, "all").packets() * 128);
}

// Two daemons, each with its own EAL (file prefix from its socket), on one host at once.
TEST_F(DpdkTest, TwoDaemonsOnOneHostDoNotCollide) {
  start(config(dir_.file("d.sock"), port("null0", "net_null0"),
               "  - {name: all, interface: null0, match: {any: true}, allow_block: true}\n"));
  TempDir other_dir;
  std::string other_socket = other_dir.file("d.sock");
  std::string other_yaml = other_dir.write(
      "d.yaml",
      config(other_socket, port("null0", "net_null0"),
             "  - {name: all, interface: null0, match: {any: true}, allow_block: true}\n"));
  DaemonProcess other(other_dir, {"--config", other_yaml});
  ASSERT_TRUE(other.wait_ready()) << other.log();
  auto a = run(tap("all", 50000));
  auto b = run({ctl_path(), "--socket", other_socket, "tap", "all", "--count", "50000", "--quiet",
                "--timeout", "30"});
  EXPECT_EQ(a.exit_code, 0) << a.out;
  EXPECT_EQ(b.exit_code, 0) << b.out;
  EXPECT_EQ(other.stop(), 0) << other.log();
}

// hardware_timestamps needs a port whose PMD stamps frames (RTE_ETH_RX_OFFLOAD_TIMESTAMP), as
// DAQIRI rules: none of the virtual devices here offers it, so each refuses to start, saying
// which port and why, and the daemon leaves nothing running.
TEST_F(DpdkTest, HardwareTimestampsNeedAPortThatStampsFrames) {
  std::string pcap = dir_.file("in.pcap");
  write_pcap(pcap, {make_frame(1000, 7000, 0, 100)});
  for (auto [name, address, driver] : {std::tuple{"pcap0", "net_pcap0,rx_pcap=" + pcap, "net_pcap"},
                                       std::tuple{"null0", std::string("net_null0"), "net_null"}}) {
    std::string itf = port(name, address, 1, false);
    const std::string at = "    source_ipv4: 127.0.0.1\n";
    itf.insert(itf.find(at) + at.size(), "    hardware_timestamps: true\n");
    std::string socket = dir_.file(std::string(name) + ".sock");
    std::string yaml = dir_.write(
        std::string(name) + ".yaml",
        config(socket, itf,
               "  - {name: all, interface: " + std::string(name) + ", match: {any: true}}\n"));
    auto r = run({daqirid_path(), "--config", yaml});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_THAT(r.out + r.err, HasSubstr("hardware_timestamps: " + std::string(driver) +
                                         " offers no RX timestamps"));
    EXPECT_FALSE(std::filesystem::exists(socket));
  }
}

// A port that cannot start fails the daemon with a clear error and leaves no EAL runtime
// directory behind.
TEST_F(DpdkTest, FailedStartSaysWhyAndLeavesNothingBehind) {
  std::string socket = dir_.file("d.sock");
  std::string yaml = dir_.write(
      "d.yaml",
      config(socket, port("pcap0", "net_pcap0,rx_pcap=" + dir_.file("missing.pcap")),
             "  - {name: a, interface: pcap0, match: {udp_dst: 7000}, allow_block: true}\n"));
  auto before = std::filesystem::exists("/dev/hugepages")
                    ? std::distance(std::filesystem::directory_iterator("/dev/hugepages"), {})
                    : 0;
  auto r = run({daqirid_path(), "--config", yaml});
  EXPECT_NE(r.exit_code, 0);
  std::string said = r.out + r.err;
  EXPECT_THAT(said, HasSubstr("net_pcap0"));
  EXPECT_THAT(said, HasSubstr("DPDK"));
  EXPECT_FALSE(std::filesystem::exists(socket));
  auto after = std::filesystem::exists("/dev/hugepages")
                   ? std::distance(std::filesystem::directory_iterator("/dev/hugepages"), {})
                   : 0;
  EXPECT_EQ(after, before);
  // The EAL's runtime directory went with it (its own: other tests' daemons may run beside).
  size_t at = said.find("--file-prefix=");
  ASSERT_NE(at, std::string::npos) << said;
  at += 14;
  std::string runtime = "/var/run/dpdk/" + said.substr(at, said.find_first_of(" \n", at) - at);
  EXPECT_FALSE(std::filesystem::exists(runtime)) << runtime;
}

// A daemon killed with SIGKILL leaves its EAL runtime folder, and its clients keep the
// hugepages of the pools they mapped. The next start on the same socket removes the folder and
// says so; a start that finds too few hugepages names the processes that hold daqirid memory.
TEST_F(DpdkTest, AKilledDaemonsLeftoversAreClearedOrNamedAtTheNextStart) {
  if (free_hugepages() < 16) GTEST_SKIP() << "needs 16 free 2 MiB hugepages";
  auto yaml_for = [&](uint64_t num_bufs) {
    std::string y = config(dir_.file("d.sock"), port("null0", "net_null0", 1, false),
                           "  - {name: all, interface: null0, match: {any: true}}\n");
    y.replace(y.find("{name: rx, kind: host, buf_size: 2048, num_bufs: 4096}"), 54,
              "{name: rx, kind: huge, buf_size: 2048, num_bufs: " + std::to_string(num_bufs) + "}");
    return y;
  };
  start(yaml_for(4096));
  std::string log = daemon_->log();
  size_t at = log.find("--file-prefix=");
  ASSERT_NE(at, std::string::npos) << log;
  at += 14;
  std::string runtime = "/var/run/dpdk/" + log.substr(at, log.find(' ', at) - at);
  Spawned holder(dir_, {adversary_path(), "hold", socket_, "all"});
  ASSERT_TRUE(holder.wait_for_output("holding")) << holder.output() << daemon_->log();
  control_.reset();
  EXPECT_EQ(daemon_->stop(SIGKILL), 128 + SIGKILL);
  daemon_.reset();
  EXPECT_TRUE(std::filesystem::exists(runtime));

  start(yaml_for(4096));
  EXPECT_THAT(daemon_->log(), HasSubstr("dpdk: removing " + runtime +
                                        ", left by a daqirid on this socket that did not stop"));
  control_.reset();
  ASSERT_EQ(daemon_->stop(), 0) << daemon_->log();
  daemon_.reset();
  EXPECT_FALSE(std::filesystem::exists(runtime));

  // More than is free: the error names the holder, which still maps the killed daemon's pool.
  auto r = run({daqirid_path(), "--check-config",
                dir_.write("big.yaml", yaml_for((free_hugepages() + 1) * 1024))});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out + r.err, HasSubstr("daqirid memory in hugepages is still mapped by pid " +
                                       std::to_string(holder.pid()) + " (daqiri-adversar"))
      << r.out << r.err;
}

// A gpudirect queue (its mbuf pool in GPU memory) where there is no GPU: a clear start error
// that names the queue and the region. With a GPU, tests/gpu's GpuRingTest drives such a queue.
TEST_F(DpdkTest, GpudirectQueueWithoutAGpuSaysWhy) {
  if (std::filesystem::exists("/dev/nvidia0")) {
    GTEST_SKIP() << "a GPU is here: GpuRingTest.GpudirectDpdkQueueDeliversFromAPoolInGpuMemory "
                    "runs this queue";
  }
  std::string yaml =
      config(dir_.file("d.sock"), port("null0", "net_null0"),
             "  - {name: a, interface: null0, match: {any: true}, allow_block: true}\n");
  std::string host = "{name: rx, kind: host";
  yaml.replace(yaml.find(host), host.size(), "{name: rx, kind: device, gpudirect: true");
  auto r = run({daqirid_path(), "--config", dir_.write("d.yaml", yaml)});
  EXPECT_NE(r.exit_code, 0);
  // A daqirid built without CUDA refuses the region before it looks for a GPU.
  EXPECT_THAT(r.out + r.err,
              ::testing::AnyOf(HasSubstr("RX queue null0/rx0: region \"rx\" is gpudirect: "),
                               HasSubstr("kind device needs a daqirid built with CUDA")))
      << r.out << r.err;
}

// A gpudirect TX queue: the NIC reads each frame's payload in GPU memory, chained behind the
// headers the daemon copied. A vdev whose PMD reads frames (net_pcap writes them to a file)
// cannot, and daqirid does not start; net_null frees them unread, as a NIC's DMA would leave
// the CPU out, and takes it. With a GPU, tests/gpu's GpuTxTest sends through such a queue.
TEST_F(DpdkTest, GpudirectTxQueueNeedsADeviceThatLeavesPayloadsToTheNic) {
  if (run({daqirid_path(), "--version"}).out.find("cuda: yes") == std::string::npos) {
    GTEST_SKIP() << "this daqirid is built without CUDA (the sanitizer builds): device regions "
                    "are refused before any of this";
  }
  auto yaml_for = [&](const std::string& address) {
    std::string yaml = config(dir_.file("d.sock"), port("null0", address),
                              "  - {name: a, interface: null0, match: {any: true}}\n");
    std::string tx = "  - {name: tx, kind: host, buf_size: 2048, num_bufs: 2048}\n";
    yaml.replace(yaml.find(tx), tx.size(),
                 "  - {name: h, kind: host, buf_size: 64, num_bufs: 64}\n"
                 "  - {name: tx, kind: device, gpudirect: true, buf_size: 1400, num_bufs: 2048}\n");
    yaml.replace(yaml.find("regions: [tx]"), 13, "regions: [h, tx]");
    return yaml;
  };
  auto pcap = run({daqirid_path(), "--config",
                   dir_.write("p.yaml", yaml_for("net_pcap0,tx_pcap=" + dir_.file("o.pcap")))});
  EXPECT_NE(pcap.exit_code, 0);
  EXPECT_THAT(pcap.out + pcap.err,
              HasSubstr("TX queue tx0 sends payloads from a gpudirect region, which the NIC reads "
                        "in GPU memory behind each frame's headers: net_pcap is a virtual device, "
                        "whose PMD reads frames with the CPU, which cannot read GPU memory"))
      << pcap.out << pcap.err;
  auto copying =
      run({daqirid_path(), "--config", dir_.write("c.yaml", yaml_for("net_null0,copy=1"))});
  EXPECT_NE(copying.exit_code, 0);
  EXPECT_THAT(copying.out + copying.err, HasSubstr("net_null is a virtual device, whose PMD reads"))
      << copying.out << copying.err;

  start(yaml_for("net_null0"));
  if (HasFatalFailure()) return;
  EXPECT_THAT(daemon_->log(),
              HasSubstr("TX queue tx0: headers copied, payloads read by the NIC in GPU memory"));
  auto host = run({test_client_path(), "tx-idle", socket_, "null0", "1"});
  EXPECT_NE(host.exit_code, 0);
  EXPECT_THAT(
      host.out + host.err,
      HasSubstr("TX queue null0/tx0 sends from GPU memory (region \"tx\"): attach with gpu"));
  auto gpu = run({test_client_path(), "tx-gpu-attach", socket_, "null0", "tx0"});
  if (std::filesystem::exists("/dev/nvidia0")) {
    EXPECT_EQ(gpu.exit_code, 0) << gpu.out << gpu.err;
    EXPECT_THAT(gpu.out, HasSubstr("attached: frames up to 1464 bytes, 64 header bytes"));
  } else {
    EXPECT_EQ(gpu.exit_code, 3) << gpu.out << gpu.err;
    EXPECT_THAT(gpu.out, HasSubstr("attach failed: no GPU")) << gpu.out;
  }
  EXPECT_EQ(stats().attachments_size(), 0) << stats().DebugString();
}

}  // namespace
}  // namespace daqiri::test
