// A DAQIRI application's YAML run as it is: DAQIRI's UDP socket example (client and server on
// loopback, as in its examples folder, cores changed to ones every host has), each interface
// receiving what DAQIRI's socket engine would hand it, and nothing else.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
};

// The server hears anyone on its port; the client hears only its server (port 5001, which
// the server interface's TX queue sends from), as a connected UDP socket would.
TEST_F(DaqiriFileTest, UdpSocketExampleReceivesOnEachInterfaceWhatDaqiriWould) {
  start_daqiri_file(kUdpSocketExample);
  if (HasFatalFailure()) return;
  Spawned server(dir_, tap("udp_server", 300));
  Spawned client_rx(dir_, tap("udp_client", 200));
  ASSERT_TRUE(eventually([&](const v1::Stats& s) {
    return flow_stats(s, "udp_server") && flow_stats(s, "udp_server")->attachments() == 1 &&
           flow_stats(s, "udp_client") && flow_stats(s, "udp_client")->attachments() == 1;
  })) << stats().DebugString();
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

}  // namespace
}  // namespace daqiri::test
