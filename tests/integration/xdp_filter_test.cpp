// The XDP flow filter in the kernel: packets a rule matches are its flow's (counted, sent to the
// queue's socket where there is one), everything else passes to the kernel; rules change live.
// Run through BPF_PROG_TEST_RUN, and attached to a veth beside another XDP program. Needs root
// (the bpf system call).
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <linux/magic.h>
#include <net/if.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xdp/libxdp.h>

#include <cstdio>
#include <cstdlib>
#include <span>

#include "backends/xdp/xdp_program.hpp"
#include "pcap_frames.hpp"
#include "veth_pair.hpp"

namespace daqiri::backends::xdp {
namespace {

using test::Frame;
using test::make_frame;

std::span<const uint8_t> bytes(const Frame& f) {
  return {reinterpret_cast<const uint8_t*>(f.data()), f.size()};
}

// Ports [lo, hi] from addresses in 10.1.0.0/16 (network order in the map).
daqiri_xdp_rule udp_rule(uint16_t lo, uint16_t hi) {
  daqiri_xdp_rule r{};
  r.src_addr = htonl(0x0a010000);
  r.src_mask = htonl(0xffff0000);
  r.src_port_hi = 0xffff;
  r.dst_port_lo = lo;
  r.dst_port_hi = hi;
  return r;
}

class XdpFilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (bpf)";
    auto p = XdpProgram::load();
    ASSERT_TRUE(p) << p.error().message;
    program_ = std::move(*p);
  }
  static uint64_t total(const daqiri_xdp_counts& c) {
    return c.redirected + c.no_socket + c.other_queue;
  }
  // The verdict on `f`, and which counter moved: a rule's slot, or kUnmatched.
  static constexpr uint32_t kUnmatched = DAQIRI_XDP_MAX_RULES;
  uint32_t counted(const Frame& f) {
    std::array<uint64_t, DAQIRI_XDP_MAX_RULES + 1> before{};
    for (uint32_t s = 0; s <= DAQIRI_XDP_MAX_RULES; ++s)
      before[s] = total(program_->counts(s));
    auto verdict = program_->run(bytes(f));
    EXPECT_TRUE(verdict) << verdict.error().message;
    EXPECT_EQ(*verdict, uint32_t{XDP_PASS});  // no socket here: matches pass on too
    for (uint32_t s = 0; s <= DAQIRI_XDP_MAX_RULES; ++s) {
      if (total(program_->counts(s)) != before[s]) return s;
    }
    return UINT32_MAX;
  }
  std::unique_ptr<XdpProgram> program_;
};

TEST_F(XdpFilterTest, ARuleTakesItsUdpPacketsAndNothingElse) {
  ASSERT_TRUE(program_->set_rule(3, udp_rule(5000, 5001)));
  EXPECT_EQ(program_->mode(), "none");
  EXPECT_EQ(counted(make_frame(7000, 5000, 0, 64)), 3u);
  EXPECT_EQ(counted(make_frame(7000, 5001, 1, 64)), 3u);
  EXPECT_EQ(counted(make_frame(7000, 5002, 2, 64)), kUnmatched);
  EXPECT_EQ(counted(test::with_tag(make_frame(7000, 5000, 3, 64), 0x8100)), 3u);          // one tag
  EXPECT_EQ(counted(test::with_protocol(make_frame(7000, 5000, 4, 64), 6)), kUnmatched);  // TCP
  EXPECT_EQ(counted(test::as_later_fragment(make_frame(7000, 5000, 5, 64))), kUnmatched);
  EXPECT_EQ(counted(test::with_ethertype(make_frame(7000, 5000, 6, 64), 0x0806)), kUnmatched);
  Frame from_elsewhere = make_frame(7000, 5000, 7, 64);
  from_elsewhere[frame::kEthHeader + 12] = std::byte{11};  // 11.1.0.1
  EXPECT_EQ(counted(from_elsewhere), kUnmatched);
  Frame runt(20);
  EXPECT_EQ(counted(runt), kUnmatched);
  EXPECT_EQ(program_->counts(3).no_socket, 3u);
  EXPECT_EQ(program_->counts(3).redirected, 0u);

  // Live: cleared, the same packet is the kernel's; a length rule takes only its length.
  ASSERT_TRUE(program_->clear_rule(3));
  EXPECT_EQ(counted(make_frame(7000, 5000, 8, 64)), kUnmatched);
  daqiri_xdp_rule sized = udp_rule(5000, 5000);
  sized.ip_length = 20 + 8 + 100;
  ASSERT_TRUE(program_->set_rule(0, sized));
  EXPECT_EQ(counted(make_frame(7000, 5000, 9, 100)), 0u);
  EXPECT_EQ(counted(make_frame(7000, 5000, 10, 101)), kUnmatched);
}

TEST_F(XdpFilterTest, TheFirstRuleThatMatchesTakesThePacketAndSlotsAreBounded) {
  ASSERT_TRUE(program_->set_rule(1, udp_rule(5000, 5000)));
  ASSERT_TRUE(program_->set_rule(2, udp_rule(4000, 6000)));
  EXPECT_EQ(counted(make_frame(7000, 5000, 0, 64)), 1u);
  EXPECT_EQ(counted(make_frame(7000, 5500, 1, 64)), 2u);
  auto full = program_->set_rule(DAQIRI_XDP_MAX_RULES, udp_rule(1, 1));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().message, "an interface's XDP filter holds 64 flows");
  EXPECT_FALSE(program_->set_socket(DAQIRI_XDP_MAX_QUEUES, 3));
}

// A socket takes the frames of its own queue only: a match that arrived on another queue than
// its rule's goes on to the kernel, counted apart.
TEST_F(XdpFilterTest, AMatchOnAnotherQueueThanItsRulesGoesToTheKernel) {
  daqiri_xdp_rule on_queue_1 = udp_rule(5000, 5000);
  on_queue_1.queue = 1;
  ASSERT_TRUE(program_->set_rule(4, on_queue_1));
  EXPECT_EQ(counted(make_frame(7000, 5000, 0, 64)), 4u);  // run() delivers on queue 0
  EXPECT_EQ(program_->counts(4).other_queue, 1u);
  EXPECT_EQ(program_->counts(4).no_socket, 0u);
}

// libxdp's dispatcher pins itself in the BPF file system. systemd mounts one on /sys/fs/bpf; in
// the test's own mount namespace (tests/own-network) one is mounted here, else the test skips.
bool bpffs_ready() {
  struct statfs fs {};
  if (::statfs("/sys/fs/bpf", &fs) == 0 && fs.f_type == BPF_FS_MAGIC) return true;
  return std::getenv("DAQIRI_OWN_NETWORK") != nullptr &&
         ::mount("bpf", "/sys/fs/bpf", "bpf", 0, nullptr) == 0;
}

// On an interface, alone and beside another program (xdp-filter's, from libxdp's objects): a
// program left attached by a daemon that did not stop is found by its name and removed, and
// the other program is never touched. Beside it through libxdp's dispatcher where the kernel
// runs one; a kernel that refuses the dispatcher's freplace programs (this test VM's) takes one
// program an interface, and the filter's refusal names the program there.
TEST(XdpFilterAttach, AttachesAloneOrBesideOthersAndCleansUpOnlyItsOwn) {
  if (::geteuid() != 0 || test::VethPair::ip_path().empty()) GTEST_SKIP() << "needs root and ip";
  if (!bpffs_ready()) GTEST_SKIP() << "no BPF file system on /sys/fs/bpf";
  const char* other_object = "/usr/lib/" DAQIRI_LIBRARY_ARCH "/bpf/xdpfilt_alw_all.o";
  if (::access(other_object, R_OK) != 0) GTEST_SKIP() << "no " << other_object;
  test::VethPair veth;
  int ifindex = static_cast<int>(::if_nametoindex(veth.host().c_str()));
  ASSERT_GT(ifindex, 0);
  auto count = [ifindex] {
    xdp_multiprog* mp = xdp_multiprog__get_from_ifindex(ifindex);
    if (libxdp_get_error(mp) != 0 || mp == nullptr) return 0;
    int n = xdp_multiprog__is_legacy(mp) ? 1 : xdp_multiprog__program_count(mp);
    xdp_multiprog__close(mp);
    return n;
  };
  {
    auto ours = XdpProgram::attach(ifindex);
    ASSERT_TRUE(ours) << ours.error().message;
    EXPECT_EQ((*ours)->mode(), "native");  // veth runs XDP in its driver
    EXPECT_EQ(count(), 1);
  }
  EXPECT_EQ(count(), 0);

  // A daemon killed while attached: its program stays on the interface till the next removes it.
  auto leave_one = [ifindex] {
    pid_t child = ::fork();
    if (child == 0) {
      auto leftover = XdpProgram::attach(ifindex);
      ::_exit(leftover ? 0 : 1);  // no destructor: nothing detached
    }
    int status = 0;
    return ::waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  };
  ASSERT_TRUE(leave_one());
  EXPECT_EQ(count(), 1);
  auto removed = XdpProgram::remove_leftovers(ifindex);
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_EQ(*removed, 1);
  EXPECT_EQ(count(), 0);

  xdp_program* other = xdp_program__open_file(other_object, nullptr, nullptr);
  ASSERT_EQ(libxdp_get_error(other), 0);
  ASSERT_EQ(xdp_program__attach(other, ifindex, XDP_MODE_NATIVE, 0), 0);
  xdp_multiprog* mp = xdp_multiprog__get_from_ifindex(ifindex);
  ASSERT_EQ(libxdp_get_error(mp), 0);
  const bool dispatcher = !xdp_multiprog__is_legacy(mp);
  xdp_multiprog__close(mp);
  std::printf("libxdp's dispatcher: %s\n", dispatcher ? "runs here" : "refused by this kernel");
  if (dispatcher) {
    auto ours = XdpProgram::attach(ifindex);
    ASSERT_TRUE(ours) << ours.error().message;
    EXPECT_EQ(count(), 2);
    ours->reset();
    EXPECT_EQ(count(), 1);
    ASSERT_TRUE(leave_one());
    EXPECT_EQ(count(), 2);
    removed = XdpProgram::remove_leftovers(ifindex);
    ASSERT_TRUE(removed) << removed.error().message;
    EXPECT_EQ(*removed, 1);
  } else {
    auto refused = XdpProgram::attach(ifindex);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find(
                  "(XDP program xdpfilt_alw_all holds it without libxdp's dispatcher"),
              std::string::npos)
        << refused.error().message;
  }
  removed = XdpProgram::remove_leftovers(ifindex);  // the other is not ours
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_EQ(*removed, 0);
  EXPECT_EQ(count(), 1);
  EXPECT_EQ(xdp_program__detach(other, ifindex, XDP_MODE_NATIVE, 0), 0);
  xdp_program__close(other);
  EXPECT_EQ(count(), 0);
}

}  // namespace
}  // namespace daqiri::backends::xdp
