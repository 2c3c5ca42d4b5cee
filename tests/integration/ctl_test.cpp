// daqiri-ctl against a real daqirid: output, --json, exit codes, and permissions for
// throwaway unprivileged users.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness.hpp"
#include "stats_client.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class CtlTest : public ::testing::Test {
 protected:
  CommandResult ctl(std::vector<std::string> args,
                    std::optional<std::pair<uid_t, gid_t>> as = std::nullopt) {
    args.insert(args.begin(), {ctl_path(), "--socket", socket_});
    return run(args, as);
  }

  void start(const std::string& daemon_extra = "") {
    socket_ = dir_.file("d.sock");
    std::string config = dir_.write("d.yaml", test_config(socket_, daemon_extra));
    daemon_ = std::make_unique<DaemonProcess>(dir_, std::vector<std::string>{"--config", config});
    ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
  }

  void TearDown() override {
    if (daemon_) {
      EXPECT_EQ(daemon_->stop(), 0) << daemon_->log();
    }
  }

  TempDir dir_;
  std::string socket_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(CtlTest, PrintsAlignedTables) {
  start();
  auto r = ctl({"flows", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "NAME     ID  INTERFACE  QUEUE  MATCH         ORIGIN  STEERING  CLIENTS\n"
            "stream0  0   lo         rx0    udp_dst=4096  config  software  all\n"
            "stream1  1   lo         rx0    udp_dst=4097  config  software  all\n");
  r = ctl({"queues"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "INTERFACE  QUEUE  ID  DIR  CORE  BATCH  RING  REGIONS  DELIVERY\n"
            "lo         rx0    0   rx   -     64     1024  rx_host  socket\n"
            "lo         tx0    0   tx   -     64     1024  tx_host  -\n");
  r = ctl({"interfaces"});
  EXPECT_EQ(r.out,
            "NAME  BACKEND  ADDRESS    RX  TX  STATE\n"
            "lo    socket   127.0.0.1  1   1   configured\n");
  r = ctl({"regions"});
  EXPECT_EQ(r.out,
            "NAME     KIND  BUF_SIZE  NUM_BUFS  TOTAL    GPU  PAGES\n"
            "rx_host  host  2048      4096      8.0 MiB  -    -\n"
            "tx_host  host  2048      2048      4.0 MiB  -    -\n");
  r = ctl({"sessions"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("(none)"));
  r = ctl({"info"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("daqirid 0.1.0"));
  EXPECT_THAT(r.out, HasSubstr("config:    " + dir_.file("d.yaml")));
  r = ctl({"health"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "serving\n");
}

TEST_F(CtlTest, JsonIsTheProtoMessage) {
  start();
  auto r = ctl({"--json", "flows", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"name\": \"stream0\""));
  EXPECT_THAT(r.out, HasSubstr("\"steering\": \"STEERING_SOFTWARE\""));
  EXPECT_EQ(r.out.front(), '{');
}

// Global options after the command, as other CLIs take them.
TEST_F(CtlTest, GlobalOptionsComeBeforeOrAfterTheCommand) {
  start();
  auto r = run({ctl_path(), "flows", "list", "--json", "--socket", socket_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"name\": \"stream0\""));
  EXPECT_EQ(r.out.front(), '{');
  r = run({ctl_path(), "info", "-s", socket_, "--json", "--timeout", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.front(), '{');
  // A command's own option of that name stays the command's.
  r = run({ctl_path(), "--socket", socket_, "tap", "stream0", "-n", "1", "--timeout", "0.2"});
  EXPECT_THAT(r.out + r.err, HasSubstr("received 0 packets")) << r.out << r.err;
}

TEST_F(CtlTest, AddsAndDeletesFlowsWithDistinctExitCodes) {
  if (!is_root()) GTEST_SKIP() << "needs root for the admin role";
  start();
  auto r = ctl(
      {"flows", "add", "extra", "-i", "lo", "--udp-dst", "5000-5004", "--ipv4-dst", "127.0.0.0/8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "flow extra (id 2) created: udp_dst=5000-5004 ipv4_dst=127.0.0.0/8 -> lo/rx0\n");
  r = ctl({"flows", "add", "clash", "-i", "lo", "--udp-dst", "5003"});
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_THAT(r.err, HasSubstr("overlaps flow \"extra\""));
  r = ctl({"flows", "add", "bad", "-i", "lo", "--udp-dst", "x"});
  EXPECT_EQ(r.exit_code, 2);
  r = ctl({"flows", "add", "bad", "-i", "lo", "--udp-dst", "0"});
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_EQ(r.err, "daqiri-ctl: invalid request: match.udp_dst: UDP ports are 1 to 65535\n");
  r = ctl({"flows", "del", "extra"});
  EXPECT_EQ(r.exit_code, 0);
  r = ctl({"flows", "del", "extra"});
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_EQ(r.err, "daqiri-ctl: not found: no flow named \"extra\"\n");
  r = ctl({"flows", "bogus"});
  EXPECT_EQ(r.exit_code, 2);
}

// A /0 prefix matches every address (it once became /32 on its way to the daemon and matched
// none); a prefix length that is not a number is refused, not read as 32.
TEST_F(CtlTest, AZeroLengthPrefixMatchesEverySourceAndABadLengthIsRefused) {
  if (!is_root()) GTEST_SKIP() << "needs root for the admin role";
  start();
  auto r =
      ctl({"flows", "add", "anysrc", "-i", "lo", "--udp-dst", "5100", "--ipv4-src", "0.0.0.0/0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "flow anysrc (id 2) created: udp_dst=5100 ipv4_src=0.0.0.0/0 -> lo/rx0\n");
  Spawned tap(
      dir_, {ctl_path(), "--socket", socket_, "tap", "anysrc", "-n", "20", "--verify", "-t", "10"});
  StatsClient stats(socket_);
  ASSERT_TRUE(stats.eventually([](const v1::Stats& s) { return claimed(s) == 1; }, 5s));
  EXPECT_EQ(
      run({gen_path(), "--dest", "127.0.0.1:5100", "--count", "20", "--rate", "10000"}).exit_code,
      0);
  EXPECT_EQ(tap.wait(), 0) << tap.output();
  EXPECT_THAT(tap.output(), HasSubstr("received 20 packets"));
  for (const char* bad : {"10.0.0.0/x", "10.0.0.0/", "10.0.0.0/24x"}) {
    r = ctl({"flows", "add", "bad", "-i", "lo", "--udp-dst", "5101", "--ipv4-dst", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_EQ(r.err, std::string("daqiri-ctl: --ipv4-dst: expected an address or a prefix like "
                                 "10.0.0.0/24, got \"") +
                         bad + "\"\n");
  }
  r = ctl({"flows", "add", "bad", "-i", "lo", "--udp-dst", "5101", "--ipv4-dst", "10.0.0.0/33"});
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_THAT(r.err, HasSubstr("prefix length must be 0 to 32"));
}

TEST_F(CtlTest, StatsWatchPrintsRatesFromDeltas) {
  start();
  Spawned tap(dir_, {ctl_path(), "--socket", socket_, "tap", "stream0", "--quiet", "--block",
                     "--timeout", "5"});
  Spawned gen(dir_, {gen_path(), "--dest", "127.0.0.1:4096", "--size", "100", "--rate", "2000",
                     "--duration", "3"});
  auto r = ctl({"stats", "--watch", "0.5", "--frames", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("RATE"));
  // The sender's 2000 pps show up in the last frame's rate for stream0 (give or take pacing).
  auto last = r.out.rfind("stream0");
  ASSERT_NE(last, std::string::npos);
  auto line = r.out.substr(last, r.out.find('\n', last) - last);
  auto pps = line.find(" pps");
  ASSERT_NE(pps, std::string::npos) << line;
  auto start_num = line.rfind(' ', pps - 1) + 1;
  double rate = std::stod(line.substr(start_num, pps - start_num));
  EXPECT_GT(rate, 1500) << line;
  EXPECT_LT(rate, 2500) << line;
  gen.wait();
  tap.kill(SIGTERM);
}

// `send` is a TX client: its frames leave through lo/tx0 and loop back into stream1, where a
// tap verifies every byte. What it cannot do, it says, with the usual exit codes.
TEST_F(CtlTest, SendTransmitsThroughATxQueueAndSaysWhyItCannot) {
  start();
  Spawned tap(dir_, {ctl_path(), "--socket", socket_, "tap", "stream1", "-n", "300", "--verify",
                     "--quiet", "-t", "20"});
  StatsClient stats(socket_);
  ASSERT_TRUE(stats.eventually([](const v1::Stats& s) { return claimed(s) == 1; }, 5s));
  auto r = ctl({"send", "-i", "lo", "--dest", "127.0.0.1:4097", "-n", "300", "--size", "1000",
                "--rate", "20000"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << daemon_->log();
  EXPECT_THAT(r.out, HasSubstr("sent 300 packets, 300000 payload bytes"));
  ASSERT_EQ(tap.wait(), 0) << tap.output();
  EXPECT_THAT(tap.output(), HasSubstr("received 300 packets, 300000 payload bytes"));
  EXPECT_THAT(tap.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));

  struct Refusal {
    std::vector<std::string> args;
    int exit_code;
    std::string says;
  };
  const std::vector<Refusal> refusals{
      // No interface, and none in the environment.
      {{"--dest", "127.0.0.1:4097"}, 2, "name an interface"},
      {{"-q", "tx0", "--dest", "127.0.0.1:4097"}, 2, "--queue names a queue of an interface"},
      {{"-i", "lo", "--dest", "127.0.0.1"}, 2, "--dest: expected IPV4:PORT, got \"127.0.0.1\""},
      {{"-i", "lo", "--dest", "127.0.0.1:4097", "--dest-mac", "02:00:00:00:00"},
       2,
       "--dest-mac: expected aa:bb:cc:dd:ee:ff"},
      {{"-i", "nope", "--dest", "127.0.0.1:4097"}, 5, "no interface \"nope\""},
      // tx_host's buffers are 2048 bytes: a 2007-byte payload makes a 2049-byte frame.
      {{"-i", "lo", "--dest", "127.0.0.1:4097", "--size", "2007"},
       5,
       "a 2007-byte payload makes a 2049-byte frame; the queue's buffers take 2048"},
      {{"-i", "lo", "-q", "tx9", "--dest", "127.0.0.1:4097"}, 5, "no TX queue lo/tx9"},
  };
  for (const auto& refusal : refusals) {
    std::vector<std::string> args{"send"};
    args.insert(args.end(), refusal.args.begin(), refusal.args.end());
    r = ctl(args);
    EXPECT_EQ(r.exit_code, refusal.exit_code) << r.err;
    EXPECT_THAT(r.err, HasSubstr("daqiri-ctl send: " + refusal.says)) << r.err;
  }
}

TEST_F(CtlTest, NoDaemonIsExitCodeThree) {
  socket_ = dir_.file("nobody.sock");
  auto r = ctl({"info"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.err, "daqiri-ctl: no daqirid is listening on " + socket_ +
                       " (the socket does not exist; is the service running?)\n");
}

// `tap --gpu` where it cannot work says why: no CUDA driver (CI: exit 1), or, with one, a flow
// of a host region (exit 5) — never "no daemon" (3).
TEST_F(CtlTest, TapGpuSaysWhyItCannot) {
  start();
  auto r = ctl({"tap", "stream0", "--gpu", "-n", "1", "-t", "2"});
  EXPECT_TRUE(r.exit_code == 1 || r.exit_code == 5) << r.exit_code << " " << r.err;
  EXPECT_THAT(r.err, ::testing::AnyOf(HasSubstr("CUDA"), HasSubstr("needs a device or pinned")))
      << r.err;
  EXPECT_THAT(r.err, ::testing::StartsWith("daqiri-ctl: tap: ")) << r.err;
}

TEST_F(CtlTest, ClientsMayReadButNotChangeAndStrangersGetNothing) {
  if (!is_root()) GTEST_SKIP() << "creates throwaway users: needs root";
  TempGroup group;  // owns the socket, so both users can connect
  TempUser client(group.name());
  TempUser stranger(group.name());
  start("  socket_group: " + group.name() + "\n  access:\n    clients:\n      users: [" +
        client.name() + "]\n");

  auto r = ctl({"flows", "list"}, client.ids());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("stream0"));
  r = ctl({"info"}, client.ids());
  EXPECT_THAT(r.out, HasSubstr("uid " + std::to_string(client.uid()) + " (" + client.name() + ")"));
  EXPECT_THAT(r.out, HasSubstr("role client"));

  r = ctl({"flows", "add", "mine", "-i", "lo", "--udp-dst", "9000"}, client.ids());
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.err, "daqiri-ctl: permission denied: uid " + std::to_string(client.uid()) + " (" +
                       client.name() +
                       ") may not create flows: it needs the admin role and has only the client "
                       "role (daemon.access.admins grants admin)\n");

  r = ctl({"flows", "list"}, stranger.ids());
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.err, "daqiri-ctl: permission denied: uid " + std::to_string(stranger.uid()) + " (" +
                       stranger.name() +
                       ") may not list flows: it needs the client role and is listed in neither "
                       "daemon.access.admins nor daemon.access.clients\n");

  // Membership of an admin group is enough to mutate.
  TearDown();
  daemon_.reset();
  start("  socket_group: " + group.name() + "\n  access:\n    admins:\n      groups: [" +
        group.name() + "]\n");
  r = ctl({"flows", "add", "theirs", "-i", "lo", "--udp-dst", "9001"}, stranger.ids());
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(CtlTest, SocketIsGroupOwnedAndClosedToOthers) {
  if (!is_root()) GTEST_SKIP() << "creates throwaway users: needs root";
  TempGroup group;
  TempUser outsider;  // not in the socket's group
  start("  socket_group: " + group.name() + "\n");
  // Both sockets are made with their mode and group (nothing changed by path afterwards).
  std::string session = socket_.substr(0, socket_.size() - 5) + ".session.sock";
  for (const std::string& path : {socket_, session}) {
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0) << path;
    EXPECT_TRUE(S_ISSOCK(st.st_mode)) << path;
    EXPECT_EQ(st.st_mode & 0777, 0660u) << path;
    EXPECT_EQ(st.st_gid, group.gid()) << path;
  }
  auto r = ctl({"info"}, outsider.ids());
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr("permission denied on " + socket_));
}

// What bash completes after the words typed, with the installed completion script sourced.
std::vector<std::string> completions(const std::string& typed) {
  std::string script = "source '" + source_dir() +
                       "/tools/daqiri-ctl/daqiri-ctl.bash-completion'; "
                       "read -ra COMP_WORDS <<<\"$1\"; [[ $1 == *' ' ]] && COMP_WORDS+=(''); "
                       "COMP_WORDS[0]=\"$2\"; COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); "
                       "_daqiri_ctl; printf '%s\\n' \"${COMPREPLY[@]}\"";
  auto r = run({"/bin/bash", "-c", script, "bash", typed, ctl_path()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

TEST(CtlCompletion, OffersSubcommandsAndOptionsFromTheProgramsOwnHelp) {
  using ::testing::Contains;
  using ::testing::ElementsAre;
  using ::testing::UnorderedElementsAre;
  EXPECT_THAT(completions("daqiri-ctl fl"), ElementsAre("flows"));
  EXPECT_THAT(completions("daqiri-ctl flows "),
              UnorderedElementsAre("list", "add", "del", "delete"));
  EXPECT_THAT(completions("daqiri-ctl -s /x flows add --udp"),
              UnorderedElementsAre("--udp-src", "--udp-dst"));
  // Global options after a subcommand, as daqiri-ctl takes them.
  auto after_stats = completions("daqiri-ctl stats --");
  EXPECT_THAT(after_stats, Contains("--watch"));
  EXPECT_THAT(after_stats, Contains("--json"));
}

// The CDI spec of the flows: daqiri-ctl writes it on demand, and a daemon with cdi_spec keeps
// its own current through flow changes and takes it away when it stops.
TEST_F(CtlTest, CdiSpecsFollowTheFlows) {
  std::string spec_path = dir_.file("cdi/daqiri.yaml");
  start("  cdi_spec: " + spec_path + "\n");
  auto read = [&](const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  std::string own = read(spec_path);
  EXPECT_THAT(own, HasSubstr("kind: \"daqiri.io/flow\""));
  EXPECT_THAT(own, HasSubstr("\"DAQIRI_SOCKET=" + socket_ + "\""));
  EXPECT_THAT(own, HasSubstr("- name: \"stream0\""));
  EXPECT_THAT(own, HasSubstr("\"DAQIRI_FLOW=stream1\""));
  EXPECT_THAT(own, HasSubstr("- name: \"tx.lo.tx0\""));  // the TX queue
  EXPECT_THAT(own, HasSubstr("\"DAQIRI_TX_QUEUE=tx0\""));

  auto add = ctl({"flows", "add", "radio", "-i", "lo", "--udp-dst", "5000"});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  EXPECT_THAT(read(spec_path), HasSubstr("\"DAQIRI_FLOW=radio\""));
  auto generated = ctl({"cdi", "generate", "-o", "-", "--kind", "example.com/flow"});
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  EXPECT_THAT(generated.out, HasSubstr("kind: \"example.com/flow\""));
  EXPECT_THAT(generated.out, HasSubstr("\"DAQIRI_FLOW=radio\""));
  auto written = ctl({"cdi", "generate", "-o", dir_.file("by-hand.yaml")});
  ASSERT_EQ(written.exit_code, 0) << written.err;
  EXPECT_EQ(written.out, "wrote " + dir_.file("by-hand.yaml") +
                             ": daqiri.io/flow=all, daqiri.io/flow=radio, "
                             "daqiri.io/flow=stream0, daqiri.io/flow=stream1, "
                             "daqiri.io/flow=tx.lo.tx0\n");
  EXPECT_EQ(read(dir_.file("by-hand.yaml")), read(spec_path));

  ASSERT_EQ(ctl({"flows", "del", "radio"}).exit_code, 0);
  EXPECT_THAT(read(spec_path), ::testing::Not(HasSubstr("radio")));
  EXPECT_EQ(daemon_->stop(), 0) << daemon_->log();
  daemon_.reset();
  EXPECT_FALSE(std::filesystem::exists(spec_path));
}

}  // namespace
}  // namespace daqiri::test
