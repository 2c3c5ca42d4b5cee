// A DAQIRI application's YAML run as it is, from DAQIRI's examples folder with cores changed to
// ones every host has: its UDP socket example (client and server on loopback), each interface
// receiving what DAQIRI's socket engine would hand it, and nothing else; its TCP socket example,
// messages sent and echoed on the connection between its two interfaces; its software-loopback
// example (regions in host memory), what a client sends coming back to a client; and RX flows
// written from its configuration reference (tunnel decap, VLAN pop, eCPRI, flex items) on
// net_pcap ports replaying frames the test wrote.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <sstream>
#include <string>

#include "dataplane_fixture.hpp"
#include "harness.hpp"
#include "pcap_frames.hpp"
#include "support/tcp_messages.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;

// DAQIRI's socket examples (examples/daqiri_bench_socket_{udp,tcp}_tx_rx.yaml) with cores
// changed: SCHEME_server on SERVER_PORT, SCHEME_client on CLIENT_PORT dialling it, each with an
// RX and a TX queue; BENCH is the file's benchmark section.
std::string socket_example(const std::string& scheme, const std::string& server_port,
                           const std::string& client_port, const std::string& bench) {
  return std::string(R"(%YAML 1.2
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
    - name: )" + scheme +
                     "_server" +
                     R"(
      address: 127.0.0.1
      socket_config:
        mode: server
        local_addr: )" +
                     "\"" + scheme + "://127.0.0.1:" + server_port + "\"" +
                     R"(
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

    - name: )" + scheme +
                     "_client" +
                     R"(
      address: 127.0.0.1
      socket_config:
        mode: client
        local_addr: )" +
                     "\"" + scheme + "://127.0.0.1:" + client_port + "\"" +
                     R"(
        remote_addr: )" +
                     "\"" + scheme + "://127.0.0.1:" + server_port + "\"" +
                     R"(
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

)") + bench;
}

const std::string kUdpSocketExample = socket_example("udp", "5001", "5002", R"(socket_bench_server:
  server: true
  server_port: 5001
)");
const std::string kTcpSocketExample = socket_example("tcp", "6001", "6002", R"(socket_bench_server:
  server: true
  send: true
  receive: true
  message_size: 1024
  server_port: 6001
)");

// DAQIRI's daqiri_bench_raw_sw_loopback.yaml, regions on the host instead of the GPU; TX_KEYS
// go into its TX queue, TX_FLOWS after its TX queues, FLOWS under its RX queues.
std::string sw_loopback_example(const std::string& flows = "", const std::string& tx_keys = "",
                                const std::string& tx_flows = "") {
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
         tx_flows +
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

// Both ends of DAQIRI's TCP example in one daemon: the client interface dials the server
// interface; what a client sends on the client interface's connection reaches the server
// interface's flow, a client there sends every byte back on the connection it came on, and it
// arrives on the client interface's flow, byte for byte.
TEST_F(DaqiriFileTest, TcpSocketExampleCarriesMessagesBothWays) {
  start_daqiri_file(kTcpSocketExample);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(eventually([&](const v1::Stats& s) {
    return flow_stats(s, "tcp_server")->connections() == 1 &&
           flow_stats(s, "tcp_client")->connections() == 1;
  })) << stats().DebugString()
      << daemon_->log();
  constexpr uint32_t kCount = 1000;
  constexpr size_t kSize = 1024;
  uint64_t fnv = 1469598103934665603ull;
  std::vector<std::byte> m(kSize);
  for (uint32_t i = 0; i < kCount; ++i) {
    tcp_messages::fill(m, 7, i);
    for (std::byte b : m)
      fnv = (fnv ^ std::to_integer<uint8_t>(b)) * 1099511628211ull;
  }
  const std::string total = std::to_string(kCount * kSize);
  Spawned back(dir_, client({"stream-rx", "tcp_client", total}));
  Spawned echo(dir_, client({"stream-echo", "tcp_server", "tcp_server", total}));
  ASSERT_TRUE(back.wait_for_output("attached")) << back.output();
  ASSERT_TRUE(echo.wait_for_output("attached")) << echo.output();
  auto tx = run(
      client({"stream-tx", "tcp_client", "0", std::to_string(kCount), std::to_string(kSize), "7"}));
  ASSERT_EQ(tx.exit_code, 0) << tx.out << tx.err;
  EXPECT_THAT(tx.out, HasSubstr("sent 1000, 0 failed"));
  ASSERT_EQ(echo.wait(), 0) << echo.output();
  EXPECT_THAT(echo.output(), HasSubstr("echoed " + total + ", 0 failed"));
  ASSERT_EQ(back.wait(), 0) << back.output();
  char line[80];
  std::snprintf(line, sizeof line, " bytes %s fnv %016llx", total.c_str(),
                static_cast<unsigned long long>(fnv));
  EXPECT_THAT(back.output(), HasSubstr(line));
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

// DAQIRI's header-data split on TX (its raw_tx_rx_hds example on software loopback): headers
// in host buffers, payloads in GPU buffers. A client that does not ask for GPU buffers is told
// to; one that does gets them where there is a GPU (tests/gpu's GpuTxTest sends through them),
// and is told why not where there is none.
TEST_F(DaqiriFileTest, HeaderDataSplitTxQueueSendsFromGpuMemory) {
  if (run({daqirid_path(), "--version"}).out.find("cuda: yes") == std::string::npos) {
    GTEST_SKIP() << "this daqirid is built without CUDA (the sanitizer builds): device regions "
                    "are refused before any of this";
  }
  std::string text = sw_loopback_example();
  auto swap = [&](const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
  };
  swap("    - name: \"Data_TX_GPU\"\n      kind: \"host\"",
       "    - name: \"Data_TX_CPU\"\n      kind: \"host\"\n      num_bufs: 51200\n"
       "      buf_size: 64\n    - name: \"Data_TX_GPU\"\n      kind: \"device\"");
  // Headers and payloads together are the frames the RX queue's buffers hold.
  swap("      num_bufs: 51200\n      buf_size: 1064\n    - name: \"Data_RX_GPU\"",
       "      num_bufs: 51200\n      buf_size: 1000\n    - name: \"Data_RX_GPU\"");
  swap("            - \"Data_TX_GPU\"",
       "            - \"Data_TX_CPU\"\n            - \"Data_TX_GPU\"");
  start_daqiri_file(text);
  if (HasFatalFailure()) return;
  auto plain = run(client({"tx", "loopback_ports", "5555", "6000", "1", "100"}));
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_THAT(plain.out + plain.err,
              HasSubstr("TX queue loopback_ports/tx_q_0 sends from GPU memory (region "
                        "\"Data_TX_GPU\"): attach with gpu"));
  auto gpu = run(client({"tx-gpu-attach", "loopback_ports", "tx_q_0"}));
  if (std::filesystem::exists("/dev/nvidia0")) {
    EXPECT_EQ(gpu.exit_code, 0) << gpu.out << gpu.err;
    EXPECT_THAT(gpu.out, HasSubstr("attached: frames up to 1064 bytes, 64 header bytes"));
  } else {
    EXPECT_EQ(gpu.exit_code, 3) << gpu.out << gpu.err;
    EXPECT_THAT(gpu.out, HasSubstr("attach failed: no GPU")) << gpu.out;
  }
  EXPECT_EQ(stats().attachments_size(), 0) << stats().DebugString();
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

// DAQIRI's tx.accurate_send: the daemon holds each frame of the loopback's TX queue until the
// time its client gave it (five frames submitted at once, 40 ms apart), and says how it
// differs from DAQIRI's NIC scheduling.
TEST_F(DaqiriFileTest, AccurateSendHoldsEachFrameUntilItsTime) {
  start_daqiri_file(sw_loopback_example("", "", "        accurate_send: true\n"));
  if (HasFatalFailure()) return;
  EXPECT_THAT(daemon_->log(), HasSubstr("accurate_send: a frame's time is CLOCK_REALTIME"));
  // A frame's buffer comes back once the loopback's RX side has taken it.
  Spawned rx(dir_, tap("loopback_ports", 5));
  ASSERT_TRUE(each_attached({"loopback_ports"})) << stats().DebugString();
  auto tx = run(client({"tx-at", "loopback_ports", "tx_q_0", "5", "40"}));
  ASSERT_EQ(tx.exit_code, 0) << tx.out << daemon_->log();
  EXPECT_THAT(tx.out, HasSubstr("sent 5, early 0,"));
  ASSERT_EQ(rx.wait(), 0) << rx.output();
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

// sw_loopback_example with a reorder of its flow (by id) as DAQIRI's reorder example writes
// one: `method` under seq_packets_per_batch, batches from PAYLOAD_OFFSET, into a host region of
// NUM_BUFS batches of BUF_SIZE bytes.
std::string sw_loopback_reorder(const std::string& method, uint32_t payload_offset,
                                uint32_t buf_size, uint32_t num_bufs) {
  std::string text = sw_loopback_example(R"(        flows:
        - name: "flow_0"
          id: 0
          action: {type: queue, id: 0}
          match: {udp_src: 5555, udp_dst: 6000}
        reorder_configs:
        - name: "rx_reorder"
          reorder_type: "cpu"
          memory_region: "Reorder_RX_CPU"
          payload_byte_offset: )" + std::to_string(payload_offset) +
                                         R"(
          flow_ids: [0]
          method:
            seq_packets_per_batch:
)" + method);
  text.insert(text.find("    interfaces:"), R"(    - name: "Reorder_RX_CPU"
      kind: "host"
      affinity: 0
      num_bufs: )" + std::to_string(num_bufs) + R"(
      buf_size: )" + std::to_string(buf_size) + "\n");
  return text;
}

// DAQIRI's reorder example as it is (1024 packets of 32-bit sequence numbers a batch, 2 MB
// output buffers): daqirid takes every key.
TEST_F(DaqiriFileTest, DaqirisReorderExampleChecksClean) {
  std::string file = dir_.write(
      "reorder.yaml",
      sw_loopback_reorder(R"(              sequence_number: {bit_offset: 512, bit_width: 32}
              packets_per_batch: 1024
)",
                          64, 2031616, 128));
  auto r = run({daqirid_path(), "--check-config", file});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("error"))) << r.err;
}

// DAQIRI's reorder on software loopback, as its reorder example configures one: the file's
// flow by id, the sequence number in a payload byte (the low byte of daqiri-gen's
// little-endian sequence), batches of 8 from byte 66 (after daqiri-gen's header). 200 frames
// sent in order come back as 25 whole batches, in order, each slot a payload's 753 bytes.
TEST_F(DaqiriFileTest, SoftwareLoopbackReorderHandsBackWholeBatches) {
  std::string text =
      sw_loopback_reorder(R"(              sequence_number: {bit_offset: 400, bit_width: 8}
              packets_per_batch: 8
)",
                          66, 65536, 64);
  start_daqiri_file(text);
  if (HasFatalFailure()) return;
  Spawned rx(dir_, client({"batches", "rx_reorder", "25"}));
  ASSERT_TRUE(each_attached({"rx_reorder"})) << rx.output() << stats().DebugString();
  send_looped(6000, 200, 777);
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log();
  std::string out = rx.output();
  for (int b = 0; b < 25; ++b) {
    EXPECT_THAT(out, HasSubstr("batch " + std::to_string(b) +
                               " packets 8 missing 0 slot_bytes 753 timed_out 0 data "));
  }
  EXPECT_THAT(out, HasSubstr("received 25 batches, 0 not batches"));
  auto s = stats();
  EXPECT_EQ(flow_stats(s, "flow_0")->packets(), 200u);
  EXPECT_EQ(flow_stats(s, "rx_reorder")->packets(), 25u);
}

// A DAQIRI raw file of net_pcap interfaces, each with an RX queue (id 0, 1, ...; a region of
// its own) per file it replays and the flows under `flows`. One flow a queue: a queue is polled
// from its first client on, so each flow's frames wait for its own client.
struct PcapPort {
  std::string name;
  std::vector<std::string> pcaps;
  std::string flows;
};
std::string pcap_ports_file(const std::vector<PcapPort>& ports) {
  std::string regions, interfaces;
  for (size_t i = 0; i < ports.size(); ++i) {
    std::string address = "net_pcap" + std::to_string(i), queues;
    for (size_t q = 0; q < ports[i].pcaps.size(); ++q) {
      std::string region = ports[i].name + std::to_string(q);
      regions += "    - {name: \"" + region + "\", kind: host, num_bufs: 4096, buf_size: 2048}\n";
      address += ",rx_pcap=" + ports[i].pcaps[q];
      queues += "        - {name: \"" + region + "\", id: " + std::to_string(q) +
                ", cpu_core: 1, batch_size: 64, memory_regions: [\"" + region + "\"]}\n";
    }
    interfaces += "    - name: \"" + ports[i].name + "\"\n      address: \"" + address +
                  "\"\n      rx:\n        queues:\n" + queues + "        flows:\n" + ports[i].flows;
  }
  return "daqiri:\n  cfg:\n    version: 1\n    stream_type: \"raw\"\n    master_core: 0\n"
         "    memory_regions:\n" +
         regions + "    interfaces:\n" + interfaces;
}

// What a DAQIRI flow's outer headers name, as the tunnel builders of pcap_frames.hpp write them.
std::string tunnel_fields(const std::string& type) {
  return std::string("{type: ") + type + ", outer_eth_src: \"" + kOuterEthSrc +
         "\", outer_eth_dst: \"" + kOuterEthDst +
         "\", outer_ipv4_src: 192.0.2.1, outer_ipv4_dst: 192.0.2.2";
}

// Each decapsulating flow's client gets exactly the inner frames of its tunnel (a GRE tunnel of
// IPv4 packets: the inner packet behind the outer MAC addresses), a VLAN pop flow the frames
// without their tag; tunnels with another VNI, inner packets the flow does not match and
// untagged frames are counted unmatched. eCPRI flows take their message type and PC_ID,
// flex-item flows their 32 bits. Byte for byte, as tap writes them.
TEST_F(DaqiriFileTest, RxFlowsDecapsulateAndMatchEcpriAndFlexItemsAsDaqiriDoes) {
  struct Queue {
    explicit Queue(const char* name) : flow(name) {}
    const char* flow;
    std::vector<Frame> sent;  // what the queue's file replays
    std::vector<Frame> want;  // what its flow's client gets
    uint64_t unmatched = 0;
  };
  Queue vx{"vx"}, gre{"gre"}, nv{"nv"}, tagged{"tagged"}, iq{"iq"}, rtc{"rtc"}, fa{"fa"}, fb{"fb"};
  auto stray = [](Queue& q, const Frame& f) {
    q.sent.push_back(f);
    ++q.unmatched;
  };
  for (uint64_t i = 0; i < 300; ++i) {
    vx.want.push_back(make_frame(1000, 7000, i, 100 + i % 700));
    vx.sent.push_back(in_vxlan(vx.want.back(), 100, static_cast<uint16_t>(49152 + i % 7)));
    if (i % 15 == 0) stray(vx, in_vxlan(make_frame(1000, 7000, i, 80), 200));
    if (i < 200) {
      Frame inner = make_frame(1000, 7001, i, 60 + i);
      gre.sent.push_back(in_gre(inner, 0x0800, i % 2 == 0 ? int64_t(i) : -1));
      std::memcpy(inner.data(), gre.sent.back().data(), 12);  // the outer frame's addresses
      gre.want.push_back(inner);
      if (i % 20 == 0) stray(gre, in_gre(make_frame(1000, 7009, i, 64), 0x0800));
    }
    if (i < 150) {
      nv.want.push_back(make_frame(1000, 7002, i, 500));
      nv.sent.push_back(in_nvgre(nv.want.back(), 0x1234, 0));
      if (i % 50 == 0) stray(nv, in_nvgre(nv.want.back(), 0x1234, 1));  // another flow id
    }
    if (i < 100) {
      tagged.want.push_back(make_frame(1000, 7003, i, 256));
      tagged.sent.push_back(with_tag(tagged.want.back(), 0x8100));
      if (i % 10 == 0) stray(tagged, make_frame(1000, 7003, 1000 + i, 64));  // no tag
    }
    if (i < 120) {
      iq.want.push_back(ecpri_frame(0, 7, 64 + i));
      iq.sent.push_back(iq.want.back());
      if (i % 5 == 0) stray(iq, ecpri_frame(0, 8, 64));  // another PC_ID
    }
    if (i < 80) {
      rtc.want.push_back(ecpri_frame(2, static_cast<uint16_t>(i), 40));
      rtc.sent.push_back(rtc.want.back());
      if (i % 8 == 0) stray(rtc, ecpri_frame(1, 0, 40));  // another message type
    }
    if (i < 60) {
      auto word = [&i](const uint8_t(&bytes)[4]) {
        Frame f = make_frame(1000, 4791, i, 64);
        std::memcpy(f.data() + frame::kUdpHeaders + 8, bytes, 4);
        return f;
      };
      fa.want.push_back(word({0x01, 0x00, 0x00, 0xaa}));
      fa.sent.push_back(fa.want.back());
      fb.want.push_back(word({0x02, uint8_t(i), 9, 9}));
      fb.sent.push_back(fb.want.back());
      if (i % 2 == 0) stray(fa, word({0x01, 0x00, 0x00, 0xab}));
      if (i % 3 == 0) stray(fb, word({0x03, 0x00, 0x00, 0x00}));
    }
  }
  auto files = [this](std::initializer_list<const Queue*> queues) {
    std::vector<std::string> paths;
    for (const Queue* q : queues) {
      paths.push_back(dir_.file(std::string(q->flow) + "_sent.pcap"));
      write_pcap(paths.back(), q->sent);
    }
    return paths;
  };
  auto queue_action = [](int id) { return "{type: queue, id: " + std::to_string(id) + "}"; };
  start_daqiri_file(
      pcap_ports_file({{"tunnels", files({&vx, &gre, &nv, &tagged}),
                        "        - name: vx\n          id: 1\n          actions:\n"
                        "          - {type: tunnel_decap, tunnel: " +
                            tunnel_fields("vxlan") +
                            ", vni: 100}}\n"
                            "          - " +
                            queue_action(0) +
                            "\n"
                            "        - name: gre\n          id: 2\n          actions:\n"
                            "          - {type: tunnel_decap, tunnel: " +
                            tunnel_fields("gre") +
                            ", gre_protocol: 0x0800}}\n"
                            "          - " +
                            queue_action(1) +
                            "\n          match: {udp_dst: 7001}\n"
                            "        - name: nv\n          id: 3\n          actions:\n"
                            "          - {type: tunnel_decap, tunnel: " +
                            tunnel_fields("nvgre") +
                            ", tni: 0x1234}}\n"
                            "          - " +
                            queue_action(2) +
                            "\n"
                            "        - {name: tagged, id: 4, actions: [{type: vlan_pop}, " +
                            queue_action(3) + "], match: {udp_dst: 7003}}\n"},
                       {"radio", files({&iq, &rtc}),
                        "        - {name: iq, id: 11, action: " + queue_action(0) +
                            ", match: {ecpri: {msg_type: 0, pc_id: 7}}}\n"
                            "        - {name: rtc, id: 12, action: " +
                            queue_action(1) + ", match: {ecpri: {msg_type: 2}}}\n"},
                       {"flexed", files({&fa, &fb}),
                        "        - {name: fa, id: 21, action: " + queue_action(0) +
                            ", match: {flex_item_id: 4, val: 0xaa000001, mask: 0xffffffff}}\n"
                            "        - {name: fb, id: 22, action: " +
                            queue_action(1) +
                            ", match: {flex_item_id: 4, val: 2, mask: 0xff}}\n"
                            "        flex_items:\n        - {name: word, id: 4, offset: 8, "
                            "udp_dst_port: 4791}\n"}}));
  if (HasFatalFailure()) return;
  std::vector<Queue*> queues = {&vx, &gre, &nv, &tagged, &iq, &rtc, &fa, &fb};
  std::vector<std::unique_ptr<Spawned>> taps;
  for (const Queue* q : queues) {
    auto args = tap(q->flow, q->want.size(), {"--pcap", dir_.file(std::string(q->flow) + ".pcap")});
    std::erase(args, std::string("--verify"));  // eCPRI and flex frames carry no test pattern
    taps.push_back(std::make_unique<Spawned>(dir_, args));
  }
  auto s = stats();
  for (size_t i = 0; i < queues.size(); ++i) {
    const Queue& q = *queues[i];
    ASSERT_EQ(taps[i]->wait(), 0) << q.flow << ": " << taps[i]->output() << daemon_->log();
    auto got = read_pcap(dir_.file(std::string(q.flow) + ".pcap"));
    ASSERT_EQ(got.size(), q.want.size()) << q.flow;
    for (size_t k = 0; k < got.size(); ++k)
      ASSERT_EQ(got[k], q.want[k]) << q.flow << " frame " << k;
    s = stats();
    uint64_t bytes = 0;
    for (const auto& f : q.want)
      bytes += f.size();
    EXPECT_EQ(flow_stats(s, q.flow)->packets(), q.want.size()) << q.flow;
    EXPECT_EQ(flow_stats(s, q.flow)->bytes(), bytes) << q.flow;
  }
  for (const auto& [queue, q] : {std::pair{"tunnels0", &vx},
                                 {"tunnels1", &gre},
                                 {"tunnels2", &nv},
                                 {"tunnels3", &tagged},
                                 {"radio0", &iq},
                                 {"radio1", &rtc},
                                 {"flexed0", &fa},
                                 {"flexed1", &fb}}) {
    ASSERT_TRUE(nic_queue(s, queue)) << queue;
    EXPECT_EQ(nic_queue(s, queue)->unmatched(), q->unmatched) << queue;
  }
}

// A DAQIRI TX flow's encapsulation, and an RX flow of the same fields decapsulating what comes
// back through software loopback: the client receives exactly the frames sent.
TEST_F(DaqiriFileTest, SoftwareLoopbackEncapsulatesOnTxAndDecapsulatesOnRx) {
  std::string tunnel = "{type: vxlan, outer_eth_src: \"" + std::string(kOuterEthSrc) +
                       "\", outer_eth_dst: \"" + kOuterEthDst +
                       "\", outer_ipv4_src: 192.0.2.1, outer_ipv4_dst: 192.0.2.2, vni: 42}";
  start_daqiri_file(
      sw_loopback_example("        flows:\n"
                          "        - {name: inner, id: 1, actions: [{type: tunnel_decap, tunnel: " +
                              tunnel + "}, {type: queue, id: 0}]}\n",
                          "",
                          "        flows:\n"
                          "        - {name: out, id: 9, actions: [{type: tunnel_encap, tunnel: " +
                              tunnel + "}], match: {udp_dst: 6000}}\n"));
  if (HasFatalFailure()) return;
  Spawned rx(dir_, tap("inner", 500));
  ASSERT_TRUE(each_attached({"inner"})) << stats().DebugString();
  send_looped(6000, 500, 900);
  ASSERT_EQ(rx.wait(), 0) << rx.output() << daemon_->log();
  EXPECT_THAT(rx.output(), HasSubstr("received 500 packets, 450000 payload bytes"));
  EXPECT_THAT(rx.output(),
              HasSubstr("verify: 1 streams, lost 0, reordered 0, duplicate 0, corrupt 0"));
  auto s = stats();
  EXPECT_EQ(nic_queue(s, "tx_q_0")->bytes(), 500u * (900 + 42 + 50));  // with the tunnel's
  EXPECT_EQ(flow_stats(s, "inner")->bytes(), 500u * (900 + 42));       // without
}

// What TX flows put around the frames a client sends, as they leave (net_pcap writes them to a
// file): each frame exactly the client's frame behind the headers its flow names (byte for
// byte against the tests' own tunnel builders, and as tshark decodes them); a frame no flow
// matches, as it was sent.
TEST_F(DaqiriFileTest, TxFlowsPutTheirHeadersAroundWhatClientsSend) {
  std::string out = dir_.file("out.pcap");
  auto tunnel = [](const std::string& type, const std::string& fields) {
    return "{type: tunnel_encap, tunnel: " + tunnel_fields(type) + ", " + fields + "}}";
  };
  start_daqiri_file(
      "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    master_core: 0\n"
      "    memory_regions:\n    - {name: TX, kind: host, num_bufs: 4096, buf_size: 2048}\n"
      "    interfaces:\n    - name: wire\n      address: \"net_pcap0,tx_pcap=" +
      out +
      "\"\n      tx:\n        queues:\n"
      "        - {name: tq, id: 0, cpu_core: 1, batch_size: 32, memory_regions: [TX]}\n"
      "        flows:\n"
      "        - {name: vx, id: 1, match: {udp_dst: 7000}, actions: [" +
      tunnel("vxlan", "vni: 100, outer_udp_src: 49152") +
      "]}\n"
      "        - {name: tag, id: 2, match: {udp_dst: 7001}, actions: [{type: vlan_push, "
      "vlan: {vlan_id: 5}}]}\n"
      "        - {name: gre, id: 3, match: {udp_dst: 7002}, actions: [" +
      tunnel("gre", "gre_protocol: 0x0800") +
      "]}\n"
      "        - {name: nv, id: 4, match: {udp_dst: 7003}, actions: [" +
      tunnel("nvgre", "tni: 0xabcdef, flow_id: 3") + "]}\n");
  if (HasFatalFailure()) return;
  constexpr uint64_t kEach = 100;
  for (uint16_t port = 7000; port <= 7004; ++port) {
    auto tx = run(client({"tx", "wire", "5555", std::to_string(port), std::to_string(kEach),
                          std::to_string(100 + port % 7000 * 100)}));
    ASSERT_EQ(tx.exit_code, 0) << tx.out << tx.err << daemon_->log();
  }
  // net_pcap takes no egress rule: the poller put the headers on, and the log says so.
  EXPECT_THAT(daemon_->log(), HasSubstr("TX flows are encapsulated by the TX poller (flow "));
  ASSERT_EQ(daemon_->stop(), 0) << daemon_->log();  // net_pcap writes its file out on close
  daemon_.reset();
  auto sent = read_pcap(out);
  ASSERT_EQ(sent.size(), 5 * kEach);
  // Each kind of frame: the client's frame behind the headers, from the tests' own builders.
  const size_t headers[] = {50, 16, 38, 42, 0};
  for (size_t i = 0; i < sent.size(); ++i) {
    size_t kind = i / kEach;
    uint16_t port = static_cast<uint16_t>(7000 + kind);
    const Frame& f = sent[i];
    ASSERT_GT(f.size(), headers[kind]) << "frame " << i;
    Frame inner;
    switch (kind) {
      case 0:
        inner.assign(f.begin() + 50, f.end());
        EXPECT_EQ(f, in_vxlan(inner, 100, 49152)) << "frame " << i;
        break;
      case 1:
        inner = f;
        inner.erase(inner.begin() + 12, inner.begin() + 16);
        EXPECT_EQ(f, with_tag(inner, 0x8100)) << "frame " << i;
        break;
      case 2:  // the client's packet behind a new Ethernet header: check the packet's frame
        inner = Frame(14);
        inner.insert(inner.end(), f.begin() + 38, f.end());
        EXPECT_EQ(f, in_gre(inner, 0x0800)) << "frame " << i;
        inner.erase(inner.begin(), inner.begin() + 14);
        inner.insert(inner.begin(), f.begin(), f.begin() + 14);  // parse_udp reads from 0
        break;
      case 3:
        inner.assign(f.begin() + 42, f.end());
        EXPECT_EQ(f, in_nvgre(inner, 0xabcdef, 3)) << "frame " << i;
        break;
      default:
        inner = f;
    }
    auto udp = frame::parse_udp(inner);
    ASSERT_TRUE(udp) << "frame " << i;
    EXPECT_EQ(udp->dst.port, port) << "frame " << i;
    pattern::Header h{};
    EXPECT_EQ(pattern::check(std::span(inner).subspan(udp->payload_offset, udp->payload_length), h),
              pattern::Check::kOk)
        << "frame " << i;
    EXPECT_EQ(h.sequence, i % kEach) << "frame " << i;
  }
  // A reader nobody here wrote: tshark's decoding of the same file, one line a frame.
  if (::access("/usr/bin/tshark", X_OK) != 0) return;  // the bytes above are checked anyway
  auto t = run({"/usr/bin/tshark", "-r", out, "-T", "fields", "-e", "vxlan.vni", "-e", "vlan.id",
                "-e", "gre.proto", "-e", "ip.proto", "-e", "udp.dstport"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  std::vector<std::string> lines;
  std::istringstream in(t.out);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  ASSERT_EQ(lines.size(), 5 * kEach);
  EXPECT_EQ(lines[0], "100\t\t\t17,17\t4789,7000");
  EXPECT_EQ(lines[kEach], "\t5\t\t17\t7001");
  EXPECT_EQ(lines[2 * kEach], "\t\t0x0800\t47,17\t7002");
  EXPECT_EQ(lines[3 * kEach], "\t\t0x6558\t47,17\t7003");
  EXPECT_EQ(lines[4 * kEach], "\t\t\t17\t7004");
}

}  // namespace
}  // namespace daqiri::test
