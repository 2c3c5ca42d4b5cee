// Capture to files by a client (daqiri-ctl tap --out, libdaqiri's capture::FileWriter), read
// back with tshark, a reader nobody here wrote: exact packet counts, monotonic timestamps, and
// bytes identical to what daqiri-gen sent; PCAPNG appended across runs; rotation; a full disk.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>

#include "daqiri/test_pattern.hpp"
#include "dataplane_fixture.hpp"
#include "harness.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;

std::string hex(std::span<const std::byte> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::byte b : bytes) {
    out += digits[static_cast<unsigned>(b) >> 4];
    out += digits[static_cast<unsigned>(b) & 15];
  }
  return out;
}

// What daqiri-gen puts in packet `seq` of a stream to `port`.
std::vector<std::byte> payload(uint16_t port, uint64_t seq, uint32_t size) {
  std::vector<std::byte> p(size);
  pattern::fill(p, port, seq);
  return p;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

class CaptureTest : public DataPlaneTest {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/tshark", X_OK) != 0) GTEST_SKIP() << "no tshark (apt install tshark)";
    allowed_ = dir_.file("captures");
    ASSERT_EQ(::mkdir(allowed_.c_str(), 0755), 0);
    std::string extra = "  capture_dirs: [" + allowed_ + "]\n";
    if (is_root()) {  // daemon captures are asked for by an unprivileged user too
      group_.emplace();
      user_.emplace(group_->name());
      extra += "  socket_group: " + group_->name() + "\n  access:\n    clients:\n      users: [" +
               user_->name() + "]\n";
      ::chmod(dir_.path().c_str(), 0755);  // the user's daqiri-ctl reaches the socket
      // As the packaged folder: the clients' group may create files, each keeps its own.
      EXPECT_EQ(::chown(allowed_.c_str(), 0, group_->gid()), 0);
      EXPECT_EQ(::chmod(allowed_.c_str(), 01770), 0);
    }
    start(extra);
  }
  std::optional<std::pair<uid_t, gid_t>> as_user() const {
    return user_ ? std::optional(user_->ids()) : std::nullopt;
  }
  std::vector<std::string> ctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {ctl_path(), "--socket", socket_});
    return args;
  }
  // tshark's fields per packet (UDP 4096/4097 decoded as plain data), one line each.
  std::vector<std::string> read_back(const std::string& file, const std::string& fields) {
    std::vector<std::string> argv{
        "/usr/bin/tshark",     "-r", file,    "-d", "udp.port==4096,data", "-d",
        "udp.port==4097,data", "-T", "fields"};
    std::istringstream in(fields);
    for (std::string f; in >> f;) {
      argv.push_back("-e");
      argv.push_back(f);
    }
    auto r = run(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return lines(r.out);
  }
  // daqiri-gen runs, in the order they were sent: sequences 0..count-1 of `size` bytes to port.
  struct Run {
    uint16_t port;
    uint64_t count;
    uint32_t size;
  };
  // The files, read back in order, hold exactly those packets: each one's port, frame length
  // (42 header bytes more) and payload, byte for byte.
  void expect_packets(const std::vector<std::string>& files, const std::vector<Run>& runs) {
    std::vector<std::string> rows;
    for (const auto& f : files) {
      auto more = read_back(f, "udp.dstport frame.len data.data");
      rows.insert(rows.end(), more.begin(), more.end());
    }
    size_t i = 0;
    for (const Run& r : runs) {
      for (uint64_t seq = 0; seq < r.count; ++seq, ++i) {
        ASSERT_LT(i, rows.size()) << "fewer packets than sent";
        ASSERT_EQ(rows[i], std::to_string(r.port) + "\t" + std::to_string(r.size + 42) + "\t" +
                               hex(payload(r.port, seq, r.size)))
            << "packet " << i;
      }
    }
    EXPECT_EQ(rows.size(), i) << "more packets than sent";
  }
  // Runs a tap recording `count` packets of daqiri-gen's to `port` into `out`.
  CommandResult record(const std::string& flow, uint16_t port, uint64_t count, uint32_t size,
                       std::vector<std::string> capture) {
    capture.insert(capture.begin(), "--block");
    Spawned t(dir_, tap(flow, count, capture));
    EXPECT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 1; }));
    EXPECT_EQ(gen(port, count, size).exit_code, 0);
    CommandResult r;
    r.exit_code = t.wait();
    r.out = t.output();
    return r;
  }

  std::string allowed_;
  std::optional<TempGroup> group_;
  std::optional<TempUser> user_;
};

// Every packet, in order, with its payload byte for byte, its length, and timestamps that
// never go back.
TEST_F(CaptureTest, PcapHoldsExactlyWhatDaqiriGenSent) {
  std::string file = dir_.file("a.pcap");
  auto r = record("stream0", 4096, 2000, 700, {"--out", file});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("wrote 2000 packets (1484000 bytes) to 1 file: " + file));
  expect_packets({file}, {{4096, 2000, 700}});
  auto times = read_back(file, "frame.time_epoch");
  ASSERT_EQ(times.size(), 2000u);
  for (size_t i = 1; i < times.size(); ++i)
    ASSERT_GE(std::stod(times[i]), std::stod(times[i - 1])) << "packet " << i;
  // Nanosecond timestamps: the file says so (the magic of nanosecond PCAP).
  std::ifstream in(file, std::ios::binary);
  uint32_t magic = 0;
  in.read(reinterpret_cast<char*>(&magic), 4);
  EXPECT_EQ(magic, 0xa1b23c4du);
}

// Two runs append two sections to one PCAPNG file; both are read back whole.
TEST_F(CaptureTest, PcapngAppendsAcrossRuns) {
  std::string file = dir_.file("runs.pcapng");
  auto first = record("stream0", 4096, 700, 300, {"--out", file, "--format", "pcapng"});
  ASSERT_EQ(first.exit_code, 0) << first.out;
  auto second =
      record("stream0", 4096, 500, 900, {"--out", file, "--format", "pcapng", "--append"});
  ASSERT_EQ(second.exit_code, 0) << second.out;
  expect_packets({file}, {{4096, 700, 300}, {4096, 500, 900}});
  auto info = run({"/usr/bin/capinfos", file});
  EXPECT_THAT(info.out, HasSubstr("Section 1:"));
  EXPECT_THAT(info.out, HasSubstr("Description = flow stream0"));
}

// --rotate-mb 1: 3000 frames of 1042 bytes (3.2 MB with record headers) go to four files, none
// past 1 MiB, each a complete PCAP, together every packet once.
TEST_F(CaptureTest, RotationSplitsAtRecordBoundaries) {
  std::string file = dir_.file("rot.pcap");
  auto r = record("stream0", 4096, 3000, 1000, {"--out", file, "--rotate-mb", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("to 4 files"));
  std::vector<std::string> files;
  for (int i = 0; i < 4; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "rot-%04d.pcap", i);
    files.push_back(dir_.file(name));
    struct stat st {};
    ASSERT_EQ(::stat(files.back().c_str(), &st), 0) << name;
    EXPECT_LE(st.st_size, 1 << 20) << name;
  }
  expect_packets(files, {{4096, 3000, 1000}});
}

// Raw: the payloads back to back, nothing else.
TEST_F(CaptureTest, RawIsThePayloadsBackToBack) {
  std::string file = dir_.file("a.raw");
  auto r = record("stream1", 4097, 1500, 333, {"--out", file, "--format", "raw"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream in(file, std::ios::binary);
  std::vector<char> all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(all.size(), 1500u * 333);
  for (uint64_t seq = 0; seq < 1500; ++seq) {
    auto want = payload(4097, seq, 333);
    ASSERT_EQ(std::memcmp(all.data() + seq * 333, want.data(), 333), 0) << "packet " << seq;
  }
}

// A disk that fills up: the recording tap stops with a clear error naming the file; another
// client of the same flow gets every packet, and the daemon carries on.
TEST_F(CaptureTest, FullDiskIsAClearErrorAndCostsOtherClientsNothing) {
  if (!is_root()) GTEST_SKIP() << "mounting a small tmpfs needs root";
  std::string small = dir_.file("small");
  ASSERT_EQ(::mkdir(small.c_str(), 0755), 0);
  ASSERT_EQ(::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=1m"), 0) << std::strerror(errno);
  std::string file = small + "/full.pcap";
  Spawned other(dir_, tap("stream0", 3000, {"--block"}));
  Spawned recorder(dir_, tap("stream0", 3000, {"--block", "--out", file}));
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 2; }));
  EXPECT_EQ(gen(4096, 3000, 1000).exit_code, 0);
  int recorder_exit = recorder.wait();
  EXPECT_EQ(other.wait(), 0) << other.output();
  ::umount2(small.c_str(), MNT_DETACH);
  EXPECT_EQ(recorder_exit, 1) << recorder.output();
  EXPECT_THAT(recorder.output(), HasSubstr("capture: write " + file + ": No space left on device"));
  EXPECT_THAT(other.output(), HasSubstr("received 3000 packets, 3000000 payload bytes"));
  EXPECT_THAT(other.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  EXPECT_TRUE(healthy());
}

// The daemon records a flow (gRPC StartCapture through daqiri-ctl capture, asked for by an
// unprivileged user) while a client of the same flow receives: both get every packet, the
// file is byte-exact, and it belongs to the user who asked.
TEST_F(CaptureTest, DaemonCaptureRecordsAFlowBesideItsClients) {
  std::string file = allowed_ + "/daemon.pcapng";
  Spawned client(dir_, tap("stream0", 2000, {"--block"}));
  Spawned capture(dir_,
                  ctl({"capture", "stream0", "--out", file, "--format", "pcapng", "-n", "2000"}),
                  as_user());
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 2; }));
  ASSERT_EQ(gen(4096, 2000, 600).exit_code, 0);
  ASSERT_EQ(client.wait(), 0) << client.output();
  ASSERT_EQ(capture.wait(), 0) << capture.output() << daemon_->log();
  EXPECT_THAT(client.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  EXPECT_THAT(capture.output(),
              HasSubstr("2000 packets (1284000 bytes) of flow stream0 to " + file));
  expect_packets({file}, {{4096, 2000, 600}});
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user_ ? user_->uid() : ::getuid());
  // Ended, listed, and its attachment gone from the flow.
  auto list = run(ctl({"captures"}));
  EXPECT_THAT(list.out, HasSubstr("ended"));
  EXPECT_TRUE(eventually([](const v1::Stats& s) { return s.attachments_size() == 0; }));
}

// A daemon capture whose disk fills: it ends by itself, says why (listed under ERROR), closes
// its attachment, and the flow's client gets every packet.
TEST_F(CaptureTest, DaemonCaptureOnAFullDiskEndsAndSaysWhy) {
  if (!is_root()) GTEST_SKIP() << "mounting a small tmpfs needs root";
  std::string small = allowed_ + "/small";
  ASSERT_EQ(::mkdir(small.c_str(), 0755), 0);
  ASSERT_EQ(::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=1m"), 0) << std::strerror(errno);
  std::string file = small + "/full.pcap";
  Spawned client(dir_, tap("stream0", 3000, {"--block"}));
  Spawned capture(dir_, ctl({"capture", "stream0", "--out", file, "-n", "3000"}));
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 2; }));
  ASSERT_EQ(gen(4096, 3000, 1000).exit_code, 0);
  int capture_exit = capture.wait();
  EXPECT_EQ(client.wait(), 0) << client.output();
  auto list = run(ctl({"captures"}));
  ::umount2(small.c_str(), MNT_DETACH);
  EXPECT_EQ(capture_exit, 1) << capture.output();
  EXPECT_THAT(capture.output(),
              HasSubstr("ended early: capture: write " + file + ": No space left on device"));
  EXPECT_THAT(list.out, HasSubstr("No space left on device"));
  EXPECT_THAT(client.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  EXPECT_TRUE(eventually([](const v1::Stats& s) { return s.attachments_size() == 0; }));
  EXPECT_TRUE(healthy());
}

// A whole RX queue in one file: both flows of lo/rx0, each packet once with its own port.
TEST_F(CaptureTest, DaemonCapturesAWholeQueue) {
  std::string file = allowed_ + "/queue.pcap";
  Spawned capture(dir_, ctl({"capture", "--queue", "lo/rx0", "--out", file, "-n", "1500"}));
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 1; }));
  ASSERT_EQ(gen(4096, 1000, 400).exit_code, 0);
  ASSERT_EQ(gen(4097, 500, 200).exit_code, 0);
  ASSERT_EQ(capture.wait(), 0) << capture.output();
  EXPECT_THAT(capture.output(),
              HasSubstr("1500 packets (" + std::to_string(1000 * 442 + 500 * 242) +
                        " bytes) of flow queue lo/rx0"));
  expect_packets({file}, {{4096, 1000, 400}, {4097, 500, 200}});
}

// Deleting the flow under a running capture ends it (its ring says DETACHED), with the reason;
// what it wrote stays a complete file.
TEST_F(CaptureTest, DeletingTheFlowEndsItsCapture) {
  std::string file = allowed_ + "/deleted.pcap";
  auto r = run(ctl({"capture", "stream1", "--out", file, "--detach"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 1; }));
  ASSERT_EQ(gen(4097, 200, 300).exit_code, 0);
  ASSERT_TRUE(eventually([](const v1::Stats& s) {
    return s.attachments_size() == 1 && s.attachments(0).packets() == 200;
  }));
  ASSERT_EQ(run(ctl({"flows", "del", "stream1"})).exit_code, 0);
  std::string list;
  for (int i = 0; i < 100 && list.find("ended") == std::string::npos; ++i) {
    std::this_thread::sleep_for(20ms);
    list = run(ctl({"captures"})).out;
  }
  EXPECT_THAT(list, HasSubstr("detached (flow deleted?)")) << list;
  EXPECT_EQ(read_back(file, "data.data").size(), 200u);
}

// stop-capture ends a detached capture with its totals; another user may not stop it.
TEST_F(CaptureTest, StopCaptureEndsItAndOnlyItsOwnerMay) {
  std::string file = allowed_ + "/stopped.pcap";
  auto r = run(ctl({"capture", "stream0", "--out", file, "--detach"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out,
              HasSubstr("capture 1 started: flow stream0 to " + file + " (from host memory)"));
  ASSERT_TRUE(eventually([](const v1::Stats& s) { return claimed(s) == 1; }));
  ASSERT_EQ(gen(4096, 300, 100).exit_code, 0);
  ASSERT_TRUE(eventually([](const v1::Stats& s) {
    return s.attachments_size() == 1 && s.attachments(0).packets() == 300;
  }));
  if (user_) {
    auto denied = run(ctl({"stop-capture", "1"}), as_user());
    EXPECT_EQ(denied.exit_code, 4) << denied.out << denied.err;
    EXPECT_THAT(denied.err, HasSubstr("belongs to another user"));
  }
  auto stopped = run(ctl({"stop-capture", "1"}));
  ASSERT_EQ(stopped.exit_code, 0) << stopped.out << stopped.err;
  EXPECT_THAT(stopped.out, HasSubstr("capture 1: 300 packets (42600 bytes) of flow stream0"));
  EXPECT_TRUE(eventually([](const v1::Stats& s) { return s.attachments_size() == 0; }));
  expect_packets({file}, {{4096, 300, 100}});
  EXPECT_EQ(run(ctl({"stop-capture", "7"})).exit_code, 5);  // no such capture: NOT_FOUND
}

// Where a capture may not go: outside capture_dirs, out of them through a symbolic link, or
// over a file someone else owns. Each is PERMISSION_DENIED (daqiri-ctl exit 4) with a reason,
// and nothing is written.
TEST_F(CaptureTest, CapturesStayInsideTheAllowedFolders) {
  auto refused = [&](const std::string& out, const std::string& why) {
    auto r = run(ctl({"capture", "stream0", "--out", out, "-n", "1"}), as_user());
    EXPECT_EQ(r.exit_code, 4) << out << ": " << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(why)) << out;
  };
  refused(dir_.file("outside.pcap"), "is not inside the folders daqirid writes captures to");
  refused(allowed_ + "/../escape.pcap", "is not inside the folders");
  std::string link = allowed_ + "/link";
  ASSERT_EQ(::symlink(dir_.path().c_str(), link.c_str()), 0);
  refused(link + "/through-link.pcap", "is reached through a symbolic link");
  struct stat st {};
  EXPECT_NE(::stat(dir_.file("outside.pcap").c_str(), &st), 0);
  EXPECT_NE(::stat(dir_.file("through-link.pcap").c_str(), &st), 0);
  EXPECT_NE(::stat(dir_.file("escape.pcap").c_str(), &st), 0);
  if (user_) {  // a file root (someone else) owns
    std::string theirs = dir_.write("captures/roots.pcap", "keep me");
    ::chmod(theirs.c_str(), 0666);  // one the user may write, but not theirs
    refused(theirs, "exists and is not yours");
    std::ifstream in(theirs);
    std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(kept, "keep me");
    // A folder inside the allowed one that the user may not write: the daemon (root) could,
    // but it creates files as the user who asks.
    std::string sealed = allowed_ + "/sealed";
    ASSERT_EQ(::mkdir(sealed.c_str(), 0755), 0);
    refused(sealed + "/mine.pcap", "may not create or write that file");
    EXPECT_NE(::stat((sealed + "/mine.pcap").c_str(), &st), 0);
  }
}

// Requests that must create nothing and hold nothing: over a FIFO someone put in the capture
// folder (opening it must not block the daemon), of a flow that does not exist, for a NaN
// duration. Each fails with its reason, and the daemon answers the next call at once.
TEST_F(CaptureTest, BadCaptureRequestsCreateNothingAndHoldNothing) {
  std::string fifo = allowed_ + "/pipe.pcap";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  auto r = run(ctl({"capture", "stream0", "--out", fifo, "-n", "1"}), std::nullopt, 10s);
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("is not a regular file"));
  std::string none = allowed_ + "/no-flow.pcap";
  r = run(ctl({"capture", "nosuch", "--out", none, "-n", "1"}));
  EXPECT_EQ(r.exit_code, 5) << r.out << r.err;  // NOT_FOUND
  EXPECT_THAT(r.err, HasSubstr("no flow named \"nosuch\""));
  std::string nan = allowed_ + "/nan.pcap";
  r = run(ctl({"capture", "stream0", "--out", nan, "--duration", "nan"}));
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("max_seconds must be a number from 0 to 1e9"));
  struct stat st {};
  EXPECT_NE(::stat(none.c_str(), &st), 0);
  EXPECT_NE(::stat(nan.c_str(), &st), 0);
  auto list = run(ctl({"captures"}), std::nullopt, 5s);
  EXPECT_EQ(list.exit_code, 0) << list.out << list.err;
  EXPECT_EQ(stats().attachments_size(), 0);
}

}  // namespace
}  // namespace daqiri::test
