// Prometheus metrics of a real daemon: a scrape that promtool accepts with exact counts, and a
// real Prometheus server scraping the daemon and answering a query.
#include <arpa/inet.h>
#include <civetweb.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <regex>
#include <thread>

#include "harness.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class MetricsTest : public ::testing::Test {
 protected:
  void start() {
    port_ = free_tcp_port();
    socket_ = dir_.file("d.sock");
    std::string config =
        dir_.write("d.yaml", test_config(socket_, "", "127.0.0.1:" + std::to_string(port_)));
    daemon_ = std::make_unique<DaemonProcess>(dir_, std::vector<std::string>{"--config", config});
    ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
  }
  void TearDown() override {
    if (daemon_) {
      EXPECT_EQ(daemon_->stop(), 0) << daemon_->log();
    }
  }
  // Until a client receives from `flow`: its attachment claimed, not only created (the flow
  // counts only those; packets before the claim would find no one).
  void wait_for_client(const std::string& flow) {
    for (int i = 0; i < 500; ++i) {
      auto body = http_get(port_, "/metrics");
      if (body && metric_value(*body, "daqiri_flow_attachments", "flow=\"" + flow + "\"") == 1)
        return;
      std::this_thread::sleep_for(10ms);
    }
    ADD_FAILURE() << "no client on " << flow;
  }
  // Sends `n` packets to stream0 and has a client receive them all.
  void traffic(uint64_t n) {
    Spawned tap(dir_, {ctl_path(), "--socket", socket_, "tap", "stream0", "--count",
                       std::to_string(n), "--quiet", "--block", "--timeout", "20"});
    wait_for_client("stream0");
    ASSERT_EQ(run({gen_path(), "--dest", "127.0.0.1:4096", "--size", "300", "--count",
                   std::to_string(n), "--rate", "50000"})
                  .exit_code,
              0);
    ASSERT_EQ(tap.wait(), 0) << tap.output();
  }

  TempDir dir_;
  uint16_t port_ = 0;
  std::string socket_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(MetricsTest, ScrapeHasExactCountsAndPassesPromtool) {
  start();
  traffic(1234);
  auto body = http_get(port_, "/metrics");
  ASSERT_TRUE(body) << "no answer on port " << port_;
  EXPECT_THAT(
      *body, HasSubstr("daqiri_flow_packets_total{flow=\"stream0\",steering=\"software\"} 1234\n"));
  EXPECT_THAT(*body, HasSubstr("daqiri_flow_bytes_total{flow=\"stream0\",steering=\"software\"} " +
                               std::to_string(1234 * (300 + 42)) + "\n"));
  EXPECT_THAT(*body,
              HasSubstr("daqiri_flow_packets_total{flow=\"stream1\",steering=\"software\"} 0\n"));
  EXPECT_THAT(*body,
              HasSubstr("daqiri_flow_dropped_packets_total{flow=\"stream0\",steering=\"software\","
                        "reason=\"no_client\"} 0\n"));
  EXPECT_THAT(
      *body,
      HasSubstr(
          "daqiri_control_requests_total{code=\"OK\",method=\"daqiri.v1.Control/Attach\"} 1\n"));
  EXPECT_THAT(*body, HasSubstr("daqiri_build_info{version=\"0.1.0\""));
  EXPECT_THAT(
      *body, HasSubstr("daqiri_interface_packets_total{interface=\"lo\",direction=\"rx\"} 1234\n"));
  EXPECT_THAT(*body, HasSubstr("daqiri_queue_packets_total{interface=\"lo\",queue=\"rx0\","
                               "direction=\"rx\"} 1234\n"));
  EXPECT_THAT(*body, HasSubstr("daqiri_interface_dropped_packets_total{interface=\"lo\"} 0\n"));
  EXPECT_THAT(*body, HasSubstr("daqiri_sessions 0\n"));
  if (::access("/usr/bin/promtool", X_OK) != 0)
    GTEST_SKIP() << "no promtool (apt install prometheus)";
  std::string file = dir_.write("scrape.txt", *body);
  auto r = run({"/bin/sh", "-c", "/usr/bin/promtool check metrics < " + file});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// A client that stops reading: its ring fills, and with block backpressure the flow is held
// back, counted once per stall (not once per poll), and nothing is dropped for ring-full.
TEST_F(MetricsTest, RingOccupancyAndBackpressureStalls) {
  start();
  Spawned tap(dir_, {ctl_path(), "--socket", socket_, "tap", "stream0", "--count", "3000",
                     "--quiet", "--block", "--timeout", "30"});
  auto body = [&] { return http_get(port_, "/metrics").value_or(""); };
  const std::string mine = "target=\"stream0\"";
  wait_for_client("stream0");
  EXPECT_EQ(metric_value(body(), "daqiri_attachment_ring_slots", mine), 1024);
  tap.kill(SIGSTOP);
  ASSERT_EQ(run({gen_path(), "--dest", "127.0.0.1:4096", "--size", "100", "--count", "1500",
                 "--rate", "50000"})
                .exit_code,
            0);
  std::string b;
  for (int i = 0; i < 200; ++i) {
    b = body();
    if (metric_value(b, "daqiri_attachment_backpressure_stalls_total", mine) >= 1) break;
    std::this_thread::sleep_for(10ms);
  }
  // Held back once fewer slots than a batch (64) are free.
  double used = metric_value(b, "daqiri_attachment_ring_used_slots", mine);
  EXPECT_GT(used, 1024 - 64) << b;
  EXPECT_LE(used, 1024) << b;
  EXPECT_EQ(metric_value(b, "daqiri_attachment_backpressure_stalls_total", mine), 1) << b;
  EXPECT_EQ(metric_value(b, "daqiri_attachment_dropped_packets_total", "reason=\"ring_full\""), 0);
  tap.kill(SIGCONT);
  ASSERT_EQ(run({gen_path(), "--dest", "127.0.0.1:4096", "--size", "100", "--count", "1500",
                 "--rate", "20000"})
                .exit_code,
            0);
  EXPECT_EQ(tap.wait(), 0) << tap.output();
}

// A client that keeps its ring full under block backpressure stalls the flow, whose socket stays
// readable. The poller then sleeps without that socket (woken by it, it would spin: thousands of
// io wake-ups a second) and asks the client to kick; the client's release and kick wake it, and
// nothing is lost.
TEST_F(MetricsTest, AStalledFlowSleepsUntilItsClientKicks) {
  start();
  const std::string go = dir_.file("go");
  Spawned c(dir_, {test_client_path(), "rx-kick", socket_, "stream0", "3000", go});
  ASSERT_TRUE(c.wait_for_output("attached")) << c.output();
  wait_for_client("stream0");
  ASSERT_EQ(run({gen_path(), "--dest", "127.0.0.1:4096", "--size", "100", "--count", "3000",
                 "--rate", "50000"})
                .exit_code,
            0);
  ASSERT_TRUE(c.wait_for_output("asked")) << c.output();
  auto body = [&] { return http_get(port_, "/metrics").value_or(""); };
  const std::string rx_io = "poller=\"poll:rx:lo/rx0\",cause=\"io\"";
  const std::string rx_timer = "poller=\"poll:rx:lo/rx0\",cause=\"timer\"";
  std::string before = body();
  std::this_thread::sleep_for(300ms);
  std::string after = body();
  EXPECT_EQ(metric_value(after, "daqiri_poller_wakeups_total", rx_io),
            metric_value(before, "daqiri_poller_wakeups_total", rx_io))
      << before << after;
  // Still on a timer meanwhile (for a kick lost or never sent): 1 ms sleeps.
  EXPECT_GT(metric_value(after, "daqiri_poller_wakeups_total", rx_timer),
            metric_value(before, "daqiri_poller_wakeups_total", rx_timer));
  const std::string mine = "target=\"stream0\"";
  EXPECT_EQ(metric_value(after, "daqiri_attachment_kicks_total", mine), 0) << after;
  EXPECT_EQ(metric_value(after, "daqiri_attachment_backpressure_stalls_total", mine), 1) << after;
  dir_.write("go", "");
  ASSERT_TRUE(c.wait_for_output("received 3000 kicked")) << c.output();
  std::string b = body();
  EXPECT_GE(metric_value(b, "daqiri_attachment_kicks_total", mine), 1) << b;
  EXPECT_EQ(metric_value(b, "daqiri_flow_packets_total", "flow=\"stream0\""), 3000) << b;
  EXPECT_EQ(metric_value(b, "daqiri_attachment_dropped_packets_total", "reason=\"ring_full\""), 0);
  c.kill(SIGKILL);
}

// A client that is attached but holds no buffer needs no timed poll: the receive poller sleeps
// until a datagram comes (up to a second at a time), not every millisecond.
TEST_F(MetricsTest, AnIdleClientThatHoldsNothingLetsThePollerSleep) {
  start();
  traffic(100);  // the client released all it got and is gone
  Spawned tap(dir_,
              {ctl_path(), "--socket", socket_, "tap", "stream0", "--quiet", "--timeout", "30"});
  wait_for_client("stream0");
  auto body = [&] { return http_get(port_, "/metrics").value_or(""); };
  const std::string rx = "poller=\"poll:rx:lo/rx0\"";
  std::this_thread::sleep_for(100ms);  // a few idle spins and parks after the attach
  double before = metric_value(body(), "daqiri_poller_parks_total", rx);
  std::this_thread::sleep_for(500ms);
  double after = metric_value(body(), "daqiri_poller_parks_total", rx);
  ASSERT_GE(before, 0);
  // With a timer it parks about 500 times; without, once or twice.
  EXPECT_LE(after - before, 3) << before << " " << after;
  tap.kill(SIGKILL);
}

// An idle TX client that said it kicks (TxOptions::kick, the default) lets its queue's poller
// sleep up to a second at a time; one that does not kick keeps it on 1 ms sleeps, which is
// what serves its frames.
TEST_F(MetricsTest, AnIdleTxClientThatKicksLetsThePollerSleep) {
  start();
  auto body = [&] { return http_get(port_, "/metrics").value_or(""); };
  const std::string tx = "poller=\"poll:tx:lo/tx0\"";
  auto parks_in_half_a_second = [&](const char* kick) {
    Spawned c(dir_, {test_client_path(), "tx-idle", socket_, "lo", kick});
    EXPECT_TRUE(c.wait_for_output("attached")) << c.output();
    std::this_thread::sleep_for(100ms);  // the attach's own wake-ups are over
    double before = metric_value(body(), "daqiri_poller_parks_total", tx);
    std::this_thread::sleep_for(500ms);
    double after = metric_value(body(), "daqiri_poller_parks_total", tx);
    c.kill(SIGKILL);
    c.wait();
    EXPECT_GE(before, 0);
    return after - before;
  };
  EXPECT_LE(parks_in_half_a_second("1"), 3);
  EXPECT_GE(parks_in_half_a_second("0"), 100);  // about 500
}

// A daemon that stops reading while its pool has buffers (stopped by SIGSTOP): the kernel drops
// what its socket buffer cannot hold, and every one of those drops is counted as the poller's
// (reason "kernel"), none as the empty pool's, matching the kernel's own count exactly.
TEST_F(MetricsTest, KernelDropsWhileThePoolHasBuffersAreCountedAsKernel) {
  start();
  Spawned tap(dir_,
              {ctl_path(), "--socket", socket_, "tap", "stream0", "--quiet", "--timeout", "30"});
  auto body = [&] { return http_get(port_, "/metrics").value_or(""); };
  wait_for_client("stream0");
  ASSERT_EQ(::kill(daemon_->pid(), SIGSTOP), 0);
  // 1000-byte datagrams: each takes more than 1 KiB of the socket's 16 MiB (8 MiB forced,
  // doubled by the kernel), so at most 16 384 of the 40 000 fit.
  const uint64_t sent = 40000;
  auto g = run(
      {gen_path(), "--dest", "127.0.0.1:4096", "--size", "1000", "--count", std::to_string(sent)});
  ::kill(daemon_->pid(), SIGCONT);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  auto flow = [&](const std::string& b, const std::string& reason) {
    return metric_value(b, "daqiri_flow_dropped_packets_total",
                        "flow=\"stream0\",steering=\"software\",reason=\"" + reason + "\"");
  };
  std::string b;
  double received = 0;
  double kernel = 0;
  for (int i = 0; i < 500; ++i) {
    b = body();
    received = metric_value(b, "daqiri_flow_packets_total", "flow=\"stream0\"");
    kernel = flow(b, "kernel");
    if (received + kernel == double(sent)) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(received + kernel, double(sent)) << b;
  EXPECT_GT(kernel, 0) << b;
  EXPECT_EQ(flow(b, "no_buffer"), 0) << b;
  // The kernel's own count, from /proc/net/udp through the control API.
  auto stats = run({ctl_path(), "--socket", socket_, "--json", "stats"});
  std::smatch m;
  ASSERT_TRUE(std::regex_search(stats.out, m, std::regex("\"kernel_drops\": \"([0-9]+)\"")))
      << stats.out;
  EXPECT_EQ(std::stod(m[1]), kernel) << stats.out;
  tap.kill(SIGKILL);
}

// Every query of the shipped Grafana dashboard is valid PromQL (promtool parses them as
// recording rules) and names only families docs/metrics.md lists.
TEST(GrafanaDashboard, QueriesParseAndNameOurFamilies) {
  if (::access("/usr/bin/promtool", X_OK) != 0) GTEST_SKIP() << "no promtool";
  std::ifstream in(source_dir() + "/docs/grafana-dashboard.json");
  std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ifstream doc_in(source_dir() + "/docs/metrics.md");
  std::string docs((std::istreambuf_iterator<char>(doc_in)), std::istreambuf_iterator<char>());
  const std::regex family("(daqiri_[a-z_]+)");
  std::string rules = "groups:\n  - name: dashboard\n    rules:\n";
  int n = 0;
  const std::string key = "\"expr\": \"";
  for (size_t at = json.find(key); at != std::string::npos; at = json.find(key, at + 1)) {
    std::string expr;
    for (size_t i = at + key.size(); i < json.size() && json[i] != '"'; ++i) {
      if (json[i] == '\\') ++i;  // \" inside the JSON string
      expr += json[i];
    }
    // Each family it names is one docs/metrics.md lists (histograms by their base name).
    std::smatch m;
    for (auto it = expr.cbegin(); std::regex_search(it, expr.cend(), m, family); it = m[0].second) {
      std::string name = m[1].str();
      if (name.ends_with("_bucket")) name.resize(name.size() - 7);
      EXPECT_THAT(docs, HasSubstr("`" + name + "`")) << expr;
    }
    std::string quoted;
    for (char c : expr)
      quoted += c == '\'' ? std::string("''") : std::string(1, c);
    rules +=
        "      - record: dashboard:q" + std::to_string(++n) + "\n        expr: '" + quoted + "'\n";
  }
  EXPECT_GE(n, 15);
  TempDir dir;
  auto r = run({"/usr/bin/promtool", "check", "rules", dir.write("rules.yml", rules)});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << rules;
}

// An address the exposer cannot serve is a start error that names it and says why: a port
// someone else holds, and an IPv6 address where civetweb was built without IPv6 (Debian 12's;
// with IPv6 the daemon starts on it instead).
TEST_F(MetricsTest, AnAddressItCannotServeIsAStartErrorThatSaysWhy) {
  auto start_with = [&](const std::string& address) {
    std::string config = dir_.write("m.yaml", test_config(dir_.file("m.sock"), "", address));
    return run({daqirid_path(), "--config", config});
  };
  UniqueFd holder(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in at = loopback();
  ASSERT_EQ(::bind(holder.get(), reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  ASSERT_EQ(::listen(holder.get(), 1), 0);
  socklen_t len = sizeof at;
  ASSERT_EQ(::getsockname(holder.get(), reinterpret_cast<sockaddr*>(&at), &len), 0);
  std::string taken = "127.0.0.1:" + std::to_string(ntohs(at.sin_port));
  auto r = start_with(taken);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out + r.err, HasSubstr("daemon.metrics: cannot serve metrics on " + taken));

  port_ = free_tcp_port();
  std::string v6 = "[::1]:" + std::to_string(port_);
  std::string config = dir_.write("d.yaml", test_config(dir_.file("d.sock"), "", v6));
  daemon_ = std::make_unique<DaemonProcess>(dir_, std::vector<std::string>{"--config", config});
  constexpr unsigned kCivetwebIpv6 = 8;  // mg_check_feature's bit
  if (mg_check_feature(kCivetwebIpv6) != 0) {
    EXPECT_TRUE(daemon_->wait_ready()) << daemon_->log();  // TearDown stops it
    return;
  }
  EXPECT_FALSE(daemon_->wait_ready());
  EXPECT_NE(daemon_->wait_exit(), 0);
  EXPECT_THAT(daemon_->log(),
              HasSubstr("cannot serve metrics on " + v6 + ": this build's civetweb has no IPv6"));
  daemon_.reset();
}

TEST_F(MetricsTest, PrometheusServerScrapesTheDaemon) {
  if (::access("/usr/bin/prometheus", X_OK) != 0) GTEST_SKIP() << "no prometheus server";
  start();
  uint16_t prom_port = free_tcp_port();
  std::string config = dir_.write("prometheus.yml",
                                  "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                                  "scrape_configs:\n"
                                  "  - job_name: daqirid\n"
                                  "    static_configs: [{targets: ['127.0.0.1:" +
                                      std::to_string(port_) + "']}]\n");
  Spawned prometheus(
      dir_,
      {"/usr/bin/prometheus", "--config.file=" + config, "--storage.tsdb.path=" + dir_.file("tsdb"),
       "--web.listen-address=127.0.0.1:" + std::to_string(prom_port), "--log.level=warn"});
  traffic(777);
  // Prometheus's own answer, through its HTTP query API, once it has scraped after the traffic.
  const std::string query =
      "/api/v1/query?query=daqiri_flow_packets_total%7Bflow%3D%22stream0%22%7D";
  std::string last;
  bool seen = false;
  // A deadline, not a count of tries: each try may wait 5 s for an answer, and on a loaded
  // host Prometheus is slow to start.
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    if (auto body = http_get(prom_port, query)) {
      last = *body;
      seen = last.find("\"777\"") != std::string::npos;
    }
    if (!seen) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(seen) << "last answer: " << last << "\n" << prometheus.output();
  EXPECT_THAT(last, HasSubstr("\"job\":\"daqirid\""));
}

}  // namespace
}  // namespace daqiri::test
