// The optional TCP listener: TLS only, callers get daemon.tcp.role (client by default).
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

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

TEST(TcpTls, ServesOnlyTlsAndGivesTheClientRole) {
  if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "no openssl to make a certificate";
  TempDir dir;
  auto cert = dir.file("cert.pem");
  auto key = dir.file("key.pem");
  auto gen = run({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                  "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                  "-keyout", key, "-out", cert});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;

  std::string port = std::to_string(20000 + ::getpid() % 20000);
  std::string address = "127.0.0.1:" + port;
  std::string extra = "  tcp:\n    address: " + address + "\n    cert: " + cert +
                      "\n    key: " + key + "\n    role: anonymous\n";
  DaemonProcess d(dir, {"--config", dir.write("d.yaml", test_config(dir.file("d.sock"), extra))});
  ASSERT_TRUE(d.wait_ready()) << d.log();

  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = slurp(cert);
  auto stub = v1::Control::NewStub(grpc::CreateChannel(address, grpc::SslCredentials(opts)));
  auto ctx = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return c;
  };
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

  // Plaintext is not spoken on TCP.
  auto plain =
      v1::Control::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  s = plain->GetInfo(ctx().get(), {}, &info);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(d.stop(), 0);
}

}  // namespace
}  // namespace daqiri::test
