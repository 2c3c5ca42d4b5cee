// What the GPU tests share: whether there is a GPU, the default GPU config, a daemon fixture
// with GPU receivers (daqiri-gpu-receive) and daqiri-gen, and what a receiver should report.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daqiri/test_pattern.hpp"
#include "harness.hpp"
#include "stats_client.hpp"

namespace daqiri::test {

using namespace std::chrono_literals;

inline std::string gpu_receive_path() {
  return built_program(DAQIRI_TEST_GPU_RECEIVE);
}

// Empty when a GPU is usable, else why not.
inline std::string no_gpu_reason() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return std::string("no GPU: ") + cudaGetErrorString(e);
  if (count == 0) return "no GPU";
  return {};
}

inline constexpr char kConfig[] = R"(daemon:
  socket: SOCKET
  metrics: "METRICS"
memory_regions:
  - name: gpu_rx
    kind: device
    gpu: 0
    buf_size: 2048
    num_bufs: 8192
  - name: tx_host
    kind: host
    buf_size: 2048
    num_bufs: 2048
interfaces:
  - name: lo
    backend: socket
    address: 127.0.0.1
    rx:
      queues:
        - name: rx0
          batch_size: 64
          ring_size: 4096
          regions: [gpu_rx]
    tx:
      queues:
        - name: tx0
          regions: [tx_host]
flows:
  - name: stream0
    interface: lo
    queue: rx0
    match: {udp_dst: 4096}
  - name: stream1
    interface: lo
    queue: rx0
    match: {udp_dst: 4097}
)";

// What daqiri-gpu-receive prints after a run, and what it should print for daqiri-gen's
// packets 0..count-1 of `size` bytes to `port`.
struct Seen {
  unsigned long long received = 0, intact = 0, corrupt = 0, payload_bytes = 0, byte_sum = 0,
                     sequence_sum = 0;
  bool operator==(const Seen&) const = default;
};

inline Seen parse(const std::string& out) {
  Seen s;
  auto at = out.find("received ");
  if (at == std::string::npos) return s;
  std::sscanf(out.c_str() + at,
              "received %llu packets: %llu intact, %llu corrupt, payload bytes %llu, byte sum "
              "%llu, sequence sum %llu",
              &s.received, &s.intact, &s.corrupt, &s.payload_bytes, &s.byte_sum, &s.sequence_sum);
  return s;
}

inline Seen expected(uint16_t port, uint64_t count, uint32_t size) {
  Seen s;
  std::vector<std::byte> payload(size);
  for (uint64_t seq = 0; seq < count; ++seq) {
    pattern::fill(payload, port, seq);
    for (std::byte b : payload)
      s.byte_sum += static_cast<unsigned char>(b);
    s.sequence_sum += seq;
  }
  s.received = s.intact = count;
  s.payload_bytes = count * size;
  return s;
}

// The daemon and dpdk sections of a config with DPDK (no hugepages). The GPU host's DPDK drivers
// come from DAQIRI_PMD_DIR (tools/gpu-check sets it), else from DPDK's own directory.
inline std::string dpdk_daemon() {
  std::string eal;
  if (const char* pmds = std::getenv("DAQIRI_PMD_DIR")) {
    for (const auto& e : std::filesystem::directory_iterator(pmds))
      eal += (eal.empty() ? "" : ", ") + std::string("-d, ") + e.path().string();
  }
  return "daemon: {socket: SOCKET, metrics: \"METRICS\"}\n"
         "dpdk: {hugepages: false, memory_mb: 256, eal_args: [" +
         eal + "]}\n";
}

// A DPDK net_null port whose queue fills a gpudirect pool (GPU memory the NIC writes into; the
// daemon allocates it as it starts), every frame to stream0.
inline std::string gpudirect_config() {
  return dpdk_daemon() +
         "memory_regions:\n"
         "  - {name: gpu_rx, kind: device, gpu: 0, gpudirect: true, buf_size: 2048, num_bufs: "
         "8192}\n"
         "interfaces:\n"
         "  - name: null0\n"
         "    backend: dpdk\n"
         "    address: \"net_null0,size=1000\"\n"
         "    rx: {queues: [{name: rx0, batch_size: 64, ring_size: 4096, regions: [gpu_rx]}]}\n"
         "flows:\n"
         "  - {name: stream0, interface: null0, queue: rx0, match: {any: true}}\n";
}

// A daemon the test (re)starts on a config of its choice, GPU receivers and daqiri-gen.
class GpuDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = no_gpu_reason(); !why.empty()) GTEST_SKIP() << why;
    socket_ = dir_.file("d.sock");
  }
  // Writes a config (kConfig's text: SOCKET and METRICS standing for the socket and a metrics
  // address) and returns its path.
  std::string write_config(std::string text) {
    text.replace(text.find("SOCKET"), 6, socket_);
    metrics_port_ = free_tcp_port();
    text.replace(text.find("METRICS"), 7, "127.0.0.1:" + std::to_string(metrics_port_));
    return dir_.write("d.yaml", text);
  }
  // (Re)starts the daemon on a config, with `env` added to its environment.
  void start(const std::string& text, const std::vector<std::string>& env = {}) {
    if (daemon_) {
      control_.reset();
      ASSERT_EQ(daemon_->stop(), 0) << daemon_->log();
    }
    daemon_ = std::make_unique<DaemonProcess>(
        dir_, std::vector<std::string>{"--config", write_config(text)}, env);
    ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
    control_.emplace(socket_);
  }
  void TearDown() override {
    if (daemon_) {
      EXPECT_EQ(daemon_->stop(), 0) << daemon_->log();
    }
  }
  // daqiri-gpu-receive on `flow` for `count` packets within `timeout_s`, in `style`.
  std::unique_ptr<Spawned> spawn_receiver(const std::string& flow, uint64_t count,
                                          const std::vector<std::string>& style = {},
                                          int timeout_s = 60) {
    std::vector<std::string> argv{gpu_receive_path(),
                                  "--socket",
                                  socket_,
                                  "--flow",
                                  flow,
                                  "--count",
                                  std::to_string(count),
                                  "--timeout",
                                  std::to_string(timeout_s)};
    argv.insert(argv.end(), style.begin(), style.end());
    return std::make_unique<Spawned>(dir_, argv);
  }
  // The same, once it attached.
  std::unique_ptr<Spawned> receive(const std::string& flow, uint64_t count,
                                   const std::vector<std::string>& style = {}) {
    auto p = spawn_receiver(flow, count, style);
    EXPECT_TRUE(p->wait_for_output("attached:", 20s)) << p->output() << daemon_->log();
    return p;
  }
  CommandResult gen(uint16_t port, uint64_t count, uint32_t size) {
    return run({gen_path(), "--dest", "127.0.0.1:" + std::to_string(port), "--size",
                std::to_string(size), "--count", std::to_string(count), "--rate", "50000"});
  }
  uint32_t attachments(const std::string& flow) {
    v1::Stats stats = control_->get();
    for (const auto& f : stats.flows()) {
      if (f.name() == flow) return f.attachments();
    }
    return 0;
  }
  static size_t free_gpu_memory() {
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    return free;
  }

  TempDir dir_;
  std::string socket_;
  uint16_t metrics_port_ = 0;
  std::unique_ptr<DaemonProcess> daemon_;
  std::optional<StatsClient> control_;
};

}  // namespace daqiri::test
