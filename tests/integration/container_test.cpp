// Clients in real containers: rootful podman (runc, the cgroupfs manager, rlimits below the
// host's, as this machine needs) runs daqiri-ctl in an unprivileged container (a throwaway
// uid, no capabilities, no network) whose only way to the daemon is the CDI device it is
// given. The daemon sees the container's process by the uid and groups the host kernel knows
// (no user namespace), which its access policy and the flows' clients lists check. Skips
// where podman is not installed (tools/install-deps installs it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "dataplane_fixture.hpp"

namespace daqiri::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSanitizerOptions[] = {"ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS",
                                             "UBSAN_OPTIONS"};
using ::testing::HasSubstr;
using ::testing::Not;

// Where `program` is on PATH, or "".
std::string path_of(const std::string& program) {
  auto r = run({"/bin/sh", "-c", "command -v " + program});
  return r.exit_code == 0 ? r.out.substr(0, r.out.find('\n')) : "";
}

class ContainerTest : public DataPlaneTest {
 protected:
  void SetUp() override {
    if (!is_root()) GTEST_SKIP() << "rootful podman needs root";
    podman_ = path_of("podman");
    if (podman_.empty() || path_of("runc").empty()) {
      GTEST_SKIP() << "podman and runc are not installed";
    }
    group_.emplace();
    alice_.emplace(group_->name());
    bob_.emplace(group_->name());
    // stream0 is alice's, stream1 bob's; both may use the daemon.
    std::string text =
        test_config(dir_.file("d.sock"), "  socket_group: " + group_->name() +
                                             "\n  access:\n    clients:\n      users: [" +
                                             alice_->name() + ", " + bob_->name() + "]\n");
    for (auto [flow, user] : {std::pair{"stream0", &*alice_}, std::pair{"stream1", &*bob_}}) {
      std::string line = std::string("  - name: ") + flow + "\n";
      text.replace(text.find(line), line.size(),
                   line + "    clients: {users: [" + user->name() + "]}\n");
    }
    // tx0 is alice's alone.
    std::string tx_line = "        - name: tx0\n";
    text.replace(text.find(tx_line), tx_line.size(),
                 tx_line + "          clients: {users: [" + alice_->name() + "]}\n");
    socket_ = dir_.file("d.sock");
    start_config(text);
    if (HasFatalFailure()) return;
    make_rootfs();
    // A kind of this test's own, so that its devices meet no other spec on the machine.
    kind_ = "t" + std::to_string(::getpid()) + ".daqiri.io/flow";
    spec_ = "/var/run/cdi/daqiri-test-" + std::to_string(::getpid()) + ".yaml";
    auto gen =
        run({ctl_path(), "--socket", socket_, "cdi", "generate", "-o", spec_, "--kind", kind_});
    ASSERT_EQ(gen.exit_code, 0) << gen.out << gen.err;
  }
  void TearDown() override {
    if (!spec_.empty()) fs::remove(spec_);
    DataPlaneTest::TearDown();
  }

  // daqiri-ctl and the libraries it links, nothing else: the container's whole file system.
  void make_rootfs() {
    rootfs_ = dir_.file("rootfs");
    fs::create_directories(rootfs_ + "/usr/bin");
    fs::copy_file(ctl_path(), rootfs_ + "/usr/bin/daqiri-ctl");
    auto libs = run({"/bin/sh", "-c", "ldd " + ctl_path() + " | awk '/\\// {print $(NF-1)}'"});
    std::istringstream in(libs.out);
    std::vector<std::string> files;
    for (std::string lib; in >> lib;)
      files.push_back(lib);
    for (const char* var : kSanitizerOptions) {
      const char* value = std::getenv(var);
      for (std::string_view v = value ? value : ""; !v.empty();) {
        std::string_view option = v.substr(0, v.find(':'));
        if (option.starts_with("suppressions=")) files.emplace_back(option.substr(13));
        v.remove_prefix(std::min(v.size(), option.size() + 1));
      }
    }
    for (const auto& file : files) {
      fs::path target = rootfs_ + file;
      fs::create_directories(target.parent_path());
      fs::copy_file(fs::canonical(file), target, fs::copy_options::overwrite_existing);
    }
  }

  // podman run of daqiri-ctl ARGS as `user`, given `devices` (names of this test's kind: a
  // flow's, or tx.INTERFACE.QUEUE).
  std::vector<std::string> container(const TempUser& user, const std::vector<std::string>& devices,
                                     const std::vector<std::string>& args) {
    std::vector<std::string> argv{
        podman_, "--runtime", "runc", "--cgroup-manager", "cgroupfs", "run", "--rm", "--ulimit",
        "nofile=1000:1000", "--ulimit", "nproc=1000:1000", "--network", "none", "--user",
        std::to_string(user.uid()) + ":" + std::to_string(user.gid()),
        // The socket's group: the container knows no /etc/group to take it from.
        "--group-add", std::to_string(group_->gid()), "--cap-drop", "all", "--security-opt",
        "no-new-privileges"};
    // A sanitizer build's options (and their suppression files, copied into the root file
    // system) go in too: the container's environment is its own.
    for (const char* var : kSanitizerOptions) {
      if (const char* value = std::getenv(var)) {
        argv.push_back("--env");
        argv.push_back(std::string(var) + "=" + value);
      }
    }
    for (const auto& d : devices) {
      argv.push_back("--device");
      argv.push_back(kind_ + "=" + d);
    }
    argv.insert(argv.end(), {"--rootfs", rootfs_, "/usr/bin/daqiri-ctl"});
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  std::optional<TempGroup> group_;  // outlives its members
  std::optional<TempUser> alice_, bob_;
  std::string podman_, rootfs_, kind_, spec_;
};

// alice's container, given stream0, finds the daemon and its flow from the device alone and
// receives daqiri-gen's packets byte-exact.
TEST_F(ContainerTest, AnUnprivilegedContainerReceivesItsFlowThroughCdi) {
  Spawned rx(dir_, container(*alice_, {"stream0"},
                             {"tap", "--count", "500", "--quiet", "--verify", "--timeout", "30"}));
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 1; }, 30s))
      << rx.output() << daemon_->log();
  ASSERT_EQ(gen(4096, 500, 700).exit_code, 0);
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log();
  EXPECT_THAT(rx.output(), HasSubstr("received 500 packets, 350000 payload bytes"));
  EXPECT_THAT(rx.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  // The daemon knew the container's process by its uid on the host.
  EXPECT_THAT(daemon_->log(), HasSubstr("uid " + std::to_string(alice_->uid())));
}

// bob's container, given stream1, sees only stream1 and is refused stream0 by the daemon; a
// container without a device has no way to the daemon at all.
TEST_F(ContainerTest, AContainerReachesOnlyTheFlowsItIsGiven) {
  auto listed = run(container(*bob_, {"stream1"}, {"flows", "list"}));
  ASSERT_EQ(listed.exit_code, 0) << listed.out << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("stream1"));
  EXPECT_THAT(listed.out, Not(HasSubstr("stream0")));
  auto other = run(container(*bob_, {"stream1"}, {"tap", "stream0", "--count", "1"}));
  EXPECT_NE(other.exit_code, 0);
  EXPECT_THAT(other.out + other.err,
              HasSubstr("flow \"stream0\" admits only the clients its clients list names"));
  auto none = run(container(*bob_, {}, {"flows", "list"}));
  EXPECT_EQ(none.exit_code, 3) << none.out << none.err;  // no daemon: no socket in there
  EXPECT_TRUE(healthy());
}

// alice's container, given TX queue tx0, sends through it from the device alone: the frames
// loop back into stream0, where a tap on the host receives them byte-exact. bob's container,
// given the same device, is refused by the queue's clients list.
TEST_F(ContainerTest, AnUnprivilegedContainerSendsThroughItsTxQueue) {
  Spawned rx(dir_, tap("stream0", 500));
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 1; }, 30s))
      << rx.output() << daemon_->log();
  auto sent = run(container(
      *alice_, {"tx.lo.tx0"},
      {"send", "--dest", "127.0.0.1:4096", "--count", "500", "--size", "700", "--rate", "50000"}));
  ASSERT_EQ(sent.exit_code, 0) << sent.out << sent.err << daemon_->log();
  EXPECT_THAT(sent.out, HasSubstr("sent 500 packets, 350000 payload bytes"));
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log();
  EXPECT_THAT(rx.output(), HasSubstr("received 500 packets, 350000 payload bytes"));
  EXPECT_THAT(rx.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));

  auto refused = run(container(*bob_, {"tx.lo.tx0"}, {"send", "--dest", "127.0.0.1:4096"}));
  EXPECT_EQ(refused.exit_code, 4) << refused.out << refused.err;
  EXPECT_THAT(refused.out + refused.err,
              HasSubstr("admits only the clients its clients list names"));
  EXPECT_TRUE(healthy());
}

}  // namespace
}  // namespace daqiri::test
