// Frames sent from GPU memory (TX queues with a device region): daqiri-gpu-send writes
// daqiri-gen's packets into GPU buffers (with header-data split, their first bytes into host
// header buffers), the daemon sends them on lo, and its own RX flow delivers them to a GPU ring
// whose client checks every byte. Clients that lie about their buffers are cut off; the
// others go on.
#include <gmock/gmock.h>

#include "gpu_daemon_test.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;

// kConfig with two TX queues on lo that send from GPU memory: `split` (64 header bytes on the
// host, the rest in the GPU) and `whole` (the frame in the GPU).
std::string gpu_tx_config() {
  std::string text = kConfig;
  text.replace(text.find("memory_regions:\n"), 16,
               "memory_regions:\n"
               "  - {name: tx_hdr, kind: host, buf_size: 64, num_bufs: 64}\n"
               "  - {name: tx_gpu, kind: device, gpu: 0, buf_size: 1536, num_bufs: 2048}\n");
  const std::string tx0 = "        - name: tx0\n          regions: [tx_host]\n";
  text.replace(text.find(tx0), tx0.size(),
               tx0 +
                   "        - name: split\n          regions: [tx_hdr, tx_gpu]\n"
                   "        - name: whole\n          regions: [tx_gpu]\n");
  return text;
}

class GpuTxTest : public GpuDaemonTest {
 protected:
  void SetUp() override {
    GpuDaemonTest::SetUp();
    if (!IsSkipped()) start(gpu_tx_config());
  }
  CommandResult send(const std::string& queue, uint64_t count, uint32_t size) {
    return run({built_program(DAQIRI_TEST_GPU_SEND), "--socket", socket_, "--interface", "lo",
                "--queue", queue, "--dest", "127.0.0.1:4096", "--size", std::to_string(size),
                "--count", std::to_string(count)});
  }
  // What the flow the frames came back to received.
  uint64_t received(const std::string& flow) {
    v1::Stats stats = control_->get();
    for (const auto& f : stats.flows()) {
      if (f.name() == flow) return f.packets();
    }
    return 0;
  }
};

TEST_F(GpuTxTest, HeaderDataSplitFramesLeaveByteExact) {
  auto rx = receive("stream0", 3000);
  auto tx = send("split", 3000, 1000);
  ASSERT_EQ(tx.exit_code, 0) << tx.out << tx.err << daemon_->log();
  EXPECT_THAT(tx.out, HasSubstr("sent 3000 frames from GPU memory (header 64 bytes on the "
                                "host), 0 failed"));
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), expected(4096, 3000, 1000)) << rx->output();
  EXPECT_EQ(received("stream0"), 3000u);
  EXPECT_THAT(daemon_->log(), HasSubstr("frames out of GPU memory in"));
}

TEST_F(GpuTxTest, WholeFramesInGpuMemoryLeaveByteExact) {
  auto rx = receive("stream0", 2000);
  auto tx = send("whole", 2000, 1400);
  ASSERT_EQ(tx.exit_code, 0) << tx.out << tx.err << daemon_->log();
  EXPECT_THAT(tx.out, HasSubstr("sent 2000 frames from GPU memory (header 0 bytes on the host)"));
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), expected(4096, 2000, 1400)) << rx->output();
}

// A frame longer than a header and a GPU buffer, or a buffer past the GPU buffers: the client
// is cut off (its session closed), the daemon counts it, and the next client sends as before.
TEST_F(GpuTxTest, AClientThatLiesAboutItsBuffersIsCutOffAndOthersSendOn) {
  for (const char* kind : {"gpu-tx-length", "gpu-tx-buffer"}) {
    auto r = run({test_client_path(), "hostile", socket_, "split", kind});
    EXPECT_EQ(r.exit_code, 0) << kind << ": " << r.out << r.err << daemon_->log();
    EXPECT_THAT(r.out, HasSubstr("cut off")) << kind;
  }
  EXPECT_THAT(daemon_->log(), HasSubstr("broke the ring protocol")) << daemon_->log();
  auto rx = receive("stream0", 500);
  auto tx = send("split", 500, 1000);
  ASSERT_EQ(tx.exit_code, 0) << tx.out << tx.err << daemon_->log();
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), expected(4096, 500, 1000)) << rx->output();
}

// Asked for GPU buffers on a queue that sends from host memory, or for host buffers on one
// that sends from GPU memory: refused, naming the region.
TEST_F(GpuTxTest, AQueueGivesOnlyTheBuffersItSendsFrom) {
  auto plain = run({test_client_path(), "tx-gpu-attach", socket_, "lo", "tx0"});
  EXPECT_EQ(plain.exit_code, 3) << plain.out;
  EXPECT_THAT(plain.out, HasSubstr("TX queue lo/tx0 sends from host memory (region \"tx_host\"): "
                                   "attach without gpu, or to a queue with a device region"));
}

// A gpudirect TX queue on DPDK's net_null: the daemon copies each frame's 64 header bytes
// and chains the client's GPU buffer behind them for the NIC to read in place. net_null frees
// frames unread as a NIC's DMA would leave the CPU out (the daemon's CPU touching GPU memory
// would fault), so the port's counters and every buffer coming back are what can be checked
// here; the bytes a NIC reads need hardware these machines lack.
class GpudirectTxTest : public GpuDaemonTest {
 protected:
  void SetUp() override {
    GpuDaemonTest::SetUp();
    if (IsSkipped()) return;
    start(dpdk_daemon() +
          "memory_regions:\n"
          "  - {name: tx_hdr, kind: host, buf_size: 64, num_bufs: 64}\n"
          "  - {name: tx_gpu, kind: device, gpu: 0, gpudirect: true, buf_size: 1472, num_bufs: "
          "2048}\n"
          "interfaces:\n"
          "  - name: null0\n"
          "    backend: dpdk\n"
          "    address: net_null0\n"
          "    source_ipv4: 127.0.0.1\n"
          "    tx: {queues: [{name: tx0, regions: [tx_hdr, tx_gpu]}]}\n");
  }
  CommandResult send(uint64_t count, uint32_t size) {
    return run({built_program(DAQIRI_TEST_GPU_SEND), "--socket", socket_, "--interface", "null0",
                "--queue", "tx0", "--dest", "127.0.0.1:4096", "--size", std::to_string(size),
                "--count", std::to_string(count)});
  }
};

TEST_F(GpudirectTxTest, PayloadsLeaveFromGpuMemoryInPlace) {
  EXPECT_THAT(daemon_->log(),
              HasSubstr("TX queue tx0: headers copied, payloads read by the NIC in GPU memory"));
  constexpr uint64_t kCount = 20000;
  auto tx = send(kCount, 1000);
  ASSERT_EQ(tx.exit_code, 0) << tx.out << tx.err << daemon_->log();
  EXPECT_THAT(tx.out, HasSubstr("sent 20000 frames from GPU memory (header 64 bytes on the "
                                "host), 0 failed"));
  v1::Stats s = control_->get();
  const v1::NicQueueStats* q = nic_queue(s, "tx0");
  ASSERT_NE(q, nullptr) << s.DebugString();
  EXPECT_EQ(q->packets(), kCount);
  EXPECT_EQ(q->bytes(), kCount * (42 + 1000));  // frames: headers and payload
  EXPECT_TRUE(
      control_->eventually([](const v1::Stats& st) { return st.attachments_size() == 0; }, 20s))
      << control_->get().DebugString();
  // No copy engine ran: the daemon's log names none.
  EXPECT_THAT(daemon_->log(), ::testing::Not(HasSubstr("frames out of GPU memory in")));

  // A client that lies about its buffers is cut off; the next one sends as before.
  for (const char* kind : {"gpu-tx-length", "gpu-tx-buffer"}) {
    auto r = run({test_client_path(), "hostile", socket_, "null0/tx0", kind});
    EXPECT_EQ(r.exit_code, 0) << kind << ": " << r.out << r.err << daemon_->log();
    EXPECT_THAT(r.out, HasSubstr("cut off")) << kind;
  }
  auto again = send(500, 1400);
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err << daemon_->log();
  s = control_->get();
  EXPECT_EQ(nic_queue(s, "tx0")->packets(), kCount + 500);
  EXPECT_EQ(nic_queue(s, "tx0")->bytes(), kCount * 1042 + 500 * 1442);
}

}  // namespace
}  // namespace daqiri::test
