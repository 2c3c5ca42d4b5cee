// daqirid's life: bad configs refuse to start, one daemon per socket, SIGTERM drains and
// leaves nothing behind, systemd's notify protocol.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness.hpp"
#include "thread_stop.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(Lifecycle, SigtermDrainsAndLeavesNothingBehind) {
  TempDir dir;
  std::string socket = dir.file("run/d.sock");
  std::string config = dir.write("d.yaml", test_config(socket));
  DaemonProcess d(dir, {"--config", config});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  EXPECT_TRUE(fs::exists(socket));
  EXPECT_TRUE(fs::exists(socket + ".lock"));
  EXPECT_EQ(d.stop(SIGTERM), 0) << d.log();
  EXPECT_FALSE(fs::exists(socket));
  EXPECT_FALSE(fs::exists(socket + ".lock"));
  EXPECT_THAT(d.log(), HasSubstr("daqirid stopped"));
}

TEST(Lifecycle, SigintStopsToo) {
  TempDir dir;
  std::string socket = dir.file("d.sock");
  DaemonProcess d(dir, {"--config", dir.write("d.yaml", test_config(socket))});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  EXPECT_EQ(d.stop(SIGINT), 0);
  EXPECT_FALSE(fs::exists(socket));
}

TEST(Lifecycle, SecondDaemonOnTheSameSocketIsRefused) {
  TempDir dir;
  std::string socket = dir.file("d.sock");
  std::string config = dir.write("d.yaml", test_config(socket));
  DaemonProcess first(dir, {"--config", config});
  ASSERT_TRUE(first.wait_ready()) << first.log();
  DaemonProcess second(dir, {"--config", config});
  EXPECT_EQ(second.wait_exit(), 1);
  EXPECT_THAT(second.log(), HasSubstr("another daqirid (pid " + std::to_string(first.pid()) +
                                      ") is serving " + socket));
  // The refused daemon must not have touched the first one's socket.
  auto r = run({ctl_path(), "--socket", socket, "health"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(first.stop(), 0);
}

TEST(Lifecycle, SocketOverrideRunsTwoDaemonsSideBySide) {
  TempDir dir;
  std::string config = dir.write("d.yaml", test_config(dir.file("a.sock")));
  // Same file but for the flows' UDP ports, which only one daemon at a time can bind.
  std::string other = test_config(dir.file("a.sock"));
  for (auto [from, to] :
       {std::pair{"udp_dst: 4096", "udp_dst: 5096"}, std::pair{"udp_dst: 4097", "udp_dst: 5097"}}) {
    other.replace(other.find(from), std::string(from).size(), to);
  }
  DaemonProcess a(dir, {"--config", config});
  DaemonProcess b(dir, {"--config", dir.write("b.yaml", other), "--socket", dir.file("b.sock")});
  ASSERT_TRUE(a.wait_ready()) << a.log();
  ASSERT_TRUE(b.wait_ready()) << b.log();
  EXPECT_EQ(run({ctl_path(), "--socket", dir.file("b.sock"), "health"}).exit_code, 0);
  EXPECT_EQ(a.stop(), 0);
  EXPECT_EQ(b.stop(), 0);
}

TEST(Lifecycle, FailedStartLeavesNoSocketOrLock) {
  TempDir dir;
  std::string socket = dir.file("d.sock");
  std::string extra = "  tcp:\n    address: 127.0.0.1:0\n    cert: " + dir.file("missing.pem") +
                      "\n    key: " + dir.file("missing.key") + "\n    role: anonymous\n";
  DaemonProcess d(dir, {"--config", dir.write("d.yaml", test_config(socket, extra))});
  EXPECT_EQ(d.wait_exit(), 1);
  EXPECT_THAT(d.log(),
              HasSubstr("cannot start: daemon.tcp.cert: cannot read " + dir.file("missing.pem")));
  EXPECT_FALSE(fs::exists(socket));
  EXPECT_FALSE(fs::exists(socket + ".lock"));
}

TEST(Lifecycle, InvalidConfigExitsTwoWithTheLocation) {
  TempDir dir;
  std::string config = dir.write("bad.yaml", "daemon:\n  sockett: /tmp/x.sock\n");
  DaemonProcess d(dir, {"--config", config});
  EXPECT_EQ(d.wait_exit(), 2);
  EXPECT_THAT(d.log(), HasSubstr(config + ":2:3: error: daemon.sockett: unknown key; did you "
                                          "mean \"socket\"?"));
}

TEST(Lifecycle, CheckConfigValidatesWithoutStarting) {
  TempDir dir;
  std::string good = dir.write("good.yaml", test_config(dir.file("never.sock")));
  auto r = run({daqirid_path(), "--check-config", good});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            good + ": valid daqirid configuration: 2 memory regions, 1 interfaces, 2 flows\n");
  EXPECT_FALSE(fs::exists(dir.file("never.sock")));

  std::string bad = dir.write("bad.yaml",
                              "memory_regions:\n  - name: r\n    kind: host\n    buf_size: 2048\n"
                              "    num_bufs: lots\n");
  r = run({daqirid_path(), "--check-config", bad});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, bad +
                       ":5:15: error: memory_regions[0].num_bufs: expected an integer from 1 to "
                       "67108864, got \"lots\"\n" +
                       bad + ": 1 error(s)\n");
}

TEST(Lifecycle, EmbeddedDefaultIsPrintableAndValid) {
  auto r = run({daqirid_path(), "--print-default-config"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("name: stream0"));
  TempDir dir;
  r = run({daqirid_path(), "--check-config", dir.write("default.yaml", r.out)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(Lifecycle, EveryShippedConfigValidates) {
  for (const auto& entry : fs::directory_iterator(source_dir() + "/config")) {
    if (entry.path().extension() != ".yaml") continue;
    auto r = run({daqirid_path(), "--check-config", entry.path().string()});
    EXPECT_EQ(r.exit_code, 0) << entry.path() << "\n" << r.err;
    EXPECT_THAT(r.err, ::testing::Not(HasSubstr("error"))) << entry.path();
  }
}

TEST(Lifecycle, VersionNamesWhatWasBuiltIn) {
  auto r = run({daqirid_path(), "--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("daqirid 0.1.0\nbackends: socket"));
  EXPECT_THAT(r.out, HasSubstr("dpdk: "));
  EXPECT_THAT(r.out, HasSubstr("cuda: "));
  EXPECT_THAT(r.out, HasSubstr("xdp: "));
}

TEST(Systemd, NotifyProtocolReadyWatchdogStopping) {
  TempDir dir;
  std::string socket = dir.file("d.sock");
  // A 200 ms watchdog: pings must come every ~100 ms.
  DaemonProcess d(dir, {"--config", dir.write("d.yaml", test_config(socket))},
                  {"WATCHDOG_USEC=200000"});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  int pings = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < until) {
    if (d.notify().next(std::chrono::milliseconds(300)) == "WATCHDOG=1") ++pings;
  }
  EXPECT_GE(pings, 4);  // ~10 expected in one second; 4 leaves room for a loaded machine
  ::kill(d.pid(), SIGTERM);
  EXPECT_TRUE(d.notify().wait_for("STOPPING=1", std::chrono::seconds(5)));
  EXPECT_EQ(d.wait_exit(), 0);
}

// A poller that makes no progress for over 5 s (its thread stopped with ptrace): the daemon
// stops feeding the watchdog, so systemd restarts it, and says which poller; once the poller
// moves again, the pings come back.
TEST(Systemd, AStalledPollerStopsTheWatchdogPings) {
  if (!is_root()) GTEST_SKIP() << "needs ptrace (root)";
  TempDir dir;
  std::string socket = dir.file("d.sock");
  DaemonProcess d(dir, {"--config", dir.write("d.yaml", test_config(socket))},
                  {"WATCHDOG_USEC=400000"});
  ASSERT_TRUE(d.wait_ready()) << d.log();
  pid_t tid = ThreadStop::find(d.pid(), "poll:rx:lo/rx0");
  ASSERT_GT(tid, 0);
  auto pings_in = [&](std::chrono::milliseconds span) {
    int pings = 0;
    auto until = std::chrono::steady_clock::now() + span;
    while (std::chrono::steady_clock::now() < until) {
      if (d.notify().next(std::chrono::milliseconds(100)) == "WATCHDOG=1") ++pings;
    }
    return pings;
  };
  {
    ThreadStop stuck(tid);
    ASSERT_TRUE(stuck.ok()) << std::strerror(errno);
    // An idle poller parks a second at most: 5 s without a loop is a stall. Pings go on until
    // then, and stop after.
    EXPECT_GE(pings_in(std::chrono::milliseconds(4000)), 4);
    const std::string said = "poller(s) stalled for over 5 s: poll:rx:lo/rx0";
    for (int i = 0; i < 40 && d.log().find(said) == std::string::npos; ++i)
      d.notify().next(std::chrono::milliseconds(100));  // the pings until then, read
    EXPECT_THAT(d.log(), HasSubstr(said));
    EXPECT_EQ(pings_in(std::chrono::milliseconds(1500)), 0);
    EXPECT_NE(run({ctl_path(), "--socket", socket, "health"}).exit_code, 0);
  }
  EXPECT_GE(pings_in(std::chrono::milliseconds(1500)), 2);
  EXPECT_EQ(run({ctl_path(), "--socket", socket, "health"}).exit_code, 0);
  EXPECT_EQ(d.stop(), 0) << d.log();
}

TEST(Systemd, UnitFileVerifies) {
  if (::access("/usr/bin/systemd-analyze", X_OK) != 0) GTEST_SKIP() << "no systemd-analyze";
  TempDir dir;
  std::ifstream in(source_dir() + "/systemd/daqirid.service");
  std::stringstream s;
  s << in.rdbuf();
  std::string unit = s.str();
  // verify checks that ExecStart exists: point it at the binary under test.
  auto at = unit.find("/usr/sbin/daqirid");
  ASSERT_NE(at, std::string::npos);
  unit.replace(at, std::string("/usr/sbin/daqirid").size(), daqirid_path());
  auto r = run({"/usr/bin/systemd-analyze", "verify", dir.write("daqirid.service", unit)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // systemd reports unknown or misspelt directives as warnings
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace daqiri::test
