// A DAQIRI application's YAML run as it is, from DAQIRI's examples folder with cores changed to
// ones every host has: its UDP socket example (client and server on loopback), each interface
// receiving what DAQIRI's socket engine would hand it, and nothing else; its software-loopback
// example (regions in host memory), what a client sends coming back to a client.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "dataplane_fixture.hpp"
#include "harness.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;

const char* kUdpSocketExample = R"(%YAML 1.2
---
daqiri:
  cfg:
    version: 1
    stream_type: "socket"
    master_core: 0
    debug: false
    log_level: "info"

    memory_regions:
    - name: "DATA_SOCKET_SERVER"
      kind: "host"
      affinity: 0
      num_bufs: 4096
      buf_size: 2048
    - name: "DATA_SOCKET_CLIENT"
      kind: "host"
      affinity: 0
      num_bufs: 4096
      buf_size: 2048

    interfaces:
    - name: udp_server
      address: 127.0.0.1
      socket_config:
        mode: server
        local_addr: "udp://127.0.0.1:5001"
        max_payload_size: 2048
      rx:
        queues:
        - name: "Server_RX_Queue"
          id: 0
          cpu_core: 0
          batch_size: 1
          memory_regions:
            - "DATA_SOCKET_SERVER"
      tx:
        queues:
        - name: "Server_TX_Queue"
          id: 0
          cpu_core: 0
          batch_size: 1
          memory_regions:
            - "DATA_SOCKET_SERVER"

    - name: udp_client
      address: 127.0.0.1
      socket_config:
        mode: client
        local_addr: "udp://127.0.0.1:5002"
        remote_addr: "udp://127.0.0.1:5001"
        max_payload_size: 2048
      rx:
        queues:
        - name: "Client_RX_Queue"
          id: 0
          cpu_core: 0
          batch_size: 1
          memory_regions:
            - "DATA_SOCKET_CLIENT"
      tx:
        queues:
        - name: "Client_TX_Queue"
          id: 0
          cpu_core: 0
          batch_size: 1
          memory_regions:
            - "DATA_SOCKET_CLIENT"

socket_bench_server:
  server: true
  server_port: 5001
)";

// DAQIRI's daqiri_bench_raw_sw_loopback.yaml, regions on the host instead of the GPU; TX_KEYS
// go into its TX queue, FLOWS under its RX queues.
std::string sw_loopback_example(const std::string& flows = "", const std::string& tx_keys = "") {
  return R"(%YAML 1.2
---
daqiri:
  cfg:
    version: 1
    stream_type: "raw"
    master_core: 0
    debug: false
    log_level: "info"
    loopback: "sw"

    memory_regions:
    - name: "Data_TX_GPU"
      kind: "host"
      affinity: 0
      num_bufs: 51200
      buf_size: 1064
    - name: "Data_RX_GPU"
      kind: "host"
      affinity: 0
      num_bufs: 51200
      buf_size: 1064

    interfaces:
    - name: "loopback_ports"
      address: "loopback"
      tx:
        queues:
        - name: "tx_q_0"
          id: 0
          batch_size: 10240
          cpu_core: 1
          timeout_us: 1000
          memory_regions:
            - "Data_TX_GPU"
          offloads:
            - "tx_eth_src"
)" + tx_keys +
         R"(      rx:
        queues:
        - name: "rq_q_0"
          id: 0
          cpu_core: 1
          timeout_us: 1000
          batch_size: 10240
          memory_regions:
            - "Data_RX_GPU"
)" + flows;
}

class DaqiriFileTest : public DataPlaneTest {
 protected:
  void start_daqiri_file(const std::string& text) {
    socket_ = dir_.file("d.sock");
    config_ = dir_.write("daqiri.yaml", text);
    daemon_ = std::make_unique<DaemonProcess>(
        dir_,
        std::vector<std::string>{"--config", config_, "--socket", socket_, "--metrics", "off"});
    ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
    control_.emplace(socket_);
  }
  // Sends COUNT frames of SIZE payload bytes from UDP port 5555 to DST on the loopback
  // interface; every one went out.
  void send_looped(uint16_t dst, uint64_t count, uint32_t size) {
    auto tx = run(client({"tx", "loopback_ports", "5555", std::to_string(dst),
                          std::to_string(count), std::to_string(size)}));
    ASSERT_EQ(tx.exit_code, 0) << tx.out << tx.err << daemon_->log();
    EXPECT_THAT(tx.out, HasSubstr("sent " + std::to_string(count) + ", 0 failed"));
  }
};

// The server hears anyone on its port; the client hears only its server (port 5001, which
// the server interface's TX queue sends from), as a connected UDP socket would.
TEST_F(DaqiriFileTest, UdpSocketExampleReceivesOnEachInterfaceWhatDaqiriWould) {
  start_daqiri_file(kUdpSocketExample);
  if (HasFatalFailure()) return;
  Spawned server(dir_, tap("udp_server", 300));
  Spawned client_rx(dir_, tap("udp_client", 200));
  ASSERT_TRUE(each_attached({"udp_server", "udp_client"})) << stats().DebugString();
  // Strangers to the client's port: not its server, so filtered, never delivered.
  ASSERT_EQ(gen(5002, 50, 256).exit_code, 0);
  ASSERT_EQ(gen(5001, 300, 700).exit_code, 0);
  // The server interface answers from 127.0.0.1:5001 to the client's port.
  auto tx = run(client({"tx", "udp_server", "5001", "5002", "200", "512"}));
  ASSERT_EQ(tx.exit_code, 0) << tx.out << tx.err;
  EXPECT_THAT(tx.out + tx.err, HasSubstr("sent 200, 0 failed"));
  ASSERT_EQ(server.wait(), 0) << server.output();
  ASSERT_EQ(client_rx.wait(), 0) << client_rx.output();
  EXPECT_THAT(server.output(), HasSubstr("received 300 packets, 210000 payload bytes"));
  EXPECT_THAT(server.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  EXPECT_THAT(client_rx.output(), HasSubstr("received 200 packets, 102400 payload bytes"));
  EXPECT_THAT(client_rx.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  auto s = stats();
  EXPECT_EQ(flow_stats(s, "udp_client")->packets(), 250u);
  EXPECT_EQ(flow_stats(s, "udp_client")->dropped_filtered(), 50u);
  EXPECT_EQ(flow_stats(s, "udp_server")->packets(), 300u);
}

// As in DAQIRI, a file that names no flow gets every frame it sends back on its RX queue: here
// through a catch-all flow named after the interface, to a client of its own.
TEST_F(DaqiriFileTest, SoftwareLoopbackHandsItsRxQueueEveryFrameSent) {
  start_daqiri_file(sw_loopback_example());
  if (HasFatalFailure()) return;
  Spawned rx(dir_, tap("loopback_ports", 3000));
  ASSERT_TRUE(each_attached({"loopback_ports"})) << stats().DebugString();
  send_looped(6000, 3000, 777);
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log();
  EXPECT_THAT(rx.output(), HasSubstr("received 3000 packets, 2331000 payload bytes"));
  EXPECT_THAT(rx.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  auto s = stats();
  EXPECT_EQ(flow_stats(s, "loopback_ports")->packets(), 3000u);
  EXPECT_EQ(flow_stats(s, "loopback_ports")->bytes(), 3000u * (777 + 42));
  ASSERT_TRUE(nic_queue(s, "tx_q_0"));
  EXPECT_EQ(nic_queue(s, "tx_q_0")->packets(), 3000u);
  EXPECT_EQ(nic_queue(s, "rq_q_0")->packets(), 3000u);
}

// DAQIRI's pacing_mbps on a DPDK TX queue: 16 Mb/s is 2 MB/s, so 1000 frames of 1000 bytes
// cannot all have started before the bucket (two 1518-byte frames) and one frame's overshoot,
// then 0.5 s at the cap; every one comes back whole and in order.
TEST_F(DaqiriFileTest, SoftwareLoopbackTxQueueKeepsToItsPacingCap) {
  start_daqiri_file(sw_loopback_example("", "          pacing_mbps: 16\n"));
  if (HasFatalFailure()) return;
  Spawned rx(dir_, tap("loopback_ports", 1000));
  ASSERT_TRUE(each_attached({"loopback_ports"})) << stats().DebugString();
  auto start = std::chrono::steady_clock::now();
  send_looped(6000, 1000, 1000 - 42);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, (1000.0 * 1000 - 2 * 1518 - 1518) / 2e6);
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log();
  EXPECT_THAT(rx.output(), HasSubstr("received 1000 packets, 958000 payload bytes"));
  EXPECT_THAT(rx.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
}

// The file's own flows steer what comes back, as they would what a NIC received: each flow's
// client gets exactly its port's frames, and frames no flow takes are counted, not delivered.
TEST_F(DaqiriFileTest, SoftwareLoopbackSteersWhatComesBackByTheFilesFlows) {
  start_daqiri_file(sw_loopback_example(R"(        flows:
        - name: "six"
          id: 1
          action: {type: queue, id: 0}
          match: {udp_src: 5555, udp_dst: 6000}
        - name: "six_one"
          id: 2
          action: {type: queue, id: 0}
          match: {udp_dst: 6001}
)"));
  if (HasFatalFailure()) return;
  Spawned six(dir_, tap("six", 300));
  Spawned six_one(dir_, tap("six_one", 200));
  ASSERT_TRUE(each_attached({"six", "six_one"})) << stats().DebugString();
  send_looped(7000, 50, 100);
  send_looped(6000, 300, 500);
  send_looped(6001, 200, 300);
  ASSERT_EQ(six.wait(), 0) << six.output() << daemon_->log();
  ASSERT_EQ(six_one.wait(), 0) << six_one.output() << daemon_->log();
  EXPECT_THAT(six.output(), HasSubstr("received 300 packets, 150000 payload bytes"));
  EXPECT_THAT(six_one.output(), HasSubstr("received 200 packets, 60000 payload bytes"));
  for (const auto* out : {&six, &six_one}) {
    EXPECT_THAT(out->output(),
                HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  }
  auto s = stats();
  EXPECT_EQ(flow_stats(s, "six")->packets(), 300u);
  EXPECT_EQ(flow_stats(s, "six_one")->packets(), 200u);
  EXPECT_EQ(flow_stats(s, "loopback_ports"), nullptr);  // the file's flows, no catch-all
  ASSERT_TRUE(nic_queue(s, "rq_q_0"));
  EXPECT_EQ(nic_queue(s, "rq_q_0")->packets(), 550u);
  EXPECT_EQ(nic_queue(s, "rq_q_0")->unmatched(), 50u);
}

}  // namespace
}  // namespace daqiri::test
