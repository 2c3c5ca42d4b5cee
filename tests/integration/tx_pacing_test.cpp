// A paced TX queue (pacing_mbps) on the socket backend: what its clients send arrives whole and
// in order, never faster over the run than the cap allows, and a client that always has frames
// waiting does not keep another client of the queue from sending.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "dataplane_fixture.hpp"
#include "harness.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

class TxPacingTest : public DataPlaneTest {
 protected:
  // The test config with its TX queue capped at `mbps`.
  void start_paced(uint32_t mbps) {
    socket_ = dir_.file("d.sock");
    std::string text = test_config(socket_);
    const std::string tx_regions = "          regions: [tx_host]\n";
    auto at = text.find(tx_regions);
    ASSERT_NE(at, std::string::npos) << "the test config lost its TX queue";
    text.insert(at + tx_regions.size(), "          pacing_mbps: " + std::to_string(mbps) + "\n");
    start_config(text);
  }
  std::vector<std::string> send(uint16_t dst, uint64_t count, uint32_t payload) {
    return client(
        {"tx", "lo", "5555", std::to_string(dst), std::to_string(count), std::to_string(payload)});
  }
};

// 16 Mb/s is 2 MB/s: 2000 frames of 1000 bytes cannot all have started before the bucket
// (two 2048-byte buffers) and one frame's overshoot, then 1 s at the cap. Unpaced, loopback
// takes them in milliseconds.
TEST_F(TxPacingTest, APacedQueueNeverOutrunsItsCap) {
  start_paced(16);
  if (HasFatalFailure()) return;
  Spawned rx(dir_, tap("stream0", 2000));
  ASSERT_TRUE(each_attached({"stream0"}));
  auto start = Clock::now();
  auto tx = run(send(4096, 2000, 1000 - 42));
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_EQ(tx.exit_code, 0) << tx.out << tx.err << daemon_->log();
  EXPECT_THAT(tx.out, HasSubstr("sent 2000, 0 failed"));
  EXPECT_GE(seconds, (2000.0 * 1000 - 2 * 2048 - 2048) / 2e6);
  ASSERT_EQ(rx.wait(), 0) << rx.output();
  EXPECT_THAT(rx.output(), HasSubstr("received 2000 packets, 1916000 payload bytes"));
  EXPECT_THAT(rx.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
}

// One client keeps the paced queue's ring full for seconds; another's few frames still go out
// in the meantime, in turn with it, not after it.
TEST_F(TxPacingTest, AClientThatAlwaysHasFramesDoesNotStarveAnother) {
  start_paced(16);
  if (HasFatalFailure()) return;
  Spawned rx0(dir_, tap("stream0", 8000));
  Spawned rx1(dir_, tap("stream1", 100));
  ASSERT_TRUE(each_attached({"stream0", "stream1"}));
  Spawned flood(dir_, send(4096, 8000, 1000 - 42));  // 4 s at the cap
  ASSERT_TRUE(eventually([&](const v1::Stats& s) {
    return flow_stats(s, "stream0") && flow_stats(s, "stream0")->packets() > 0;
  }));
  auto few = run(send(4097, 100, 1000 - 42));
  ASSERT_EQ(few.exit_code, 0) << few.out << few.err;
  EXPECT_THAT(few.out, HasSubstr("sent 100, 0 failed"));
  // The flood is still going: the few did not wait for it to end.
  EXPECT_LT(flow_stats(stats(), "stream0")->packets(), 8000u);
  ASSERT_EQ(rx1.wait(), 0) << rx1.output();
  EXPECT_THAT(rx1.output(), HasSubstr("received 100 packets, 95800 payload bytes"));
  ASSERT_EQ(flood.wait(), 0) << flood.output();
  ASSERT_EQ(rx0.wait(), 0) << rx0.output();
  EXPECT_THAT(rx0.output(), HasSubstr("received 8000 packets, 7664000 payload bytes"));
}

}  // namespace
}  // namespace daqiri::test
