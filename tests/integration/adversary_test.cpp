// The trust boundary under attack: hostile clients (daqiri-adversary, some as throwaway
// unprivileged users) against the real daemon, and what must hold for everyone else.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "daqiri/abi.h"
#include "daqiri/session_header.hpp"
#include "dataplane_fixture.hpp"
#include "frame_capture.hpp"
#include "harness.hpp"
#include "pcap_frames.hpp"
#include "thread_stop.hpp"
#include "veth_pair.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class AdversaryTest : public DataPlaneTest {
 public:
  [[nodiscard]] const TempDir& dir() const { return dir_; }
  using DataPlaneTest::stats;
  std::vector<std::string> adversary(std::vector<std::string> args) {
    args.insert(args.begin() + 1, socket_);
    args.insert(args.begin(), adversary_path());
    return args;
  }
  // The test config (with `daemon_extra`) with `from` replaced by `to`, then started.
  void start_with(const std::string& from, const std::string& to,
                  const std::string& daemon_extra = "") {
    socket_ = dir_.file("d.sock");
    std::string text = test_config(socket_, daemon_extra);
    auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    start_config(text);
  }
  // Two throwaway users, mallory_ and trudy_, that may attach: the daemon keys that say so.
  std::string two_users() {
    group_.emplace();
    mallory_.emplace(group_->name());
    trudy_.emplace(group_->name());
    return "  socket_group: " + group_->name() + "\n  access:\n    clients:\n      users: [" +
           mallory_->name() + ", " + trudy_->name() + "]\n";
  }
  std::optional<TempGroup> group_;  // outlives its members
  std::optional<TempUser> mallory_, trudy_;

  const v1::AttachmentStats* tx_attachment(const v1::Stats& s) {
    for (const auto& a : s.attachments()) {
      if (a.direction() == v1::DIRECTION_TX) return &a;
    }
    return nullptr;
  }
};

// The number after `word` in `text` ("claimed 7" -> 7), or -1.
long number_after(const std::string& text, const std::string& word) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(word + " ([0-9]+)"))) return -1;
  return std::stol(m[1]);
}

// Sessions of two users, each attaching ten times to one flow (16 at most), two attaching all
// before claiming any, two attaching and claiming in turn, all at once: exactly 16 are claimed,
// the rest refused with the limit named, the daemon stays up, and each of the 16 rings gets
// every packet of the flow intact and in order.
TEST_F(AdversaryTest, AFlowNeverTakesMoreAttachmentsThanItsLimit) {
  if (!is_root()) GTEST_SKIP() << "needs root for throwaway users";
  start(two_users());
  const TempUser& mallory = *mallory_;
  const TempUser& trudy = *trudy_;
  std::string go = dir_.file("go");
  // Within each of 16 rings' share of the pool (4096 / 16): the racers read one ring at a time.
  constexpr uint64_t kCount = 200;
  std::vector<std::unique_ptr<Spawned>> racers;
  for (const TempUser* u : {&mallory, &trudy}) {
    for (const char* order : {"batch", "pairs"}) {
      racers.push_back(std::make_unique<Spawned>(
          dir_,
          adversary({"claim-race", "stream0", "10", order, go, std::to_string(kCount), "4096"}),
          u->ids()));
    }
  }
  for (size_t i : {0u, 2u}) {  // the batch ones hold their grants before anyone claims
    ASSERT_TRUE(racers[i]->wait_for_output("granted")) << racers[i]->output();
  }
  std::ofstream(go).put('\n');
  long total = 0;
  for (auto& r : racers) {
    ASSERT_TRUE(r->wait_for_output("claimed", 20s)) << r->output();
    total += number_after(r->output(), "claimed");
  }
  EXPECT_EQ(total, 16);
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 16; }));
  EXPECT_EQ(stats().attachments_size(), 16);
  bool refused_with_reason = false;
  for (auto& r : racers) {
    refused_with_reason |= r->output().find("the most one flow takes (16)") != std::string::npos;
  }
  EXPECT_TRUE(refused_with_reason);
  ASSERT_EQ(gen(4096, kCount, 300).exit_code, 0);
  for (auto& r : racers) {
    long mine = number_after(r->output(), "claimed");
    ASSERT_TRUE(
        r->wait_for_output("intact " + std::to_string(mine) + " x " + std::to_string(kCount)))
        << r->output();
  }
  EXPECT_TRUE(healthy());
  EXPECT_EQ(flow_stats(stats(), "stream0")->packets(), kCount);
}

// An attacker on the same flow as a victim, the flow not letting clients hold it back: one
// that never releases (default ring, then the largest ring the pool allows) holds at most its
// ring or its share of the pool, and the victim, a plain drop-new client, gets every packet;
// asking for block backpressure or a ring larger than the pool is refused with the reason. The
// attacker's losses are counted on the attacker alone.
TEST_F(AdversaryTest, AClientThatHoldsBuffersStarvesNobodyElse) {
  if (!is_root()) GTEST_SKIP() << "needs root for throwaway users";
  start_with("    match: {udp_dst: 4096}\n    allow_block: true\n", "    match: {udp_dst: 4096}\n",
             two_users());  // stream0 lets nobody block
  const TempUser& mallory = *mallory_;
  const TempUser& victim = *trudy_;

  auto refused = run(tap("stream0", 1, {"--block"}), mallory.ids());
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("flow \"stream0\" lets no client hold it back"));
  auto too_big = run({test_client_path(), "hold", socket_, "stream0", "1", "8192"}, mallory.ids());
  EXPECT_EQ(too_big.exit_code, 3) << too_big.out;
  EXPECT_THAT(too_big.out, HasSubstr("ring_size 8192 is more than the 4096 buffers"));

  // At 5000 a second, a pace a sanitized tap keeps up with (at 20000 a TSan build's tap fell
  // behind and lost frames to its own full ring, the attacker aside).
  constexpr uint64_t kSent = 5000;
  // The attacker's ring, and what it gets to hold: all of its ring, or its half of the pool.
  for (auto [ring, holds] : {std::pair{"1024", 1024u}, std::pair{"4096", 2048u}}) {
    SCOPED_TRACE(std::string("attacker ring ") + ring);
    Spawned attacker(dir_, {test_client_path(), "hold", socket_, "stream0", "1000000", ring},
                     mallory.ids());
    Spawned bystander(dir_, tap("stream0", kSent), victim.ids());
    ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 2; }))
        << attacker.output() << bystander.output();
    ASSERT_EQ(gen(4096, kSent, 200, 5000).exit_code, 0);
    ASSERT_EQ(bystander.wait(), 0) << bystander.output();
    EXPECT_THAT(bystander.output(), HasSubstr("received " + std::to_string(kSent) + " packets"));
    EXPECT_THAT(bystander.output(),
                HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
    auto s = stats();
    ASSERT_EQ(s.attachments_size(), 1);  // the attacker, still holding
    const auto& a = s.attachments(0);
    EXPECT_EQ(a.packets(), holds);
    EXPECT_EQ(a.buffers_on_loan(), holds);
    EXPECT_EQ(a.dropped_ring_full() + a.dropped_over_share(), kSent - holds);
    EXPECT_EQ(std::string(ring) == "1024" ? a.dropped_over_share() : a.dropped_ring_full(), 0u);
    EXPECT_EQ(flow_stats(s, "stream0")->kernel_drops(), 0u);
    attacker.kill(SIGKILL);
    attacker.wait();
    ASSERT_TRUE(eventually([](const v1::Stats& st) { return st.attachments_size() == 0; }));
  }
}

// Bytes of the memfds a process holds open: the shared memory it has made (rings, pools).
uint64_t memfd_bytes(pid_t pid) {
  uint64_t total = 0;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec);
    if (ec || !target.string().starts_with("/memfd:")) continue;
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_size);
  }
  return total;
}

// Users who attach TX queues (a 4 MiB pool each, every page written) until refused: one user
// gets what daemon.limits.memory_mb_per_user allows, all together what memory_mb_total
// allows, each refusal names its cap, and the daemon's shared memory never grows past the
// total; what one user gives back, another may take.
TEST_F(AdversaryTest, AUserCannotMakeTheDaemonTakeMoreMemoryThanTheCaps) {
  if (!is_root()) GTEST_SKIP() << "needs root for throwaway users";
  start(two_users() + "  limits: {memory_mb_per_user: 40, memory_mb_total: 60}\n");
  const TempUser& mallory = *mallory_;
  const TempUser& trudy = *trudy_;
  const uint64_t before = memfd_bytes(daemon_->pid());
  Spawned first(dir_, adversary({"tx-hoard", "100"}), mallory.ids());
  ASSERT_TRUE(first.wait_for_output("refused", 20s)) << first.output();
  EXPECT_THAT(first.output(), HasSubstr("attached 9\n"));
  EXPECT_THAT(first.output(), Not(HasSubstr("attached 10")));
  EXPECT_THAT(first.output(), HasSubstr("MiB daemon.limits.memory_mb_per_user allows are taken"));
  Spawned second(dir_, adversary({"tx-hoard", "100"}), trudy.ids());
  ASSERT_TRUE(second.wait_for_output("refused", 20s)) << second.output();
  EXPECT_THAT(second.output(), HasSubstr("attached 5\n"));
  EXPECT_THAT(second.output(), Not(HasSubstr("attached 6")));
  EXPECT_THAT(second.output(), HasSubstr("MiB daemon.limits.memory_mb_total allows are taken"));
  EXPECT_LE(memfd_bytes(daemon_->pid()) - before, uint64_t{60} << 20);
  EXPECT_EQ(stats().attachments_size(), 14);
  first.kill(SIGKILL);
  first.wait();
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return s.attachments_size() == 5; }));
  Spawned third(dir_, adversary({"tx-hoard", "3"}), trudy.ids());
  ASSERT_TRUE(third.wait_for_output("attached 3", 20s)) << third.output();
  EXPECT_TRUE(healthy());
}

// A TX queue holds max_clients attachments at once, whoever asks and however they race: two
// users hoarding it get 3 between them, each later one refused with the limit named; one
// given back makes room for exactly one more.
TEST_F(AdversaryTest, ATxQueueNeverTakesMoreAttachmentsThanItsMaxClients) {
  if (!is_root()) GTEST_SKIP() << "needs root for throwaway users";
  const std::string tx0 = "        - name: tx0\n";
  start_with(tx0, tx0 + "          max_clients: 3\n", two_users());
  if (HasFatalFailure()) return;
  Spawned first(dir_, adversary({"tx-hoard", "10"}), mallory_->ids());
  Spawned second(dir_, adversary({"tx-hoard", "10"}), trudy_->ids());
  ASSERT_TRUE(first.wait_for_output("refused", 20s)) << first.output();
  ASSERT_TRUE(second.wait_for_output("refused", 20s)) << second.output();
  long attached = 0;
  for (Spawned* p : {&first, &second}) {
    EXPECT_THAT(p->output(), HasSubstr("TX queue lo/tx0 already has 3 attachments, its "
                                       "max_clients"));
    const std::string out = p->output();
    for (size_t at = out.find("attached "); at != std::string::npos;
         at = out.find("attached ", at + 1))
      ++attached;
  }
  EXPECT_EQ(attached, 3);
  EXPECT_EQ(stats().attachments_size(), 3);
  // The one that holds some gives them back by dying.
  Spawned& holder = first.output().find("attached 1\n") != std::string::npos ? first : second;
  holder.kill(SIGKILL);
  holder.wait();
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return s.attachments_size() < 3; }));
  const int freed = 3 - stats().attachments_size();
  Spawned third(dir_, adversary({"tx-hoard", "10"}), trudy_->ids());
  ASSERT_TRUE(third.wait_for_output("refused", 20s)) << third.output();
  EXPECT_THAT(third.output(), HasSubstr("attached " + std::to_string(freed) + "\n"));
  EXPECT_THAT(third.output(), Not(HasSubstr("attached " + std::to_string(freed + 1) + "\n")));
  EXPECT_TRUE(healthy());
}

// A TX queue whose clients list names one user: another may neither attach to it nor see it in
// ListQueues; the user it names sends through it, and the other queues' rules are untouched.
TEST_F(AdversaryTest, ATxQueuesClientsListKeepsEveryoneElseOut) {
  if (!is_root()) GTEST_SKIP() << "needs root for throwaway users";
  std::string users = two_users();
  const std::string tx0 = "        - name: tx0\n";
  start_with(tx0, tx0 + "          clients: {users: [" + trudy_->name() + "]}\n", users);
  if (HasFatalFailure()) return;
  auto listed = run({ctl_path(), "--socket", socket_, "queues"}, mallory_->ids());
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, Not(HasSubstr("tx0")));
  auto own = run({ctl_path(), "--socket", socket_, "queues"}, trudy_->ids());
  EXPECT_THAT(own.out, HasSubstr("tx0"));

  Spawned refused(dir_, adversary({"tx-hoard", "1"}), mallory_->ids());
  ASSERT_TRUE(refused.wait_for_output("refused", 20s)) << refused.output();
  EXPECT_THAT(
      refused.output(),
      HasSubstr("TX queue lo/tx0 admits only the clients its clients list names, and " +
                mallory_->name() + " (uid " + std::to_string(mallory_->uid()) + ") is not one"));
  EXPECT_EQ(stats().attachments_size(), 0);
  Spawned allowed(dir_, adversary({"tx-hoard", "1"}), trudy_->ids());
  ASSERT_TRUE(allowed.wait_for_output("attached 1", 20s)) << allowed.output();
  EXPECT_EQ(stats().attachments_size(), 1);
  EXPECT_TRUE(healthy());
}

// The RLIMIT_NOFILE that leaves a process exactly `spare` fd numbers free (holes below its
// highest fd count: the kernel hands out the lowest free number).
rlim_t limit_leaving(pid_t pid, int spare) {
  std::set<int> open;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    open.insert(std::stoi(e.path().filename().string()));
  }
  int fd = 0;
  for (int free = 0;; ++fd) {
    if (open.contains(fd)) continue;
    if (free++ == spare) return static_cast<rlim_t>(fd);
  }
}

// A claim when the daemon has almost no fds left (its RLIMIT_NOFILE set, from outside, to leave
// 0, 1, 2, ... free): each either works or is refused with the reason, all or nothing; the
// daemon stays up, serves a client normally once the limit is back, and (in the sanitizer
// builds) frees everything and touches nothing freed.
TEST_F(AdversaryTest, AClaimWithoutFdsToSpareIsAllOrNothing) {
  if (!is_root()) GTEST_SKIP() << "prlimit on the daemon needs root";
  start();
  rlimit before{};
  ASSERT_EQ(::prlimit(daemon_->pid(), RLIMIT_NOFILE, nullptr, &before), 0);
  int refused = 0, granted = 0;
  for (int spare = 0; spare <= 6; ++spare) {
    SCOPED_TRACE("fds to spare: " + std::to_string(spare));
    std::string go = dir_.file("go" + std::to_string(spare));
    Spawned c(dir_, adversary({"claim-late", "stream0", go}));
    ASSERT_TRUE(c.wait_for_output("granted")) << c.output();
    rlimit tight{limit_leaving(daemon_->pid(), spare), before.rlim_max};
    ASSERT_EQ(::prlimit(daemon_->pid(), RLIMIT_NOFILE, &tight, nullptr), 0);
    std::ofstream(go).put('\n');
    ASSERT_TRUE(c.wait_for_output("claim: ")) << c.output();
    ASSERT_EQ(::prlimit(daemon_->pid(), RLIMIT_NOFILE, &before, nullptr), 0);
    if (c.output().find("refused") != std::string::npos) {
      ++refused;
      EXPECT_THAT(c.output(), HasSubstr("Too many open files"));
    } else {
      ++granted;
    }
    c.kill(SIGKILL);
    c.wait();
    ASSERT_TRUE(eventually([](const v1::Stats& s) { return s.attachments_size() == 0; }));
  }
  std::printf("claims refused %d, granted %d\n", refused, granted);
  EXPECT_GT(refused, 0);  // the tightest limits refuse
  EXPECT_GT(granted, 0);  // enough fds to spare work
  Spawned fine(dir_, tap("stream0", 500));
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 1; }));
  ASSERT_EQ(gen(4096, 500, 100).exit_code, 0);
  EXPECT_EQ(fine.wait(), 0) << fine.output();
  EXPECT_TRUE(healthy());
}

// A client submits valid frames while a child process rewrites the source address and the
// protocol of its TX buffers in a loop: what goes out is what the daemon checked, so a capture
// on lo sees none of the rewritten frames, and every frame is either sent (and captured) or
// refused and counted.
TEST_F(AdversaryTest, TxFramesAreCheckedOnTheDaemonsOwnCopy) {
  if (!is_root()) GTEST_SKIP() << "needs root for the AF_PACKET capture";
  const char* env = std::getenv("DAQIRI_ADVERSARY_TX_FRAMES");
  const uint64_t default_frames = kSanitized ? 100000 : 1000000;
  const uint64_t frames = env ? std::stoull(env) : default_frames;
  start();
  FrameCapture capture("lo", "", {47010, 47011, 0x7f000001, std::nullopt});
  ASSERT_TRUE(capture.ok());
  UniqueFd sink(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));  // no ICMP for each frame
  sockaddr_in at = loopback(47011);
  ASSERT_EQ(::bind(sink.get(), reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  Spawned attacker(dir_, adversary({"tx-rewrite", "47010", "47011", std::to_string(frames)}));
  ASSERT_TRUE(attacker.wait_for_output("sent", 300s)) << attacker.output();
  std::this_thread::sleep_for(200ms);  // the capture reads the last ones
  capture.stop();
  long ok = number_after(attacker.output(), "ok");
  long refused = number_after(attacker.output(), "refused");
  EXPECT_EQ(static_cast<uint64_t>(ok + refused), frames) << attacker.output();
  EXPECT_EQ(capture.bad(), 0u);
  EXPECT_EQ(capture.frames() + capture.dropped(), static_cast<uint64_t>(ok));
  auto s = stats();
  const v1::AttachmentStats* a = tx_attachment(s);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->packets(), static_cast<uint64_t>(ok));
  EXPECT_EQ(a->refused(), static_cast<uint64_t>(refused));
  EXPECT_EQ(s.sessions_cut_off(), 0u);
  std::printf("tx-rewrite: %ld sent, %ld refused, %llu captured, %llu not captured (drops)\n", ok,
              refused, static_cast<unsigned long long>(capture.frames()),
              static_cast<unsigned long long>(capture.dropped()));
}

// Submits one frame of `kind` (daqiri-adversary tx-frame): what became of it ("refused" or
// "sent"), and the TX attachment's stats while the client is still attached.
std::pair<std::string, v1::AttachmentStats> one_frame(AdversaryTest& t, const std::string& kind) {
  Spawned c(t.dir(), t.adversary({"tx-frame", kind}));
  if (!c.wait_for_output("frame: ")) return {"no answer: " + c.output(), {}};
  auto s = t.stats();
  EXPECT_EQ(s.sessions_cut_off(), 0u);
  const v1::AttachmentStats* a = t.tx_attachment(s);
  std::string out = c.output();
  size_t at = out.find("frame: ") + 7;
  return {out.substr(at, out.find('\n', at) - at), a ? *a : v1::AttachmentStats{}};
}

// Each kind of frame the checked policy refuses comes back failed and counted, and costs the
// client nothing else; with tx_policy raw the queue sends a foreign source.
TEST_F(AdversaryTest, TheCheckedTxPolicyRefusesEachKindOfFrame) {
  start();
  for (const char* kind : {"options", "fragment", "source", "tcp", "port"}) {
    SCOPED_TRACE(kind);
    auto [what, a] = one_frame(*this, kind);
    EXPECT_EQ(what, "refused");
    EXPECT_EQ(a.refused(), 1u);
    EXPECT_EQ(a.packets(), 0u);
  }
}

TEST_F(AdversaryTest, ARawTxQueueSendsWhatTheClientWrote) {
  start_with("          regions: [tx_host]\n",
             "          regions: [tx_host]\n          tx_policy: raw\n");
  auto [what, a] = one_frame(*this, "source");
  EXPECT_EQ(what, "sent");
  EXPECT_EQ(a.refused(), 0u);
  EXPECT_EQ(a.packets(), 1u);
}

// The same attack on a DPDK TX queue under the checked policy, where the daemon checks and
// sends its own copy of each frame's headers with the port's source MAC: on net_af_packet (a
// veth pair; multi-segment TX, the payload chained zero-copy), a capture on the veth's far end
// sees none of the rewritten frames; on net_pcap (no multi-segment TX: each frame copied whole)
// neither does the file the PMD writes.
class AdversaryDpdkTxTest : public AdversaryTest,
                            public ::testing::WithParamInterface<const char*> {};

TEST_P(AdversaryDpdkTxTest, ACheckedTxQueueSendsOnlyWhatItChecked) {
  if (!is_root()) GTEST_SKIP() << "needs root for DPDK's EAL and the veth pair";
  if (run({daqirid_path(), "--version"}).out.find("dpdk: yes") == std::string::npos) {
    GTEST_SKIP() << "daqirid built without DPDK";
  }
  if (VethPair::ip_path().empty()) GTEST_SKIP() << "no ip command";
  const uint64_t frames = kSanitized ? 100000 : 1000000;
  bool veth_end = std::string(GetParam()) == "af_packet";
  std::optional<VethPair> veth;
  std::string pcap = dir_.file("sent.pcap");
  std::string address = "net_pcap0,tx_pcap=" + pcap;
  std::optional<std::array<uint8_t, 6>> mac;
  if (veth_end) {
    veth.emplace();
    address = "net_af_packet0,iface=" + veth->host();
    mac = veth->host_mac_bytes();
  }
  socket_ = dir_.file("d.sock");
  start_config("daemon:\n  socket: " + socket_ +
               "\n  metrics: \"off\"\n"
               "dpdk: {hugepages: false, memory_mb: 256}\n"
               "memory_regions:\n  - {name: tx, kind: host, buf_size: 2048, num_bufs: 2048}\n"
               "interfaces:\n"
               "  - name: port0\n    backend: dpdk\n    address: \"" +
               address +
               "\"\n    source_ipv4: 10.77.0.1\n"
               "    tx: {queues: [{name: tx0, regions: [tx]}]}\n");
  CaptureRule rule{47010, 47011, 0x0a4d0001, mac};
  std::optional<FrameCapture> capture;
  if (veth_end) {
    capture.emplace(veth->peer(), veth->netns(), rule);
    ASSERT_TRUE(capture->ok());
  }
  Spawned attacker(dir_, adversary({"tx-rewrite", "47010", "47011", std::to_string(frames), "port0",
                                    "10.77.0.1", "10.77.0.2"}));
  ASSERT_TRUE(attacker.wait_for_output("sent", 300s)) << attacker.output() << daemon_->log();
  long ok = number_after(attacker.output(), "ok");
  long refused = number_after(attacker.output(), "refused");
  EXPECT_EQ(static_cast<uint64_t>(ok + refused), frames) << attacker.output();
  EXPECT_GT(refused, 0);  // the rewriter won some races: those frames were refused
  auto s = stats();
  const v1::AttachmentStats* a = tx_attachment(s);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->refused(), static_cast<uint64_t>(refused));
  EXPECT_EQ(s.sessions_cut_off(), 0u);
  EXPECT_THAT(daemon_->log(), HasSubstr(veth_end ? "TX queue tx0 checked: headers copied"
                                                 : "TX queue tx0 checked: frames copied whole"));
  attacker.kill(SIGKILL);
  uint64_t seen = 0, bad = 0, dropped = 0;
  if (veth_end) {
    std::this_thread::sleep_for(200ms);  // the capture reads the last ones
    capture->stop();
    seen = capture->frames();
    bad = capture->bad();
    dropped = capture->dropped();
  }
  EXPECT_EQ(daemon_->stop(), 0) << daemon_->log();  // while its interface is there; pcap flushed
  daemon_.reset();
  if (!veth_end) {
    for (const auto& f : read_pcap(pcap)) {
      Seen what = judge(rule, reinterpret_cast<const unsigned char*>(f.data()), f.size());
      seen += what != Seen::kOther;
      bad += what == Seen::kBad;
    }
    EXPECT_EQ(seen, static_cast<uint64_t>(ok));  // the file misses nothing
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(seen, 0u);
  // The veth may drop what its peer's backlog cannot hold; nothing beyond what was sent arrives.
  EXPECT_LE(seen + dropped, static_cast<uint64_t>(ok));
  std::printf("%s tx-rewrite: %ld sent, %ld refused, %llu seen, %llu dropped by the capture\n",
              GetParam(), ok, refused, static_cast<unsigned long long>(seen),
              static_cast<unsigned long long>(dropped));
}

INSTANTIATE_TEST_SUITE_P(Pmd, AdversaryDpdkTxTest, ::testing::Values("af_packet", "pcap"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

// A HELLO name with no NUL, a newline, quotes, a backslash, a terminal escape and UTF-8 reaches
// the log and `daqiri-ctl sessions` as at most 63 printable ASCII bytes.
// A flow whose clients list names one user: another client of the daemon may neither attach
// to it nor see it in ListFlows (nor learn it from the refusal beyond its name); the user it
// names receives every packet as ever, and the other flows serve everyone.
TEST_F(AdversaryTest, AFlowsClientsListKeepsEveryoneElseOut) {
  if (!is_root()) GTEST_SKIP() << "needs root for throwaway users";
  std::string users = two_users();
  const std::string stream0 = "  - name: stream0\n";
  start_with(stream0, stream0 + "    clients: {users: [" + trudy_->name() + "]}\n", users);
  if (HasFatalFailure()) return;
  const TempUser& mallory = *mallory_;
  const TempUser& trudy = *trudy_;

  auto listed = run({ctl_path(), "--socket", socket_, "flows", "list"}, mallory.ids());
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, Not(HasSubstr("stream0")));
  EXPECT_THAT(listed.out, HasSubstr("stream1"));
  auto own = run({ctl_path(), "--socket", socket_, "flows", "list"}, trudy.ids());
  EXPECT_THAT(own.out, HasSubstr("user:" + trudy.name()));
  auto admin = run({ctl_path(), "--socket", socket_, "flows", "list"});
  EXPECT_THAT(admin.out, HasSubstr("stream0"));
  auto stats_seen = run({ctl_path(), "--socket", socket_, "stats"}, mallory.ids());
  ASSERT_EQ(stats_seen.exit_code, 0) << stats_seen.err;
  EXPECT_THAT(stats_seen.out, Not(HasSubstr("stream0")));
  EXPECT_THAT(stats_seen.out, HasSubstr("stream1"));

  // The daemon refuses the Attach itself (any client would be), naming the flow alone.
  auto refused = run(tap("stream0", 1), mallory.ids());
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(
      refused.out + refused.err,
      HasSubstr("flow \"stream0\" admits only the clients its clients list names, and " +
                mallory.name() + " (uid " + std::to_string(mallory.uid()) + ") is not one"));

  Spawned rx(dir_, tap("stream0", 500), trudy.ids());
  Spawned other(dir_, tap("stream1", 300), mallory.ids());
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 2; }));
  ASSERT_EQ(gen(4096, 500, 700).exit_code, 0);
  ASSERT_EQ(gen(4097, 300, 200).exit_code, 0);
  ASSERT_EQ(rx.wait(), 0) << rx.output();
  ASSERT_EQ(other.wait(), 0) << other.output();
  EXPECT_THAT(rx.output(), HasSubstr("received 500 packets, 350000 payload bytes"));
  EXPECT_THAT(other.output(), HasSubstr("received 300 packets, 60000 payload bytes"));
  EXPECT_TRUE(healthy());
}

TEST_F(AdversaryTest, ASessionsNameIsBoundedAndPrintable) {
  start();
  Spawned c(dir_, adversary({"hello-name"}));
  ASSERT_TRUE(c.wait_for_output("welcomed")) << c.output();
  const std::string shown = "evil?name ?quoted? back?slash ?[31mred?[0m ??t?? evil?name ?quo";
  ASSERT_EQ(shown.size(), 63u);
  auto sessions = run({ctl_path(), "--socket", socket_, "sessions"});
  EXPECT_EQ(sessions.exit_code, 0);
  EXPECT_THAT(sessions.out, HasSubstr(shown));
  EXPECT_THAT(sessions.out, Not(HasSubstr("\x1b")));
  ASSERT_TRUE(eventually(
      [&](const v1::Stats&) { return daemon_->log().find(shown) != std::string::npos; }));
  EXPECT_THAT(daemon_->log(), Not(HasSubstr("evil\n")));
  EXPECT_THAT(daemon_->log(), Not(HasSubstr("\x1b")));
}

// A session-socket connection that has said HELLO (fd, or -1). Async-signal-safe: a forked
// child of this threaded test calls it.
int open_session(const sockaddr_un& addr, const daqiri_msg_hello& hello) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::write(fd, &hello, sizeof hello) != ssize_t(sizeof hello)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// WELCOME's session id, or 0 when none came within `timeout`.
uint64_t welcome(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  daqiri_msg_welcome w{};
  if (::poll(&p, 1, timeout_ms) != 1 || ::read(fd, &w, sizeof w) != ssize_t(sizeof w)) return 0;
  return w.h.type == DAQIRI_MSG_WELCOME ? w.session_id : 0;
}

// One epoll batch holding a stale event: with the session server's thread stopped (ptrace),
// client A closes its session socket, client B connects, then A's process exits, so that the
// batch holds A's socket event, B's connection and A's pidfd event, in that order. Ending A
// frees A's fd numbers and B's accept takes them; A's pidfd event, handled last, must not end
// B's session.
TEST_F(AdversaryTest, AStaleEventOfAnEndedSessionNeverActsOnTheNextOne) {
  if (!is_root()) GTEST_SKIP() << "needs ptrace (root)";
  start();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = dir_.file("d.session.sock");
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  daqiri_msg_hello hello{};
  hello.h = abi::message_header(DAQIRI_MSG_HELLO, sizeof hello);
  std::strncpy(hello.name, "stale-event", sizeof hello.name - 1);
  int cmd[2];
  ASSERT_EQ(::pipe2(cmd, O_CLOEXEC), 0);
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  pid_t a = ::fork();
  ASSERT_GE(a, 0);
  if (a == 0) {  // client A: a session, closed on the first byte, the process gone on the next
    int fd = open_session(addr, hello);
    char c = welcome(fd, 10'000) != 0 ? 'w' : '-';
    [[maybe_unused]] auto w = ::write(ready[1], &c, 1);
    [[maybe_unused]] auto r = ::read(cmd[0], &c, 1);
    ::close(fd);
    r = ::read(cmd[0], &c, 1);
    ::_exit(0);
  }
  ::close(cmd[0]);
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(c, 'w') << "client A got no WELCOME" << daemon_->log();
  pid_t tid = ThreadStop::find(daemon_->pid(), "sessions");
  ASSERT_GT(tid, 0);
  int b = -1;
  {
    ThreadStop stuck(tid);
    ASSERT_TRUE(stuck.ok()) << std::strerror(errno);
    ASSERT_EQ(::write(cmd[1], "c", 1), 1);  // A's socket event first
    std::this_thread::sleep_for(100ms);
    b = open_session(addr, hello);  // then B's connection (its HELLO waits in the socket)
    ASSERT_GE(b, 0);
    std::this_thread::sleep_for(100ms);
    ASSERT_EQ(::write(cmd[1], "x", 1), 1);  // then A's pidfd event
    int status = 0;
    ASSERT_EQ(::waitpid(a, &status, 0), a);
    std::this_thread::sleep_for(100ms);
  }
  ::close(cmd[1]);
  uint64_t id = welcome(b, 10'000);
  ASSERT_NE(id, 0u) << daemon_->log();
  // B's session lives on: the daemon does not close its socket.
  pollfd p{b, POLLIN | POLLRDHUP, 0};
  EXPECT_EQ(::poll(&p, 1, 1000), 0) << "B's session ended:\n" << daemon_->log();
  EXPECT_THAT(daemon_->log(), Not(HasSubstr("session " + std::to_string(id) + " (")));
  auto sessions = run({ctl_path(), "--socket", socket_, "sessions"});
  EXPECT_THAT(sessions.out, HasSubstr("stale-event"));
  ::close(b);
}

}  // namespace
}  // namespace daqiri::test
