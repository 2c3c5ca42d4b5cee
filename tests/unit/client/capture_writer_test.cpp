// capture::FileWriter on its own: file naming under rotation, snaplen, PCAP append rules,
// rotation sizes, and an I/O error that names the file.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "daqiri/capture.hpp"

namespace daqiri::capture {
namespace {

using ::testing::HasSubstr;

class CaptureWriter : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/daqiri-capture-unit.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  static std::vector<uint8_t> read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static uint32_t u32(const std::vector<uint8_t>& b, size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, b.data() + at, 4);
    return v;
  }
  std::string dir_;
};

TEST(RotatedName, NumbersGoBeforeTheExtension) {
  EXPECT_EQ(rotated_name("/d/run.pcap", 3), "/d/run-0003.pcap");
  EXPECT_EQ(rotated_name("/d/run", 12), "/d/run-0012");
  EXPECT_EQ(rotated_name("/d.x/run", 0), "/d.x/run-0000");
  EXPECT_EQ(rotated_name("/d/.hidden", 1), "/d/.hidden-0001");
  EXPECT_EQ(rotated_name("/d/a.b.pcapng", 10000), "/d/a.b-10000.pcapng");
}

// A frame longer than snaplen is cut; its record keeps the original length.
TEST_F(CaptureWriter, SnaplenCutsFramesAndKeepsTheirLength) {
  WriterOptions o;
  o.snaplen = 64;
  std::string path = dir_ + "/cut.pcap";
  auto w = FileWriter::open(path, o);
  ASSERT_TRUE(w) << w.error().message;
  std::vector<std::byte> frame(200, std::byte{7});
  ASSERT_TRUE((*w)->write(5'000'000'123, frame));
  ASSERT_TRUE((*w)->close());
  auto b = read(path);
  ASSERT_EQ(b.size(), 24u + 16u + 64u);
  EXPECT_EQ(u32(b, 0), 0xa1b23c4du);  // nanosecond PCAP
  EXPECT_EQ(u32(b, 16), 64u);         // the header's snaplen
  EXPECT_EQ(u32(b, 24), 5u);          // seconds
  EXPECT_EQ(u32(b, 28), 123u);        // nanoseconds
  EXPECT_EQ(u32(b, 32), 64u);         // captured
  EXPECT_EQ(u32(b, 36), 200u);        // original
  EXPECT_EQ((*w)->stats().bytes, 64u);
}

// PCAP has one header per file: appending behind another header is refused, behind the same
// one the records follow.
TEST_F(CaptureWriter, PcapAppendsOnlyBehindTheSameHeader) {
  std::string path = dir_ + "/a.pcap";
  std::vector<std::byte> frame(100, std::byte{1});
  for (int run = 0; run < 2; ++run) {
    WriterOptions o;
    o.append = run > 0;
    auto w = FileWriter::open(path, o);
    ASSERT_TRUE(w) << w.error().message;
    ASSERT_TRUE((*w)->write(1, frame));
    ASSERT_TRUE((*w)->close());
  }
  EXPECT_EQ(read(path).size(), 24u + 2 * (16u + 100u));
  WriterOptions other;
  other.append = true;
  other.snaplen = 1000;
  auto w = FileWriter::open(path, other);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_THAT(w.error().message, HasSubstr("not a PCAP file with the same snaplen"));
  EXPECT_EQ(read(path).size(), 24u + 2 * (16u + 100u));  // untouched
}

// A device that is always full (through the open_file hook the daemon uses too): open() writes
// the header and fails there, naming the file. (A disk that fills later: the tmpfs tests in
// tests/integration/capture_test.cpp.)
TEST_F(CaptureWriter, AFullDeviceFailsAtOpenNamingTheFile) {
  WriterOptions o;
  o.snaplen = 1000;
  o.chunk_bytes = 4096;
  o.max_chunks = 2;
  o.open_file = [](const std::string&, int) -> Result<UniqueFd> {
    UniqueFd fd(::open("/dev/full", O_WRONLY | O_CLOEXEC));
    if (!fd) return fail_errno("open /dev/full");
    return fd;
  };
  auto w = FileWriter::open(dir_ + "/full.pcap", o);
  ASSERT_FALSE(w);  // the header itself does not fit
  EXPECT_THAT(w.error().message, HasSubstr("capture: write " + dir_ + "/full.pcap"));
  EXPECT_THAT(w.error().message, HasSubstr("No space left on device"));
}

// Rotation by size: every file starts with its own header and none passes the limit.
TEST_F(CaptureWriter, RotationKeepsEachFileUnderTheLimit) {
  WriterOptions o;
  o.rotate_bytes = 10'000;
  o.chunk_bytes = 4096;
  std::string path = dir_ + "/r.pcap";
  auto w = FileWriter::open(path, o);
  ASSERT_TRUE(w) << w.error().message;
  std::vector<std::byte> frame(984, std::byte{3});  // 1000-byte records
  for (int i = 0; i < 25; ++i)
    ASSERT_TRUE((*w)->write(uint64_t(i), frame));
  ASSERT_TRUE((*w)->close());
  auto files = (*w)->files();
  ASSERT_EQ(files.size(), 3u);  // 9 + 9 + 7 records of 1000 bytes behind 24-byte headers
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(files[i], rotated_name(path, i));
    auto b = read(files[i]);
    EXPECT_LE(b.size(), 10'000u);
    EXPECT_EQ(u32(b, 0), 0xa1b23c4du);
    EXPECT_EQ(b.size(), 24u + (i < 2 ? 9u : 7u) * 1000u);
  }
}

}  // namespace
}  // namespace daqiri::capture
