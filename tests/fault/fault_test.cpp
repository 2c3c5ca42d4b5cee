// Fault injection: daqirid with libdaqiri-fault.so preloaded, each call site of ours that a
// scenario reaches failed in turn, with the errno the kernel gives when that call really fails.
// A failure at start must end the daemon non-zero, saying why, leaving nothing behind; a
// failure while serving must give its client a clean refusal or a counted drop, leak nothing,
// and cost the other clients nothing.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/common/unique_fd.hpp"
#include "daqiri/v1/control.grpc.pb.h"
#include "fault_injector.hpp"
#include "fault_sweep.hpp"
#include "harness.hpp"
#include "pcap_frames.hpp"
#include "stats_client.hpp"

namespace daqiri::fault {
namespace {

using namespace std::chrono_literals;
using test::CommandResult;
using test::DaemonProcess;
using test::Spawned;

class FaultTest : public ::testing::Test {
 protected:
  FaultTest() {
    socket_ = dir_.file("d.sock");
    captures_ = dir_.file("captures");
    std::filesystem::create_directory(captures_);
    config_ =
        dir_.write("d.yaml", test::test_config(socket_, "  capture_dirs: [" + captures_ + "]\n"));
  }
  std::unique_ptr<DaemonProcess> daemon() {
    return std::make_unique<DaemonProcess>(dir_, std::vector<std::string>{"--config", config_},
                                           faults_.env());
  }
  std::vector<std::string> ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {test::ctl_path(), "--socket", socket_});
    return args;
  }
  // `source_port`: one of its own for each run a receiver verifies as one of many streams (it
  // tells them apart by source port; an ephemeral port may come round again).
  CommandResult gen(uint16_t port, uint64_t count, uint16_t source_port = 0) {
    std::vector<std::string> argv{test::gen_path(),
                                  "--dest",
                                  "127.0.0.1:" + std::to_string(port),
                                  "--size",
                                  "200",
                                  "--count",
                                  std::to_string(count),
                                  "--rate",
                                  "20000"};
    if (source_port != 0)
      argv.insert(argv.end(), {"--source", "127.0.0.1:" + std::to_string(source_port)});
    return test::run(argv);
  }

  test::TempDir dir_;
  FaultInjector faults_{dir_};
  std::string socket_;
  std::string captures_;
  std::string config_;
};

class FaultSweepTest : public FaultTest {
 protected:
  // What the serving daemon reaches, in four parts: idle (what it does by itself: a poller's
  // timed wake and park), and a client session's attach and receive, capture, send. Each
  // returns what went wrong that a clean refusal or a counted drop cannot explain.
  enum class Part { kIdle, kReceive, kCapture, kSend };
  static constexpr std::array kParts{Part::kIdle, Part::kReceive, Part::kCapture, Part::kSend};
  // Long enough for an idle poller to wake and park again twice (it wakes once a second).
  static constexpr auto kIdleWindow = 2500ms;
  static const char* name_of(Part p) {
    switch (p) {
      case Part::kIdle:
        return "serving: idle";
      case Part::kReceive:
        return "serving: receive";
      case Part::kCapture:
        return "serving: capture";
      case Part::kSend:
        return "serving: send";
    }
    return "";
  }
  std::string exercise(Part part, uint64_t round) {
    switch (part) {
      case Part::kIdle:
        return idle();
      case Part::kReceive:
        return receive();
      case Part::kCapture:
        return capture(round);
      case Part::kSend:
        return send();
    }
    return "";
  }

  // Waits out the idle window, or less once an armed fault has fired.
  std::string idle() {
    auto end = std::chrono::steady_clock::now() + kIdleWindow;
    while (std::chrono::steady_clock::now() < end && faults_.fired() == 0)
      std::this_thread::sleep_for(10ms);
    return "";
  }

  std::string receive() {
    std::string wrong;
    auto note = [&](const std::string& what) { wrong += what + "\n"; };
    Spawned tap(dir_, ctl({"tap", "stream0", "--count", "50", "--verify", "--quiet", "--block",
                           "--timeout", "10"}));
    bool attached = false;
    control_->eventually(  // until it claimed its ring, or gave up
        [&](const v1::Stats& s) {
          attached = test::claimed(s) == base_attachments_ + 1;
          return attached || tap.wait(0ms) != -1;
        },
        5s);
    if (attached) {
      EXPECT_EQ(gen(4096, 50).exit_code, 0);
    }
    int tap_exit = tap.wait(20s);
    // Received all of it, or ended saying why: never a quiet wait that ran out (the tap's
    // summary of a timeout starts "received"). The daemon may have counted the claim when the
    // answer to it was lost: attached or not, an explained end is a clean refusal.
    if (tap_exit == 0) {
      if (tap.output().find("received 50 packets") == std::string::npos) {
        note("tap did not receive 50 packets: " + tap.output());
      }
    } else if (!says_why(tap.output(), "daqiri-ctl: tap: ") ||
               tap.output().find("received ") != std::string::npos) {
      note("tap failed without saying why" + std::string(attached ? " once attached: " : ": ") +
           tap.output());
    }
    return wrong;
  }

  std::string capture(uint64_t round) {
    std::string wrong;
    auto note = [&](const std::string& what) { wrong += what + "\n"; };
    std::string file = captures_ + "/c" + std::to_string(round) + ".pcap";
    auto cap = test::run(ctl({"capture", "stream0", "--out", file, "--detach"}));
    if (cap.exit_code == 0) {
      EXPECT_EQ(gen(4096, 10).exit_code, 0);
      auto id = cap.out.substr(cap.out.find("capture ") + 8);
      id = id.substr(0, id.find(' '));
      auto stop = test::run(ctl({"stop-capture", id}));
      if (stop.exit_code != 0 && says_why(stop.err, "daqiri-ctl: ")) {
        unstopped_capture_ = id;  // refused cleanly: stopped once the fault is gone
      } else if (stop.out.find("10 packets") == std::string::npos &&
                 stop.out.find("ended early") == std::string::npos) {
        note("capture neither recorded 10 packets nor said why not: " + stop.out + stop.err);
      }
    } else if (!says_why(cap.err, "daqiri-ctl: ")) {
      note("capture refused without saying why: " + cap.out + cap.err);
    }
    return wrong;
  }

  std::string send() {
    std::string wrong;
    auto note = [&](const std::string& what) { wrong += what + "\n"; };
    UniqueFd sink(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in at = test::loopback();
    socklen_t len = sizeof at;
    ::bind(sink.get(), reinterpret_cast<sockaddr*>(&at), sizeof at);
    ::getsockname(sink.get(), reinterpret_cast<sockaddr*>(&at), &len);
    auto tx = test::run({test::test_client_path(), "tx", socket_, "lo", "5000",
                         std::to_string(ntohs(at.sin_port)), "20", "200"});
    unsigned long long sent = 0;
    unsigned long long failed = 0;
    if (tx.exit_code == 0 &&
        std::sscanf(tx.out.c_str(), "sent %llu, %llu failed", &sent, &failed) == 2) {
      uint64_t got = 0;
      char buf[2048];
      while (got + failed < 20 &&
             ::poll(std::array{pollfd{sink.get(), POLLIN, 0}}.data(), 1, 500) > 0 &&
             ::recv(sink.get(), buf, sizeof buf, 0) > 0)
        ++got;
      if (got + failed != 20) {
        note("TX: " + std::to_string(got) + " arrived and " + std::to_string(failed) +
             " failed of 20");
      }
    } else if (!says_why(tx.out, " failed: ")) {
      note("TX client failed without saying why: " + tx.out + tx.err);
    }
    return wrong;
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::optional<test::StatsClient> control_;
  std::string unstopped_capture_;  // a capture whose stop a fault refused
  int base_attachments_ = 0;
};

// Every call site of ours that starting daqirid reaches, failed in turn: the daemon either
// ends non-zero saying why (the errno's text in its log) and leaves nothing behind, or it
// starts and serves.
TEST_F(FaultSweepTest, AFailedCallAtStartEndsTheDaemonSayingWhyOrItServes) {
  StartSweep how;
  how.start = [&] { return daemon(); };
  how.serves = [&](DaemonProcess& d) {
    Spawned tap(dir_, ctl({"tap", "stream0", "--count", "20", "--verify", "--quiet", "--block",
                           "--timeout", "10"}));
    test::StatsClient stats(socket_);
    EXPECT_TRUE(stats.eventually([](const v1::Stats& s) { return test::claimed(s) == 1; }, 5s));
    EXPECT_EQ(gen(4096, 20).exit_code, 0);
    EXPECT_EQ(tap.wait(), 0) << tap.output();
    EXPECT_EQ(d.stop(), 0) << d.log();
  };
  how.error_text = [](const Fault& f) { return std::string(std::strerror(f.error)); };
  auto sites = start_census(faults_, how);
  print_sites("starting daqirid", sites);
  ASSERT_FALSE(sites.empty());
  sweep_start(faults_, sites, dir_.path().string(), how);
}

// Every call site of ours that a client session reaches (attach, receive, capture, send,
// detach) or that the idle daemon reaches by itself, failed in turn while another client
// receives a flow throughout: each failure is a clean refusal or a counted drop, the daemon gets
// back every fd and attachment, and the other client loses nothing. Each part is swept alone
// over the sites it reaches (its own census): a call site that several session parts reach (a
// session's setup) fails in each of them, at a part's cost rather than the whole session's. A
// site the idle daemon reaches is swept in the idle part only: a session meets it by timing.
TEST_F(FaultSweepTest, AFailedCallWhileServingRefusesOrCountsAndCostsOthersNothing) {
  daemon_ = daemon();
  ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
  control_.emplace(socket_);
  std::map<Part, std::vector<SiteUse>> sites;
  std::set<uint64_t> idle_sites;
  size_t trials = 0;
  // Settled first: every poller has parked (a poller that just started spins, and its idle
  // sockets are read now and then as it does).
  ASSERT_TRUE(control_->eventually(
      [](const v1::Stats& s) {
        return std::ranges::all_of(s.pollers(), [](const auto& p) { return p.parks() > 0; });
      },
      10s));
  for (Part part : kParts) {
    faults_.arm();
    EXPECT_EQ(exercise(part, 0), "") << name_of(part);
    faults_.disarm();
    sites[part] = faults_.sites();
    if (part == Part::kIdle) {
      // What the idle daemon does every time: the sites of a second window that the first met
      // too (an idle socket's read, once in dozens of wakes, is not among them).
      faults_.arm();
      idle();
      faults_.disarm();
      std::set<uint64_t> again;
      for (const SiteUse& s : faults_.sites())
        again.insert(s.offset);
      std::erase_if(sites[part], [&](const SiteUse& s) { return !again.contains(s.offset); });
      for (const SiteUse& s : sites[part])
        idle_sites.insert(s.offset);
    } else {
      std::erase_if(sites[part], [&](const SiteUse& s) { return idle_sites.contains(s.offset); });
    }
    print_sites(name_of(part), sites[part]);
    ASSERT_FALSE(sites[part].empty()) << name_of(part);
    trials += trials_for(sites[part]).size();
  }
  // The bystander's count: every trial run (a trial may run up to kTries times) and the rest
  // after the sweep, sent then.
  const uint64_t per_round = 20;
  const uint64_t total = per_round * (kTries * trials + 1);
  uint64_t sent = 0;
  Spawned bystander(dir_, ctl({"tap", "stream1", "--count", std::to_string(total), "--verify",
                               "--quiet", "--block", "--timeout", "900"}));
  ASSERT_TRUE(control_->eventually([](const v1::Stats& s) { return test::claimed(s) == 1; }, 5s));
  base_attachments_ = 1;
  auto settled = [&](size_t fds) {
    return control_->eventually(
        [&](const v1::Stats& s) {
          // gRPC's idle connections come and go: fewer fds than before is no leak.
          return s.attachments_size() == 1 && test::open_fds(daemon_->pid()) <= fds;
        },
        10s);
  };
  size_t base_fds = test::open_fds(daemon_->pid());
  uint64_t round = 1;
  for (Part part : kParts) {
    sweep(faults_, sites[part], name_of(part), [&](const Fault& f) {
      faults_.arm(f);
      std::string wrong = exercise(part, round++);
      faults_.disarm();
      EXPECT_EQ(wrong, "");
      if (!unstopped_capture_.empty()) {
        auto stop = test::run(ctl({"stop-capture", unstopped_capture_}));
        EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
        unstopped_capture_.clear();
      }
      EXPECT_EQ(gen(4097, per_round, static_cast<uint16_t>(20000 + round)).exit_code, 0);
      sent += per_round;
      EXPECT_TRUE(settled(base_fds))
          << "fds " << test::open_fds(daemon_->pid()) << " (were " << base_fds << ")\n"
          << control_->get().DebugString();
      ASSERT_EQ(::kill(daemon_->pid(), 0), 0) << daemon_->log();
    });
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(gen(4097, total - sent, static_cast<uint16_t>(20000 + round + 1)).exit_code, 0);
  ASSERT_EQ(bystander.wait(60s), 0) << bystander.output();
  EXPECT_THAT(bystander.output(),
              ::testing::HasSubstr("received " + std::to_string(total) + " packets"));
  EXPECT_THAT(bystander.output(), ::testing::HasSubstr("lost 0, reordered 0, duplicate 0, "
                                                       "corrupt 0"));
  EXPECT_EQ(daemon_->stop(), 0) << daemon_->log();
}

// Every call site of ours that stopping daqirid reaches (a client attached, a capture of 10
// packets running), failed in turn: the daemon still ends by itself within its drain, not by
// a signal, leaves no socket or lock behind, its client is told, and the capture file holds
// the 10 packets or the log says why not.
TEST_F(FaultSweepTest, AFailedCallWhileStoppingStillEndsCleanly) {
  auto outside_captures = [&] {
    std::set<std::string> out;
    for (const auto& p : leftovers(dir_.path().string())) {
      if (!p.starts_with(captures_ + "/")) out.insert(p);
    }
    return out;
  };
  auto clean = outside_captures();
  auto stop_under = [&](const Fault& f, int round) {
    auto d = daemon();
    ASSERT_TRUE(d->wait_ready()) << d->log();
    Spawned tap(dir_, ctl({"tap", "stream0", "--count", "1000000", "--quiet", "--block",
                           "--timeout", "60"}));
    test::StatsClient stats(socket_);
    ASSERT_TRUE(stats.eventually([](const v1::Stats& s) { return test::claimed(s) == 1; }, 5s));
    std::string file = captures_ + "/s" + std::to_string(round) + ".pcap";
    ASSERT_EQ(test::run(ctl({"capture", "stream0", "--out", file, "--detach"})).exit_code, 0);
    EXPECT_EQ(gen(4096, 10).exit_code, 0);
    EXPECT_TRUE(stats.eventually(
        [](const v1::Stats& s) {
          for (const auto& flow : s.flows()) {
            if (flow.name() == "stream0") return flow.packets() == 10;
          }
          return false;
        },
        5s))
        << stats.get().DebugString();
    faults_.arm(f);
    int code = d->stop(SIGTERM, 15s);
    faults_.disarm();
    EXPECT_GE(code, 0) << "did not stop within 15 s\n" << d->log();
    EXPECT_LT(code, 128) << "killed by a signal\n" << d->log();
    if (code != 0 && f.call != Call::kCount) {
      EXPECT_THAT(d->log(), ::testing::HasSubstr(std::strerror(f.error)));
    }
    EXPECT_NE(tap.wait(10s), -1) << "the client was not told the daemon went";
    size_t records = test::read_pcap(file).size();
    if (f.call == Call::kCount) {
      EXPECT_EQ(records, 10u) << d->log();
    } else if (records != 10) {
      EXPECT_THAT(d->log(), ::testing::HasSubstr(std::strerror(f.error)))
          << file << ": " << records << " records";
    }
    EXPECT_EQ(outside_captures(), clean);
  };
  stop_under({}, 0);
  auto sites = faults_.sites();
  print_sites("stopping daqirid", sites);
  ASSERT_FALSE(sites.empty());
  int round = 1;
  sweep(faults_, sites, "stop", [&](const Fault& f) { stop_under(f, round++); });
}

}  // namespace
}  // namespace daqiri::fault
