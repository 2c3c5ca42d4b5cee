// The optional TCP listener: TLS only, callers get daemon.tcp.role (client by default).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "daqiri/v1/control.grpc.pb.h"
#include "harness.hpp"

namespace daqiri::test {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A self-signed certificate for localhost and 127.0.0.1, and a daemon whose TCP listener uses
// it (role anonymous: no client certificate) with `limits` in its daemon section.
struct TlsDaemon {
  TempDir dir;
  std::string cert = dir.file("cert.pem");
  uint16_t port = free_tcp_port();
  std::string address = "127.0.0.1:" + std::to_string(port);
  std::optional<DaemonProcess> daemon;

  explicit TlsDaemon(const std::string& limits = "") {
    auto key = dir.file("key.pem");
    auto gen = run({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                    "1", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", cert});
    EXPECT_EQ(gen.exit_code, 0) << gen.err;
    std::string extra = "  tcp:\n    address: " + address + "\n    cert: " + cert +
                        "\n    key: " + key + "\n    role: anonymous\n" + limits;
    daemon.emplace(
        dir, std::vector<std::string>{"--config",
                                      dir.write("d.yaml", test_config(dir.file("d.sock"), extra))});
  }
  // A channel of its own (its own TCP connection: channels with different arguments share none).
  std::unique_ptr<v1::Control::Stub> stub(int n = 0) const {
    grpc::SslCredentialsOptions opts;
    opts.pem_root_certs = slurp(cert);
    grpc::ChannelArguments args;
    args.SetInt("daqiri.test.connection", n);
    return v1::Control::NewStub(
        grpc::CreateCustomChannel(address, grpc::SslCredentials(opts), args));
  }
};

std::unique_ptr<grpc::ClientContext> ctx() {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return c;
}

TEST(TcpTls, ServesOnlyTlsAndGivesTheClientRole) {
  if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "no openssl to make a certificate";
  TlsDaemon d;
  ASSERT_TRUE(d.daemon->wait_ready()) << d.daemon->log();
  auto stub = d.stub();
  v1::Info info;
  auto s = stub->GetInfo(ctx().get(), {}, &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.caller().transport(), "tcp");
  EXPECT_EQ(info.caller().role(), v1::ROLE_CLIENT);

  v1::CreateFlowRequest req;
  req.set_name("remote");
  req.set_interface("lo");
  req.mutable_match()->mutable_udp_dst()->set_first(9999);
  v1::Flow flow;
  s = stub->CreateFlow(ctx().get(), req, &flow);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // The refusal names the real peer, not the relay's loopback port.
  EXPECT_THAT(s.error_message(), ::testing::HasSubstr("tcp peer ipv4:127.0.0.1:"));

  // Plaintext is not spoken on TCP.
  auto plain =
      v1::Control::NewStub(grpc::CreateChannel(d.address, grpc::InsecureChannelCredentials()));
  s = plain->GetInfo(ctx().get(), {}, &info);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(d.daemon->stop(), 0);
}

// One peer cannot take every TCP connection: past tcp_connections_per_peer the next is closed
// as it is accepted (UNAVAILABLE), the refusal is logged once, and a connection closed makes
// room for the next.
TEST(TcpTls, APeerHoldsAtMostItsShareOfConnections) {
  if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "no openssl to make a certificate";
  TlsDaemon d("  limits: {tcp_connections_per_peer: 2}\n");
  ASSERT_TRUE(d.daemon->wait_ready()) << d.daemon->log();
  v1::Info info;
  auto first = d.stub(1);
  auto second = d.stub(2);
  ASSERT_TRUE(first->GetInfo(ctx().get(), {}, &info).ok());
  ASSERT_TRUE(second->GetInfo(ctx().get(), {}, &info).ok());
  auto third = d.stub(3);
  auto s = third->GetInfo(ctx().get(), {}, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_THAT(d.daemon->log(),
              ::testing::HasSubstr("TCP control listener: refused ipv4:127.0.0.1:"));
  EXPECT_THAT(d.daemon->log(), ::testing::HasSubstr("it holds 2 connections"));
  first.reset();  // its channel, and with it the connection, goes
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    served = d.stub(4 + i)->GetInfo(ctx().get(), {}, &info).ok();
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(served);
  EXPECT_TRUE(second->GetInfo(ctx().get(), {}, &info).ok());  // held all along
  EXPECT_EQ(d.daemon->stop(), 0);
}

// The gate out of fds: connections past what the daemon can spare (beside gRPC's own
// headroom) are taken and closed at once, the log says so once, the gate does not spin on a
// listener it cannot accept from, and TLS calls work again once fds are back.
TEST(TcpTls, TheGateOutOfFdsRefusesAndRecovers) {
  if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "no openssl to make a certificate";
  TlsDaemon d;
  ASSERT_TRUE(d.daemon->wait_ready()) << d.daemon->log();
  pid_t pid = d.daemon->pid();
  size_t open_now = open_fds(pid);
  rlimit before{};
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, nullptr, &before), 0);
  rlimit low{open_now + 22, before.rlim_max};  // the 16 kept for gRPC, and a few relays
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &low, nullptr), 0) << std::strerror(errno);
  sockaddr_in to = loopback(d.port);
  std::vector<UniqueFd> conns;
  int refused = 0;
  for (int i = 0; i < 12; ++i) {
    UniqueFd c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_EQ(::connect(c.get(), reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
    pollfd p{c.get(), POLLIN, 0};
    char byte = 0;
    // Admitted ones stay quiet (no TLS hello is sent); a refused one is closed at once.
    if (::poll(&p, 1, 300) == 1 && ::recv(c.get(), &byte, 1, 0) == 0) ++refused;
    conns.push_back(std::move(c));
  }
  EXPECT_GE(refused, 4);
  EXPECT_THAT(d.daemon->log(), ::testing::HasSubstr("TCP control listener: out of file "
                                                    "descriptors"));
  EXPECT_THAT(d.daemon->log(), ::testing::Not(::testing::HasSubstr("accept: Too many")));
  conns.clear();
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &before, nullptr), 0);
  v1::Info info;
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    served = d.stub(i)->GetInfo(ctx().get(), {}, &info).ok();
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(served) << d.daemon->log();
  EXPECT_EQ(d.daemon->stop(), 0);
}

}  // namespace
}  // namespace daqiri::test
