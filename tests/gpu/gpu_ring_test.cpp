// The GPU path with real processes on a real GPU: daqirid stages a flow's packets in pinned
// host memory and its copy engine fills a GPU ring; daqiri-gpu-receive (a separate client
// process) checks every payload with a CUDA kernel. Skipped, saying why, where there is no GPU
// (CI); tools/gpu-check runs it on a GPU host.
#include <arpa/inet.h>
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "daqiri/cuda/cufile_api.hpp"
#include "daqiri/test_pattern.hpp"
#include "gpu_daemon_test.hpp"
#include "harness.hpp"
#include "pcap_frames.hpp"
#include "stats_client.hpp"
#include "thread_stop.hpp"

namespace daqiri::test {
namespace {

using namespace std::chrono_literals;

std::string gpu_reorder_path() {
  return built_program(DAQIRI_TEST_GPU_REORDER);
}

// One record of a capture file, as a reader sees it.
struct Record {
  uint64_t timestamp_ns = 0;
  uint32_t original = 0;
  std::vector<std::byte> data;
};

std::vector<std::byte> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

// The records of a nanosecond PCAP or a PCAPNG file (EPBs; other blocks skipped). A malformed
// file adds a test failure and returns what was read up to there.
std::vector<Record> read_records(const std::string& path) {
  std::vector<std::byte> f = file_bytes(path);
  auto u32 = [&f](size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, f.data() + at, 4);
    return v;
  };
  std::vector<Record> out;
  if (f.size() < 24) {
    ADD_FAILURE() << path << ": " << f.size() << " bytes, no header";
    return out;
  }
  if (u32(0) == 0xa1b23c4d) {
    for (size_t at = 24; at < f.size();) {
      if (at + 16 > f.size() || at + 16 + u32(at + 8) > f.size()) {
        ADD_FAILURE() << path << ": a record cut short at byte " << at;
        break;
      }
      Record r{uint64_t{u32(at)} * 1'000'000'000 + u32(at + 4), u32(at + 12), {}};
      r.data.assign(f.begin() + long(at + 16), f.begin() + long(at + 16 + u32(at + 8)));
      at += 16 + r.data.size();
      out.push_back(std::move(r));
    }
  } else if (u32(0) == 0x0A0D0D0A) {
    for (size_t at = 0; at < f.size();) {
      uint32_t total = at + 8 <= f.size() ? u32(at + 4) : 0;
      if (total < 12 || total % 4 != 0 || at + total > f.size() || u32(at + total - 4) != total) {
        ADD_FAILURE() << path << ": a bad block at byte " << at;
        break;
      }
      if (u32(at) == 6) {
        uint32_t caplen = u32(at + 20);
        Record r{(uint64_t{u32(at + 12)} << 32) | u32(at + 16), u32(at + 24), {}};
        r.data.assign(f.begin() + long(at + 28), f.begin() + long(at + 28 + caplen));
        out.push_back(std::move(r));
      }
      at += total;
    }
  } else {
    ADD_FAILURE() << path << ": neither nanosecond PCAP nor PCAPNG";
  }
  return out;
}

// The records are daqiri-gen's packets 0..count-1 of `size` bytes to `port`, in order, whole
// (42 header bytes), with timestamps that never go back.
void expect_sent(const std::vector<Record>& records, uint16_t port, uint64_t count, uint32_t size) {
  ASSERT_EQ(records.size(), count);
  std::vector<std::byte> payload(size);
  for (uint64_t seq = 0; seq < count; ++seq) {
    const Record& r = records[seq];
    ASSERT_EQ(r.original, size + 42) << "packet " << seq;
    ASSERT_EQ(r.data.size(), size + 42) << "packet " << seq;
    pattern::fill(payload, port, seq);
    ASSERT_EQ(std::memcmp(r.data.data() + 42, payload.data(), size), 0) << "packet " << seq;
    if (seq > 0) {
      ASSERT_GE(r.timestamp_ns, records[seq - 1].timestamp_ns) << "packet " << seq;
    }
  }
}

// What `tap --gpu --out` should say it used: cuFile wherever libcufile opens and registers a
// file in `dir` (it cannot on tmpfs, nor where the host lacks udev's data on the disk:
// tools/gpu-check then requires that this test took the cuFile path).
std::string expected_data_path(bool allow_cufile, const std::string& dir) {
  auto api = cuda::CuFileApi::get();
  bool usable = false;
  if (allow_cufile && api) {
    cudaFree(nullptr);  // a context, as the writer has one
    std::string probe = dir + "/cufile-probe";
    int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cuda::CuFileApi::Descr d{};
    d.type = cuda::CuFileApi::kHandleTypeFd;
    d.handle.fd = fd;
    cuda::CuFileApi::Handle h = nullptr;
    usable = fd >= 0 && (*api)->handle_register(&h, &d).err == 0;
    if (usable) (*api)->handle_deregister(h);
    if (fd >= 0) ::close(fd);
    ::unlink(probe.c_str());
  }
  return usable ? "data path: cuFile" : "data path: host staging";
}

// What a receiver prints after the same packets came twice.
Seen twice(Seen s) {
  for (unsigned long long* v :
       {&s.received, &s.intact, &s.payload_bytes, &s.byte_sum, &s.sequence_sum}) {
    *v *= 2;
  }
  return s;
}

class GpuRingTest : public GpuDaemonTest {
 protected:
  void SetUp() override {
    GpuDaemonTest::SetUp();
    if (!IsSkipped()) start(kConfig);
  }
  // kConfig with the queue's region in plain host memory (for mapped host rings).
  static std::string host_queue_config() {
    std::string text = kConfig;
    text.replace(text.find("kind: device\n    gpu: 0\n"), 24, "kind: host\n");
    return text;
  }
  // 10000 packets through stream0's ring of 4096 slots with 6 blocks of 128 threads in `style`:
  // the ring wraps twice, so a release out of order or too early would cost the session (the
  // daemon checks every consumer index) or show as corrupt payloads, and none at all would
  // leave the rest dropped. Afterwards nothing is on loan.
  void expect_ring_wraps_exactly(const std::string& style) {
    auto rx = receive("stream0", 10000, {"--style", style, "--blocks", "6", "--threads", "128"});
    ASSERT_EQ(gen(4096, 10000, 1000).exit_code, 0);
    EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
    EXPECT_EQ(parse(rx->output()), expected(4096, 10000, 1000)) << rx->output();
    EXPECT_TRUE(control_->eventually(
        [](const v1::Stats& st) {
          return st.attachments_size() == 0 && st.flows_size() >= 1 &&
                 st.flows(0).buffers_on_loan() == 0 && st.flows(0).packets() == 10000;
        },
        10s))
        << control_->get().DebugString();
  }
  // `daqiri-ctl tap FLOW --gpu -n COUNT` with `args`, while daqiri-gen sends COUNT packets.
  CommandResult tap_gpu(const std::string& flow, uint16_t port, uint64_t count, uint32_t size,
                        std::vector<std::string> args) {
    std::vector<std::string> argv{ctl_path(), "--socket", socket_, "tap",
                                  flow,       "--gpu",    "-n",    std::to_string(count),
                                  "-t",       "60"};
    argv.insert(argv.end(), args.begin(), args.end());
    Spawned t(dir_, argv);
    EXPECT_TRUE(control_->eventually([](const v1::Stats& st) { return claimed(st) == 1; }, 20s));
    EXPECT_EQ(gen(port, count, size).exit_code, 0);
    CommandResult r;
    r.exit_code = t.wait(60s);
    r.out = t.output();
    return r;
  }
};

TEST_F(GpuRingTest, KernelSeesExactlyWhatDaqiriGenSent) {
  auto rx = receive("stream0", 3000);
  ASSERT_EQ(gen(4096, 3000, 1000).exit_code, 0);
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), expected(4096, 3000, 1000)) << rx->output();
}

// A GPU ring whose client waits for packets: the copy engine sleeps on its source's eventfd,
// and its poller with it, up to a second at a time (on a 1 ms timer it parked about 500 times
// in half a second); the packets that come next wake it, every one intact.
TEST_F(GpuRingTest, AnIdleRingLetsTheCopyEnginesPollerSleep) {
  auto rx = receive("stream0", 6000);
  ASSERT_EQ(gen(4096, 3000, 1000).exit_code, 0);
  // Once the last copies retired the engine sleeps: some half second within the next five
  // sees at most a few parks (a poller that kept waking would park every few microseconds).
  uint64_t fewest = UINT64_MAX;
  for (int window = 0; window < 10 && fewest > 3; ++window) {
    uint64_t before = control_->parks("poll:gpu:0");
    std::this_thread::sleep_for(500ms);
    fewest = std::min(fewest, control_->parks("poll:gpu:0") - before);
  }
  EXPECT_LE(fewest, 3u);
  ASSERT_EQ(gen(4096, 3000, 1000).exit_code, 0);  // sequences 0..2999 again
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), twice(expected(4096, 3000, 1000))) << rx->output();
}

// Reorder on the GPU (daqiri::GpuReorder, via daqiri-gpu-reorder): 32 frames of 64 packets
// sent two frames at a time in shuffled order, every sequence with seq % 37 == 5 left out,
// every one with seq % 101 == 0 sent twice, and sequence 0 once more at the end (its frame is
// long released: late). The client places them into frames by sequence number, converts their
// int16 samples to fp32, then (a second run) fp16, and checks every sample of every frame:
// placed ones exact, missing ones zero; the gaps, duplicates and late packets it reports are
// those sent.
TEST_F(GpuRingTest, ReorderPlacesShuffledPacketsIntoFramesAndReportsGaps) {
  constexpr uint32_t kPerFrame = 64, kSamples = 256, kFrames = 32;
  std::vector<uint64_t> order;
  uint64_t missing = 0, duplicates = 0;
  std::mt19937 rng(7);
  for (uint64_t block = 0; block < kFrames / 2; ++block) {
    std::vector<uint64_t> seqs;
    for (uint64_t s = block * 2 * kPerFrame; s < (block + 1) * 2 * kPerFrame; ++s) {
      if (s % 37 == 5) {
        ++missing;
        continue;
      }
      seqs.push_back(s);
      if (s % 101 == 0) {
        seqs.push_back(s);
        ++duplicates;
      }
    }
    std::shuffle(seqs.begin(), seqs.end(), rng);
    order.insert(order.end(), seqs.begin(), seqs.end());
  }
  order.push_back(0);
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(sock);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(4096);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<std::byte> payload(pattern::kHeaderSize + kSamples * 2);
  uint64_t placed = uint64_t{kFrames} * kPerFrame - missing;
  for (std::string convert : {"int16-fp32", "int16-fp16"}) {
    SCOPED_TRACE(convert);
    Spawned rx(dir_,
               {gpu_reorder_path(), "--socket", socket_, "--flow", "stream0", "--packets-per-frame",
                std::to_string(kPerFrame), "--samples", std::to_string(kSamples), "--convert",
                convert, "--idle", "2", "--timeout", "60"});
    ASSERT_TRUE(rx.wait_for_output("attached:", 20s)) << rx.output() << daemon_->log();
    for (uint64_t seq : order) {
      pattern::Header h{pattern::kMagic, 4096, seq, static_cast<uint32_t>(payload.size()), 0};
      std::memcpy(payload.data(), &h, sizeof h);
      for (uint32_t j = 0; j < kSamples; ++j) {
        auto v = static_cast<int16_t>(static_cast<int>((seq * 7 + j * 13) % 4096) - 2048);
        std::memcpy(payload.data() + pattern::kHeaderSize + 2 * j, &v, 2);
      }
      ASSERT_EQ(::sendto(sock.get(), payload.data(), payload.size(), 0,
                         reinterpret_cast<sockaddr*>(&to), sizeof to),
                static_cast<ssize_t>(payload.size()));
      std::this_thread::sleep_for(20us);
    }
    EXPECT_EQ(rx.wait(60s), 0) << rx.output() << daemon_->log();
    EXPECT_THAT(
        rx.output(),
        ::testing::HasSubstr("frames 32: " + std::to_string(placed) + " placed, " +
                             std::to_string(missing) + " missing, " + std::to_string(duplicates) +
                             " duplicates, 1 late, 0 ahead, 0 short, 0 wrong"));
  }
}

// Across the ring's end (5000 packets through 4096 slots): the copies and the descriptors that
// wrap go in two pieces, and every byte still lands where its descriptor says.
TEST_F(GpuRingTest, DeliversExactlyAcrossTheRingsEnd) {
  start(kConfig);
  auto rx = receive("stream0", 5000);
  ASSERT_EQ(gen(4096, 5000, 1000).exit_code, 0);
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), expected(4096, 5000, 1000)) << rx->output();
}

// A ring opened through a legacy cudaIpcMemHandle_t (cudaMalloc'd by the daemon, the handle in
// the gRPC Attach reply) carries the same bytes as a VMM one, and is detached when the client
// exits (its memory: the next test).
TEST_F(GpuRingTest, LegacyCudaIpcRingSeesExactlyWhatDaqiriGenSent) {
  auto rx = receive("stream0", 3000, {"--cuda-ipc", "yes"});
  ASSERT_EQ(gen(4096, 3000, 1000).exit_code, 0);
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), expected(4096, 3000, 1000)) << rx->output();
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (attachments("stream0") != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(attachments("stream0"), 0u);
}

// Legacy rings (cudaMalloc'd by the daemon) come back: after a first client the daemon's GPU
// memory stays where it is through three more clients, two of them killed mid-stream, so no
// ring is kept past its client. (The first legacy export costs the daemon once, below what it
// had before; the test prints how much.)
TEST_F(GpuRingTest, LegacyCudaIpcRingsGiveBackTheirGpuMemory) {
  cudaFree(nullptr);  // our own context first, so that it is part of every figure
  auto client = [&](bool killed) {
    auto rx = receive("stream0", killed ? 1'000'000 : 300, {"--cuda-ipc", "yes"});
    EXPECT_EQ(gen(4096, 300, 1000).exit_code, 0);
    if (killed) {
      rx->kill(SIGKILL);
      EXPECT_EQ(rx->wait(10s), 128 + SIGKILL);
    } else {
      EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
    }
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (attachments("stream0") != 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    EXPECT_EQ(attachments("stream0"), 0u);
    std::this_thread::sleep_for(500ms);  // the client's context teardown
    return free_gpu_memory();
  };
  size_t before = free_gpu_memory();
  size_t first = client(false);
  size_t lowest = first;
  for (bool killed : {true, false, true})
    lowest = std::min(lowest, client(killed));
  std::printf(
      "legacy IPC: free GPU memory %zu MiB before, %zu after one client, %zu at the "
      "lowest after three more\n",
      before >> 20, first >> 20, lowest >> 20);
  // A ring is 8 MiB and more (4096 slots of 2048 bytes): keeping any would show.
  EXPECT_GE(lowest + (2u << 20), first) << "GPU memory kept after legacy IPC clients left";
}

// Header-data split (a queue with a header region and a device region): the first 64 bytes of
// each frame land in host header slots, the rest in the GPU ring, same index; the client puts
// each frame back together and finds exactly what daqiri-gen sent (the split falls inside the
// pattern's header, so a slot off by one would show).
TEST_F(GpuRingTest, HeaderDataSplitHeadersAndPayloadsLineUp) {
  std::string text = kConfig;
  text.replace(text.find("memory_regions:\n"), 16,
               "memory_regions:\n  - {name: hdr, kind: host, buf_size: 64, num_bufs: 64}\n");
  text.replace(text.find("regions: [gpu_rx]"), 17, "regions: [hdr, gpu_rx]");
  start(text);
  auto rx = receive("stream0", 3000, {"--style", "hds"});
  ASSERT_EQ(gen(4096, 3000, 1000).exit_code, 0);
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), expected(4096, 3000, 1000)) << rx->output();
}

// Header-data split on a DPDK queue: the engine splits what the PMD wrote into the queue's
// staging buffers (no NIC buffer split). net_pcap replays daqiri-gen's frames from a file the
// test writes; the client puts each frame back together from its header slot and GPU slot and
// finds exactly what was written (the queue's buffers come back in release order, so whole
// bursts go as direct copies). And the same frames whole, without the split.
TEST_F(GpuRingTest, HeaderDataSplitOnADpdkQueue) {
  std::vector<Frame> frames;
  for (uint64_t i = 0; i < 3000; ++i)
    frames.push_back(make_frame(1000, 4096, i, 1000));
  std::string pcap = dir_.file("in.pcap");
  write_pcap(pcap, frames);
  // A catch-all alone on the queue takes the frames unread (DAQIRI_PAYLOAD_UNREAD): the engine
  // finds the payloads of split frames in their headers, the client those of whole ones on the
  // GPU.
  for (std::string match : {"{udp_dst: 4096}", "{any: true}"}) {
    for (bool split : {true, false}) {
      SCOPED_TRACE(match + (split ? " split" : " whole"));
      start(dpdk_daemon() +
            "memory_regions:\n"
            "  - {name: hdr, kind: host, buf_size: 64, num_bufs: 64}\n"
            "  - {name: gpu_rx, kind: device, gpu: 0, buf_size: 2048, num_bufs: 8192}\n"
            "interfaces:\n"
            "  - name: pcap0\n"
            "    backend: dpdk\n"
            "    address: \"net_pcap0,rx_pcap=" +
            pcap +
            "\"\n"
            "    rx: {queues: [{name: rx0, batch_size: 64, ring_size: 4096, regions: [" +
            (split ? "hdr, " : "") +
            "gpu_rx]}]}\n"
            "flows:\n"
            "  - {name: stream0, interface: pcap0, queue: rx0, match: " +
            match + "}\n");
      auto rx =
          receive("stream0", 3000,
                  split ? std::vector<std::string>{"--style", "hds"} : std::vector<std::string>{});
      EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
      EXPECT_EQ(parse(rx->output()), expected(4096, 3000, 1000)) << rx->output();
    }
  }
}

// GPUDirect on a DPDK queue: the queue's mbuf pool is GPU memory (a VMM allocation registered
// with rte_extmem_register, cut by rte_pktmbuf_pool_create_extbuf); the PMD fills its buffers
// and the engine gathers them device to device. net_null stands in for a NIC that DMAs into the
// GPU: it hands out buffers of the pool without writing them (they stay as the daemon zeroed
// them), so the client must see exactly `count` zero frames of net_null's size, whose payload
// offsets the GPU found (0: not UDP; a payload offset left unread would count 0 bytes). The
// daemon's CPU never touches them (it would fault). The bytes a NIC writes there need hardware
// these machines lack; the gather from a GPU pool is checked byte-exact in gpu_direct_pool_test.
TEST_F(GpuRingTest, GpudirectDpdkQueueDeliversFromAPoolInGpuMemory) {
  start(gpudirect_config());
  auto queues = run({ctl_path(), "--socket", socket_, "queues"});
  EXPECT_THAT(queues.out, ::testing::HasSubstr("zero-copy into GPU memory (gpudirect)"))
      << queues.out;
  // Host memory never holds these frames, and software cannot steer what it cannot read.
  auto tap = run({ctl_path(), "--socket", socket_, "tap", "stream0", "-n", "1", "-t", "5"});
  EXPECT_NE(tap.exit_code, 0);
  EXPECT_THAT(tap.out + tap.err, ::testing::HasSubstr("attach with a GPU ring")) << tap.out;
  auto add = run({ctl_path(), "--socket", socket_, "flows", "add", "by_port", "-i", "null0",
                  "--udp-dst", "4096"});
  EXPECT_NE(add.exit_code, 0);
  EXPECT_THAT(add.out + add.err, ::testing::HasSubstr("keeps its frames in GPU memory (gpudirect)"))
      << add.out;

  constexpr uint64_t kCount = 20000;
  auto rx = receive("stream0", kCount, {"--style", "persistent", "--threads", "256"});
  EXPECT_EQ(rx->wait(60s), 1) << rx->output() << daemon_->log();  // no daqiri-gen pattern
  Seen zeros;
  zeros.received = zeros.corrupt = kCount;
  zeros.payload_bytes = kCount * 1000;
  EXPECT_EQ(parse(rx->output()), zeros) << rx->output();
  // Every buffer back with the PMD once the ring is gone.
  EXPECT_TRUE(control_->eventually(
      [](const v1::Stats& st) {
        return st.attachments_size() == 0 && st.flows_size() == 1 &&
               st.flows(0).buffers_on_loan() == 0;
      },
      20s))
      << control_->get().DebugString();
}

// Header-data split into a gpudirect pool needs the NIC to split (the CPU cannot read a
// header in GPU memory): net_null cannot, so the daemon does not start and says why.
TEST_F(GpuRingTest, GpudirectHeaderDataSplitNeedsTheNicsBufferSplit) {
  std::string text = dpdk_daemon() +
                     "memory_regions:\n"
                     "  - {name: hdr, kind: host, buf_size: 64, num_bufs: 64}\n"
                     "  - {name: gpu_rx, kind: device, gpu: 0, gpudirect: true, buf_size: 2048, "
                     "num_bufs: 8192}\n"
                     "interfaces:\n"
                     "  - name: null0\n"
                     "    backend: dpdk\n"
                     "    address: net_null0\n"
                     "    rx: {queues: [{name: rx0, regions: [hdr, gpu_rx]}]}\n"
                     "flows:\n"
                     "  - {name: stream0, interface: null0, queue: rx0, match: {udp_dst: 4096}}\n";
  text.replace(text.find("SOCKET"), 6, dir_.file("split.sock"));
  text.replace(text.find("METRICS"), 7, "off");
  auto r = run({daqirid_path(), "--config", dir_.write("split.yaml", text)});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out + r.err,
              ::testing::HasSubstr("RX queue rx0: header-data split into a gpudirect region needs "
                                   "the NIC's buffer split"))
      << r.out << r.err;
}

// The other two consumer styles: nothing on the host between the doorbell and the kernel.
TEST_F(GpuRingTest, PersistentKernelSeesExactlyWhatDaqiriGenSent) {
  auto rx = receive("stream0", 3000, {"--style", "persistent", "--threads", "256"});
  ASSERT_EQ(gen(4096, 3000, 1000).exit_code, 0);
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), expected(4096, 3000, 1000)) << rx->output();
}

// A persistent consumer over several blocks (gpu_ring_consume): every block takes its share of
// each burst and block 0 releases what all of them are done with, in order.
TEST_F(GpuRingTest, PersistentKernelOverManyBlocksReleasesInOrder) {
  expect_ring_wraps_exactly("persistent");
}

// A host ring read where it is by a persistent grid (daqiri::MappedRxRing): the queue's buffers
// are plain host memory, the daemon does no GPU work, the kernel checks every payload across
// PCIe and releases from the GPU.
TEST_F(GpuRingTest, MappedHostRingIsReadWhereItIsAndReleasedFromTheGpu) {
  start(host_queue_config());
  expect_ring_wraps_exactly("mapped");
}

// A CUDA graph reads a mapped host ring through the ring's relay: each stage takes a batch of
// whatever arrived, and the relay releases it, so 10000 packets pass a ring of 4096 slots.
TEST_F(GpuRingTest, GraphStagesTakeAMappedRingsBatchesFromItsRelay) {
  start(host_queue_config());
  expect_ring_wraps_exactly("mapped-graph");
}

// Two clients each run a persistent kernel on their own flow; one is killed mid-stream while
// its kernel spins. Its ring's GPU memory and every buffer it held come back, and the other's
// kernel sees every packet of its flow: the deliveries do not wait on either client's kernel.
TEST_F(GpuRingTest, KilledPersistentClientCostsTheOtherPersistentClientNothing) {
  cudaFree(nullptr);  // our own context first, so that it is part of the baseline
  auto survivor =
      receive("stream1", 3000, {"--style", "persistent", "--blocks", "4", "--threads", "256"});
  size_t baseline = free_gpu_memory();
  auto victim =
      receive("stream0", 1'000'000, {"--style", "persistent", "--blocks", "4", "--threads", "256"});
  ASSERT_EQ(gen(4096, 500, 1000).exit_code, 0);
  ASSERT_EQ(gen(4097, 1500, 512).exit_code, 0);  // half the survivor's, with the victim alive
  EXPECT_TRUE(control_->eventually(
      [](const v1::Stats& st) {
        for (const auto& a : st.attachments()) {
          if (a.target() == "gpu stream0") return a.gpu_packets() == 500;
        }
        return false;
      },
      5s))
      << control_->get().DebugString();
  victim->kill(SIGKILL);
  EXPECT_EQ(victim->wait(10s), 128 + SIGKILL);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (attachments("stream0") != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(attachments("stream0"), 0u);
  while (free_gpu_memory() + (2u << 20) < baseline && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  EXPECT_GE(free_gpu_memory() + (2u << 20), baseline);
  EXPECT_TRUE(control_->eventually(
      [](const v1::Stats& st) {
        for (const auto& f : st.flows()) {
          if (f.name() == "stream0") return f.buffers_on_loan() == 0;
        }
        return false;
      },
      10s))
      << control_->get().DebugString();
  ASSERT_EQ(gen(4097, 1500, 512).exit_code, 0);  // sequences 0..1499 again
  EXPECT_EQ(survivor->wait(60s), 0) << survivor->output() << daemon_->log();
  EXPECT_EQ(parse(survivor->output()), twice(expected(4097, 1500, 512))) << survivor->output();
}

// The same with mapped host rings: the victim's kernel is killed while it spins on host memory;
// its attachment and every buffer come back, and the other's kernel sees all of its flow.
TEST_F(GpuRingTest, KilledMappedClientCostsTheOtherMappedClientNothing) {
  start(host_queue_config());
  const std::vector<std::string> mapped{"--style", "mapped", "--blocks", "4", "--threads", "256"};
  auto survivor = receive("stream1", 3000, mapped);
  auto victim = receive("stream0", 1'000'000, mapped);
  ASSERT_EQ(gen(4096, 500, 1000).exit_code, 0);
  ASSERT_EQ(gen(4097, 1500, 512).exit_code, 0);  // half the survivor's, with the victim alive
  auto flow = [](const v1::Stats& st, const std::string& name) {
    for (const auto& f : st.flows()) {
      if (f.name() == name) return f;
    }
    return v1::FlowStats{};
  };
  EXPECT_TRUE(control_->eventually(
      [&](const v1::Stats& st) { return flow(st, "stream0").packets() == 500; }, 5s))
      << control_->get().DebugString();
  victim->kill(SIGKILL);
  EXPECT_EQ(victim->wait(10s), 128 + SIGKILL);
  EXPECT_TRUE(control_->eventually(
      [&](const v1::Stats& st) {
        return flow(st, "stream0").attachments() == 0 && flow(st, "stream0").buffers_on_loan() == 0;
      },
      10s))
      << control_->get().DebugString();
  ASSERT_EQ(gen(4097, 1500, 512).exit_code, 0);  // sequences 0..1499 again
  EXPECT_EQ(survivor->wait(60s), 0) << survivor->output() << daemon_->log();
  EXPECT_EQ(parse(survivor->output()), twice(expected(4097, 1500, 512))) << survivor->output();
}

TEST_F(GpuRingTest, GraphOfWaitKernelWriteSeesExactlyWhatDaqiriGenSent) {
  auto rx = receive("stream0", 3072, {"--style", "graph", "--burst", "32", "--stages", "8"});
  ASSERT_EQ(gen(4096, 3072, 1000).exit_code, 0);
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), expected(4096, 3072, 1000)) << rx->output();
}

// One graph launch for the whole stream: a WHILE node runs the check kernel once per burst,
// waiting, checking and releasing on the GPU. 6144 packets through 4096 slots: only the loop's
// own releases let the daemon fill the ring past its end.
TEST_F(GpuRingTest, GraphLoopSeesExactlyWhatDaqiriGenSentWithOneLaunch) {
  auto rx = receive("stream0", 6144, {"--style", "graph-loop", "--burst", "32"});
  ASSERT_EQ(gen(4096, 6144, 1000).exit_code, 0);
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), expected(4096, 6144, 1000)) << rx->output();
}

// A loop waiting for a burst that never completes ends when the host asks it to: the whole
// bursts before it were checked, the partial one was not, and the process does not hang.
TEST_F(GpuRingTest, GraphLoopWaitingForAnIncompleteBurstStopsAtTheDeadline) {
  auto rx = spawn_receiver("stream0", 128, {"--style", "graph-loop", "--burst", "32"}, 3);
  ASSERT_TRUE(rx->wait_for_output("attached:", 20s)) << rx->output() << daemon_->log();
  ASSERT_EQ(gen(4096, 100, 1000).exit_code, 0);
  EXPECT_EQ(rx->wait(30s), 1) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), expected(4096, 96, 1000)) << rx->output();
}

TEST_F(GpuRingTest, TwoRingsOnTwoFlowsEachSeeOnlyTheirOwn) {
  auto a = receive("stream0", 1500);
  auto b = receive("stream1", 700);
  ASSERT_EQ(gen(4096, 1500, 1400).exit_code, 0);
  ASSERT_EQ(gen(4097, 700, 64).exit_code, 0);
  EXPECT_EQ(a->wait(60s), 0) << a->output();
  EXPECT_EQ(b->wait(60s), 0) << b->output();
  EXPECT_EQ(parse(a->output()), expected(4096, 1500, 1400)) << a->output();
  EXPECT_EQ(parse(b->output()), expected(4097, 700, 64)) << b->output();
}

TEST_F(GpuRingTest, KilledClientGivesBackItsGpuMemoryAndOthersLoseNothing) {
  cudaFree(nullptr);  // our own context first, so that it is part of the baseline
  auto survivor = receive("stream1", 2000);
  size_t baseline = free_gpu_memory();
  auto victim = receive("stream0", 1'000'000);
  ASSERT_EQ(gen(4096, 500, 1000).exit_code, 0);  // mid-stream: slots in use when it dies
  // The engine's counters reach the API: every frame copied, whole frames (42 header bytes).
  EXPECT_TRUE(control_->eventually(
      [](const v1::Stats& st) {
        for (const auto& a : st.attachments()) {
          if (a.target() == "gpu stream0") {
            return a.gpu() && a.gpu_packets() == 500 && a.gpu_bytes() == 500u * 1042;
          }
        }
        return false;
      },
      5s))
      << control_->get().DebugString();
  // The copy-latency histogram counted the bursts (at least one, at most one per packet); the
  // GPU ring's size is what the ring gauge says.
  auto body = http_get(metrics_port_, "/metrics").value_or("");
  auto value = [&body](const std::string& name) {
    return metric_value(body, name, "target=\"gpu stream0\"");
  };
  double bursts = value("daqiri_gpu_copy_latency_seconds_count");
  EXPECT_GE(bursts, 1) << body;
  EXPECT_LE(bursts, 500) << body;
  EXPECT_GT(value("daqiri_gpu_copy_latency_seconds_sum"), 0) << body;
  EXPECT_EQ(value("daqiri_attachment_ring_slots"), 4096) << body;
  std::istringstream lines(body);  // for the record: the histogram as scraped
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("daqiri_gpu_copy_latency_seconds")) std::printf("%s\n", line.c_str());
  }
  ASSERT_LT(free_gpu_memory(), baseline) << "the second ring took no GPU memory?";
  victim->kill(SIGKILL);
  EXPECT_EQ(victim->wait(10s), 128 + SIGKILL);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (attachments("stream0") != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(attachments("stream0"), 0u);
  // The ring and the client's context are freed: back to the baseline (2 MiB of slack for
  // allocator granularity).
  while (free_gpu_memory() + (2u << 20) < baseline && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GE(free_gpu_memory() + (2u << 20), baseline);
  ASSERT_EQ(gen(4097, 2000, 512).exit_code, 0);
  EXPECT_EQ(survivor->wait(60s), 0) << survivor->output();
  EXPECT_EQ(parse(survivor->output()), expected(4097, 2000, 512)) << survivor->output();
}

// The copy engine's poller stuck (ptrace) while packets wait for it and its client is killed:
// the ring's source buffers stay on loan, since a copy it launched may still read them, and
// the attachment is parked, GetStats answering meanwhile; once the poller moves, all is given
// back and the flow serves a new ring exactly.
TEST_F(GpuRingTest, AStuckCopyPollerKeepsAClosedRingsBuffersUntilItMoves) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs ptrace (root)";
  auto victim = receive("stream0", 1'000'000);
  pid_t tid = ThreadStop::find(daemon_->pid(), "poll:gpu:0");
  ASSERT_GT(tid, 0) << "no thread poll:gpu:0";
  auto on_loan = [](const v1::Stats& st) -> int64_t {
    for (const auto& f : st.flows()) {
      if (f.name() == "stream0") return int64_t(f.buffers_on_loan());
    }
    return -1;
  };
  {
    ThreadStop stuck(tid);
    ASSERT_TRUE(stuck.ok()) << std::strerror(errno);
    ASSERT_EQ(gen(4096, 500, 1000).exit_code, 0);
    ASSERT_TRUE(control_->eventually([&](const v1::Stats& st) { return on_loan(st) == 500; }, 5s))
        << control_->get().DebugString();
    victim->kill(SIGKILL);
    EXPECT_EQ(victim->wait(10s), 128 + SIGKILL);
    auto before = std::chrono::steady_clock::now();
    ASSERT_TRUE(
        control_->eventually([](const v1::Stats& st) { return st.attachments_parked() == 1; }, 10s))
        << daemon_->log();
    EXPECT_LT(std::chrono::steady_clock::now() - before, 5s);
    std::this_thread::sleep_for(300ms);  // time for a wrong hand-back to show
    EXPECT_EQ(on_loan(control_->get()), 500) << "buffers a copy may still read were taken back";
  }
  EXPECT_TRUE(control_->eventually(
      [&](const v1::Stats& st) { return st.attachments_parked() == 0 && on_loan(st) == 0; }, 10s))
      << control_->get().DebugString() << daemon_->log();
  auto rx = receive("stream0", 2000);
  ASSERT_EQ(gen(4096, 2000, 512).exit_code, 0);
  EXPECT_EQ(rx->wait(60s), 0) << rx->output();
  EXPECT_EQ(parse(rx->output()), expected(4096, 2000, 512)) << rx->output();
}

// A daemon restart under a GPU client: the client library reconnects, GpuRxRing::reattach()
// gets a new ring, and the kernel goes on counting: every packet of both daemons arrives once.
TEST_F(GpuRingTest, GpuRingReattachesAfterDaemonRestart) {
  auto rx = receive("stream0", 2000, {"--reconnect", "yes"});
  ASSERT_EQ(gen(4096, 1000, 1000).exit_code, 0);
  ASSERT_TRUE(control_->eventually(
      [](const v1::Stats& st) {
        for (const auto& a : st.attachments())
          if (a.target() == "gpu stream0") return a.gpu_packets() == 1000;
        return false;
      },
      10s))
      << control_->get().DebugString();
  start(kConfig);  // the same socket, a new daemon
  ASSERT_TRUE(rx->wait_for_output("reattached:", 30s)) << rx->output() << daemon_->log();
  ASSERT_EQ(gen(4096, 1000, 1000).exit_code, 0);
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  Seen want = expected(4096, 1000, 1000);
  want.received = want.intact = 2000;
  want.payload_bytes *= 2;
  want.byte_sum *= 2;
  want.sequence_sum *= 2;
  EXPECT_EQ(parse(rx->output()), want) << rx->output();
}

// `tap --gpu --out`: the packets go from the GPU ring to a PCAP file (by cuFile where libcufile
// is present) with every byte and timestamp in place.
TEST_F(GpuRingTest, TapGpuRecordsPcapFromGpuMemory) {
  std::string file = dir_.file("gpu.pcap");
  auto r = tap_gpu("stream0", 4096, 3000, 1000, {"--out", file});
  ASSERT_EQ(r.exit_code, 0) << r.out << daemon_->log();
  EXPECT_THAT(r.out, ::testing::HasSubstr(expected_data_path(true, dir_.path().string()))) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("wrote 3000 packets (3126000 bytes) to 1 file")) << r.out;
  std::printf("%s", r.out.c_str());  // for the record: which path ran
  expect_sent(read_records(file), 4096, 3000, 1000);
}

// Host staging (--no-cufile) writes the same records; PCAPNG rotated at 1 MiB keeps each file
// whole, and together they hold every packet once, in order, across the ring's end.
TEST_F(GpuRingTest, TapGpuWithoutCufileRotatesPcapngThroughHostMemory) {
  std::string file = dir_.file("gpu.pcapng");
  auto r = tap_gpu("stream0", 4096, 5000, 1000,
                   {"--out", file, "--format", "pcapng", "--rotate-mb", "1", "--no-cufile"});
  ASSERT_EQ(r.exit_code, 0) << r.out << daemon_->log();
  EXPECT_THAT(r.out, ::testing::HasSubstr(expected_data_path(false, dir_.path().string())))
      << r.out;
  std::vector<Record> all;
  size_t files = 0;
  for (;; ++files) {
    std::string part = dir_.file("gpu-000" + std::to_string(files) + ".pcapng");
    if (!std::ifstream(part).good()) break;
    // Full up to a record of 1076 bytes, never past the limit.
    size_t bytes = file_bytes(part).size();
    EXPECT_LE(bytes, 1u << 20) << part;
    auto records = read_records(part);
    if (std::ifstream(dir_.file("gpu-000" + std::to_string(files + 1) + ".pcapng")).good()) {
      EXPECT_GT(bytes + 1076, 1u << 20) << part;
    }
    all.insert(all.end(), records.begin(), records.end());
  }
  EXPECT_EQ(files, 6u) << r.out;  // 5000 records of 1076 bytes, 974 a file
  expect_sent(all, 4096, 5000, 1000);
}

// raw: the file is the UDP payloads back to back, nothing else.
TEST_F(GpuRingTest, TapGpuRawIsThePayloadsBackToBack) {
  std::string file = dir_.file("gpu.raw");
  auto r = tap_gpu("stream1", 4097, 2000, 700, {"--out", file, "--format", "raw"});
  ASSERT_EQ(r.exit_code, 0) << r.out << daemon_->log();
  std::vector<std::byte> want, payload(700);
  for (uint64_t seq = 0; seq < 2000; ++seq) {
    pattern::fill(payload, 4097, seq);
    want.insert(want.end(), payload.begin(), payload.end());
  }
  EXPECT_TRUE(file_bytes(file) == want) << "raw file differs from the payloads sent";
}

// A daemon-side capture of a flow on a device region reads the pinned staging pool, beside a
// GPU ring client of the same flow: both get every packet, the status says where bytes came
// from.
TEST_F(GpuRingTest, DaemonCapturesADeviceFlowBesideAGpuClient) {
  std::string text = kConfig;
  text.replace(text.find("  metrics:"), 0, "  capture_dirs: [" + dir_.path().string() + "]\n");
  start(text);
  auto rx = receive("stream0", 3000);
  std::string file = dir_.file("daemon.pcap");
  Spawned capture(dir_, {ctl_path(), "--socket", socket_, "capture", "stream0", "-o", file, "-n",
                         "3000", "-d", "60"});
  ASSERT_TRUE(capture.wait_for_output("started:", 20s)) << capture.output() << daemon_->log();
  ASSERT_EQ(gen(4096, 3000, 1000).exit_code, 0);
  EXPECT_EQ(rx->wait(60s), 0) << rx->output() << daemon_->log();
  EXPECT_EQ(parse(rx->output()), expected(4096, 3000, 1000)) << rx->output();
  EXPECT_EQ(capture.wait(60s), 0) << capture.output() << daemon_->log();
  EXPECT_THAT(capture.output(),
              ::testing::HasSubstr("(from host memory: the device region's pinned staging pool"))
      << capture.output();
  expect_sent(read_records(file), 4096, 3000, 1000);
}

}  // namespace
}  // namespace daqiri::test
