// The kernel-socket backend through the Backend interface, on real loopback sockets: a UDP flow
// receives what a plain socket sends, as frames with the headers written in front, into its own
// pool and through one client's ring; every buffer comes back; what it cannot take is refused
// with the reason.
#include "backends/socket/socket_backend.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/common/unique_fd.hpp"
#include "daqiri/frame.hpp"
#include "dataplane/rx_attachment.hpp"
#include "test_pools.hpp"

namespace daqiri::backends::socket {
namespace {

using namespace std::chrono_literals;

constexpr uint16_t kPort = 47731;  // loopback only, held for the test's length

class SocketBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    region_.name = "r";
    region_.buf_size = 2048;
    region_.num_bufs = 256;
    queue_.name = "rx0";
    queue_.batch_size = 32;
    itf_.name = "lo";
    itf_.address = "127.0.0.1";
    auto poller = dataplane::Poller::start("test", -1);
    ASSERT_TRUE(poller);
    poller_ = std::move(*poller);
    BackendContext context{
        config_,
        [this](const std::string&, int) { return Result<dataplane::Poller*>(poller_.get()); },
        [](const config::MemoryRegionConfig&) -> Result<memory::DeviceMemory> {
          return fail(ErrorCode::kFailedPrecondition, "no GPU here");
        }};
    auto b = SocketBackend::open(context);
    ASSERT_TRUE(b);
    backend_ = std::move(*b);
    home_ = {poller_.get(), &itf_, &queue_, &region_, nullptr};
  }

  core::Flow udp_flow(uint16_t port = kPort) const {
    core::Flow f;
    f.name = "udp";
    f.interface = "lo";
    f.queue = "rx0";
    f.id = 7;
    f.match.udp_dst = core::PortRange{port, port};
    return f;
  }

  config::Config config_;
  config::MemoryRegionConfig region_;
  config::QueueConfig queue_;
  config::InterfaceConfig itf_;
  std::unique_ptr<dataplane::Poller> poller_;
  std::unique_ptr<Backend> backend_;
  QueueHome home_;
};

TEST_F(SocketBackendTest, AUdpFlowDeliversWhatASocketSentAsWholeFramesAndGetsEveryBufferBack) {
  auto flow = backend_->add_flow(udp_flow(), home_, nullptr);
  ASSERT_TRUE(flow) << flow.error().message;
  memory::BufferPool& pool = (*flow)->pool();
  auto client = dataplane::RxAttachment::create(1, 64, dataplane::Backpressure::kDropNew, {&pool});
  ASSERT_TRUE(client);
  ASSERT_TRUE((*flow)->fanout().add(client->get(), poller_->epoch()));

  UniqueFd sender(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(sender);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(kPort);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  constexpr uint32_t kCount = 20;
  for (uint32_t i = 0; i < kCount; ++i) {
    std::string payload = "datagram " + std::to_string(i);
    ASSERT_EQ(::sendto(sender.get(), payload.data(), payload.size(), 0,
                       reinterpret_cast<sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(payload.size()));
  }
  abi::RingView ring = dataplane::client_ring(**client);
  for (auto deadline = std::chrono::steady_clock::now() + 5s;
       ring.load_producer() < kCount && std::chrono::steady_clock::now() < deadline;)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(ring.load_producer(), kCount);
  for (uint32_t i = 0; i < kCount; ++i) {
    const auto& d = *ring.slot<daqiri_rx_desc>(i);
    std::string payload = "datagram " + std::to_string(i);
    EXPECT_EQ(d.length, frame::kUdpHeaders + payload.size());
    EXPECT_EQ(d.flow_id, 7u);
    const std::byte* bytes = pool.data() + d.offset;
    auto parsed = frame::parse_udp({bytes, d.length});
    ASSERT_TRUE(parsed) << i;
    EXPECT_EQ(parsed->dst.port, kPort);
    EXPECT_EQ(parsed->dst.ipv4, 0x7f000001u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes + parsed->payload_offset),
                          parsed->payload_length),
              payload);
  }
  EXPECT_EQ((*flow)->counters.packets.load(), kCount);
  // The client releases all: the poller takes every buffer back.
  ring.publish_consumer(kCount);
  for (auto deadline = std::chrono::steady_clock::now() + 5s;
       (*flow)->counters.on_loan.load() != 0 && std::chrono::steady_clock::now() < deadline;)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ((*flow)->counters.on_loan.load(), 0u);

  dataplane::Grace out = (*flow)->fanout().remove(client->get(), poller_->epoch());
  EXPECT_TRUE(out.passed);
  dataplane::Grace gone = backend_->remove_flow(flow->get(), home_);
  EXPECT_TRUE(gone.passed);
}

TEST_F(SocketBackendTest, RefusesWhatTheKernelCannotSteerAndSaysWhy) {
  core::Flow any = udp_flow();
  any.match = core::FlowMatch{};
  any.match.any = true;
  auto a = backend_->add_flow(any, home_, nullptr);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(a.error().message.find("needs a dpdk interface"), std::string::npos);

  core::Flow no_port = udp_flow();
  no_port.match = core::FlowMatch{};
  no_port.match.ipv4_src = core::Ipv4Prefix{0x0a000001, 32};
  auto b = backend_->add_flow(no_port, home_, nullptr);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("udp_dst"), std::string::npos);

  // A port another socket holds: the bind error names the port. The kernel picks the port, so
  // a test running beside this one on kPort cannot take it first.
  UniqueFd holder(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder.get(), reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  socklen_t at_len = sizeof at;
  ASSERT_EQ(::getsockname(holder.get(), reinterpret_cast<sockaddr*>(&at), &at_len), 0);
  const uint16_t held = ntohs(at.sin_port);
  auto c = backend_->add_flow(udp_flow(held), home_, nullptr);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find(std::to_string(held)), std::string::npos);
}

TEST_F(SocketBackendTest, KeepsNoBufferPostedAndDeliversBySocket) {
  EXPECT_EQ(backend_->traits(home_).posted_buffers, 0u);
  EXPECT_FALSE(backend_->traits(home_).nic_splits);
  EXPECT_EQ(backend_->delivery(home_), "socket");
  EXPECT_EQ(backend_->link_state(itf_), "configured");
}

}  // namespace
}  // namespace daqiri::backends::socket
