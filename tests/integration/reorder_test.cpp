// Reorders through the daemon: datagrams sent out of order over loopback to daqirid's socket
// backend come back to a client (unprivileged, when the tests run as root) as whole batches in
// sequence order, samples converted, each batch's losses and timeout in its header, byte for
// byte what the test computes, with the reorder's counts in GetStats and the metrics.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "dataplane_fixture.hpp"
#include "harness.hpp"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;

constexpr uint16_t kPort = 4620;
constexpr uint32_t kPpb = 8;
constexpr uint32_t kSamples = 8;  // int16 each, after the 4-byte sequence header

// What the sender puts in the packet of sequence number `seq`: the sequence number (16 bits,
// big-endian), two bytes of padding, then kSamples big-endian int16 samples.
int16_t sample(uint32_t seq, uint32_t k, int16_t bias) {
  return static_cast<int16_t>(static_cast<int32_t>(seq) * 300 + static_cast<int32_t>(k) * 7 - 4000 +
                              bias);
}

std::vector<uint8_t> payload(uint32_t seq, int16_t bias = 0) {
  std::vector<uint8_t> p{static_cast<uint8_t>(seq >> 8), static_cast<uint8_t>(seq), 0, 0};
  for (uint32_t k = 0; k < kSamples; ++k) {
    auto v = static_cast<uint16_t>(sample(seq, k, bias));
    p.push_back(static_cast<uint8_t>(v >> 8));
    p.push_back(static_cast<uint8_t>(v));
  }
  return p;
}

// The batch the reorder should deliver, in hex: each slot the samples of the packet placed
// there, as fp32 in host order, or zeros.
std::string expected(uint32_t batch, const std::vector<uint32_t>& present, int16_t bias_of_dup = 0,
                     uint32_t dup = UINT32_MAX) {
  std::string hex;
  for (uint32_t s = 0; s < kPpb; ++s) {
    uint32_t seq = batch * kPpb + s;
    bool here = std::find(present.begin(), present.end(), seq) != present.end();
    for (uint32_t k = 0; k < kSamples; ++k) {
      float f = here ? static_cast<float>(sample(seq, k, seq == dup ? bias_of_dup : 0)) : 0.0f;
      unsigned char b[4];
      std::memcpy(b, &f, 4);
      for (unsigned char x : b) {
        char two[3];
        std::snprintf(two, sizeof two, "%02x", x);
        hex += two;
      }
    }
  }
  return hex;
}

std::string config(const std::string& socket, const std::string& extra_daemon) {
  return "daemon:\n  socket: " + socket + "\n  metrics: \"\"\n" + extra_daemon +
         R"(memory_regions:
  - {name: rx, kind: host, buf_size: 2048, num_bufs: 4096}
  - {name: batches, kind: host, buf_size: 4096, num_bufs: 64}
interfaces:
  - name: lo
    backend: socket
    address: 127.0.0.1
    rx: {queues: [{name: rx0, batch_size: 64, ring_size: 1024, regions: [rx]}]}
flows:
  - {name: samples, interface: lo, queue: rx0, match: {udp_dst: 4620}}
reorders:
  - name: beams
    interface: lo
    flows: [samples]
    region: batches
    payload_offset: 46
    sequence: {bit_offset: 336, bit_width: 16}
    packets_per_batch: 8
    convert: {input: int16, output: fp32, byte_order: network}
    timeout_us: 300000
)";
}

class ReorderTest : public DataPlaneTest {
 protected:
  void send(const std::vector<uint32_t>& seqs, int16_t bias = 0) {
    for (uint32_t seq : seqs) {
      auto p = payload(seq, bias);
      ASSERT_EQ(::sendto(sender_.get(), p.data(), p.size(), 0,
                         reinterpret_cast<const sockaddr*>(&to_), sizeof to_),
                static_cast<ssize_t>(p.size()));
    }
    // Each datagram in before the next group: the kernel keeps their order on loopback, but
    // a group's last packet must not race the timeout.
    std::this_thread::sleep_for(20ms);
  }
  UniqueFd sender_{::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  sockaddr_in to_ = loopback(kPort);
};

// Four batches of 8 packets, sent shuffled: the first whole, the second missing one (reported
// when the third batch's first packet comes), the third whole, then that lost packet late
// (dropped), and a fourth with two packets, one twice (the later copy stays), emitted by its
// timeout. The client sees exactly those four, in order, byte for byte.
TEST_F(ReorderTest, BatchesArriveInSequenceOrderConvertedWithLossesAndTimeoutsSaid) {
  std::optional<TempGroup> group;
  std::optional<TempUser> user;
  std::string extra;
  if (is_root()) {
    group.emplace();
    user.emplace(group->name());
    extra = "  socket_group: " + group->name() + "\n  access:\n    clients:\n      users: [" +
            user->name() + "]\n";
  }
  socket_ = dir_.file("d.sock");
  uint16_t metrics = free_tcp_port();
  std::string text = config(socket_, extra);
  const std::string off = "metrics: \"\"";
  text.replace(text.find(off), off.size(),
               "metrics: \"127.0.0.1:" + std::to_string(metrics) + "\"");
  start_config(text);
  Spawned client(dir_, this->client({"batches", "beams", "4"}),
                 user ? std::optional(user->ids()) : std::nullopt);
  ASSERT_TRUE(each_attached({"beams"})) << client.output();

  send({5, 2, 7, 0, 3, 1, 6, 4});
  send({9, 15, 8, 12, 10, 14, 13});  // 11 lost
  send({20, 17, 23, 16, 19, 22, 18, 21});
  send({11});
  send({24, 26});
  send({26}, 1);  // again, other samples: this copy stays

  ASSERT_EQ(client.wait(), 0) << client.output() << daemon_->log();
  std::string out = client.output();
  EXPECT_THAT(out, HasSubstr("batch 0 packets 8 missing 0 slot_bytes 32 timed_out 0 data " +
                             expected(0, {0, 1, 2, 3, 4, 5, 6, 7}) + "\n"));
  EXPECT_THAT(out, HasSubstr("batch 1 packets 7 missing 1 slot_bytes 32 timed_out 0 data " +
                             expected(1, {8, 9, 10, 12, 13, 14, 15}) + "\n"));
  EXPECT_THAT(out, HasSubstr("batch 2 packets 8 missing 0 slot_bytes 32 timed_out 0 data " +
                             expected(2, {16, 17, 18, 19, 20, 21, 22, 23}) + "\n"));
  EXPECT_THAT(out, HasSubstr("batch 3 packets 3 missing 6 slot_bytes 32 timed_out 1 data " +
                             expected(3, {24, 26}, 1, 26) + "\n"));
  EXPECT_THAT(out, HasSubstr("received 4 batches, 0 not batches"));
  auto s = stats();
  ASSERT_NE(flow_stats(s, "beams"), nullptr);
  EXPECT_EQ(flow_stats(s, "beams")->packets(), 4u);
  EXPECT_EQ(flow_stats(s, "samples")->packets(), 27u);
  // The straggler 11, the second 26 and batch 3's timeout, counted where a dashboard sees them.
  EXPECT_EQ(flow_stats(s, "beams")->dropped_late(), 1u);
  EXPECT_EQ(flow_stats(s, "beams")->dropped_duplicate(), 1u);
  EXPECT_EQ(flow_stats(s, "beams")->dropped_short(), 0u);
  EXPECT_EQ(flow_stats(s, "beams")->dropped_not_samples(), 0u);
  EXPECT_EQ(flow_stats(s, "beams")->batches_timed_out(), 1u);
  EXPECT_EQ(flow_stats(s, "samples")->dropped_late(), 0u);
  // The same in the metrics; a plain flow has no reorder rows.
  auto body = http_get(metrics, "/metrics");
  ASSERT_TRUE(body);
  auto value = [&](const std::string& family, const std::string& flow, const std::string& more) {
    std::istringstream lines(*body);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with(family + "{") && line.find("flow=\"" + flow + "\"") != line.npos &&
          line.find(more) != line.npos) {
        return line.substr(line.rfind(' ') + 1);
      }
    }
    return std::string("absent");
  };
  EXPECT_EQ(value("daqiri_flow_dropped_packets_total", "beams", "reason=\"late\""), "1");
  EXPECT_EQ(value("daqiri_flow_dropped_packets_total", "beams", "reason=\"duplicate\""), "1");
  EXPECT_EQ(value("daqiri_reorder_batches_timed_out_total", "beams", ""), "1");
  EXPECT_EQ(value("daqiri_flow_dropped_packets_total", "samples", "reason=\"late\""), "absent");
}

// A reorder over two flows on two queues (two pollers): each batch's even packets come to one
// flow, its odd ones to the other, and every batch comes back whole, in sequence order.
TEST_F(ReorderTest, FlowsOnTwoQueuesFillOneBatch) {
  socket_ = dir_.file("d.sock");
  std::string text = config(socket_, "");
  auto replace = [&](const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
  };
  replace("regions: [rx]}]}",
          "regions: [rx]}, {name: rx1, batch_size: 64, ring_size: 1024, "
          "regions: [rx]}]}");
  replace("match: {udp_dst: 4620}}",
          "match: {udp_dst: 4620}}\n  - {name: odd, interface: lo, "
          "queue: rx1, match: {udp_dst: 4621}}");
  replace("flows: [samples]", "flows: [samples, odd]");
  start_config(text);
  Spawned client(dir_, this->client({"batches", "beams", "2"}));
  ASSERT_TRUE(each_attached({"beams"})) << client.output();
  sockaddr_in odd = loopback(4621);
  for (uint32_t batch = 0; batch < 2; ++batch) {
    for (uint32_t seq : {3u, 0u, 6u, 5u, 2u, 7u, 4u, 1u}) {
      auto p = payload(batch * kPpb + seq);
      const sockaddr_in& to = seq % 2 == 0 ? to_ : odd;
      ASSERT_EQ(::sendto(sender_.get(), p.data(), p.size(), 0,
                         reinterpret_cast<const sockaddr*>(&to), sizeof to),
                static_cast<ssize_t>(p.size()));
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(client.wait(), 0) << client.output() << daemon_->log();
  std::string out = client.output();
  EXPECT_THAT(out, HasSubstr("batch 0 packets 8 missing 0 slot_bytes 32 timed_out 0 data " +
                             expected(0, {0, 1, 2, 3, 4, 5, 6, 7}) + "\n"));
  EXPECT_THAT(out, HasSubstr("batch 1 packets 8 missing 0 slot_bytes 32 timed_out 0 data " +
                             expected(1, {8, 9, 10, 11, 12, 13, 14, 15}) + "\n"));
  auto s = stats();
  EXPECT_EQ(flow_stats(s, "samples")->packets(), 8u);
  EXPECT_EQ(flow_stats(s, "odd")->packets(), 8u);
  EXPECT_EQ(flow_stats(s, "beams")->packets(), 2u);
}

// A reorder and the flows it reads stay while the daemon runs: deleting either is refused with
// the reason, and a new flow may not take the reorder's name.
TEST_F(ReorderTest, AReorderAndItsFlowsCannotBeDeletedOrShadowed) {
  socket_ = dir_.file("d.sock");
  start_config(config(socket_, ""));
  auto ctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {ctl_path(), "--socket", socket_});
    return run(args);
  };
  auto r = ctl({"flows", "delete", "samples"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("feeds reorder \"beams\""));
  r = ctl({"flows", "delete", "beams"});
  EXPECT_NE(r.exit_code, 0);
  r = ctl({"flows", "add", "beams", "--interface", "lo", "--udp-dst", "4700"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("a reorder is named \"beams\""));
  EXPECT_TRUE(healthy());
}

}  // namespace
}  // namespace daqiri::test
