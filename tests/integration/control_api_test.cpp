// The control API through a real gRPC client against a real daqirid.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "daqiri/v1/control.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "harness.hpp"
#include "reflection_subset.grpc.pb.h"

namespace daqiri::test {
namespace {

class ControlApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    socket_ = dir_->file("d.sock");
    std::string config = dir_->write("d.yaml", test_config(socket_));
    daemon_ = new DaemonProcess(*dir_, {"--config", config});
    ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->stop(), 0) << daemon_->log();
    delete daemon_;
    delete dir_;
  }

  void SetUp() override {
    channel_ = grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
    stub_ = v1::Control::NewStub(channel_);
  }

  static std::unique_ptr<grpc::ClientContext> ctx() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return c;
  }

  static v1::CreateFlowRequest flow_request(const std::string& name, uint32_t dst_first,
                                            uint32_t dst_last) {
    v1::CreateFlowRequest r;
    r.set_name(name);
    r.set_interface("lo");
    r.mutable_match()->mutable_udp_dst()->set_first(dst_first);
    r.mutable_match()->mutable_udp_dst()->set_last(dst_last);
    return r;
  }

  static TempDir* dir_;
  static std::string socket_;
  static DaemonProcess* daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Control::Stub> stub_;
};

TempDir* ControlApiTest::dir_ = nullptr;
std::string ControlApiTest::socket_;
DaemonProcess* ControlApiTest::daemon_ = nullptr;

TEST_F(ControlApiTest, InfoDescribesTheDaemonAndTheCaller) {
  v1::Info info;
  ASSERT_TRUE(stub_->GetInfo(ctx().get(), {}, &info).ok());
  EXPECT_EQ(info.version(), "0.1.0");
  EXPECT_EQ(info.pid(), daemon_->pid());
  ASSERT_GE(info.backends_size(), 1);
  EXPECT_EQ(info.backends(0), "socket");
  ASSERT_EQ(info.build_features_size(), 4);
  EXPECT_EQ(info.build_features(0).name(), "dpdk");
  EXPECT_EQ(info.build_features(3).name(), "xdp");
  EXPECT_EQ(info.config_source(), dir_->file("d.yaml"));
  // The daemon saw this process through SO_PEERCRED.
  EXPECT_EQ(info.caller().uid(), ::geteuid());
  EXPECT_EQ(info.caller().pid(), ::getpid());
  EXPECT_EQ(info.caller().transport(), "unix");
  EXPECT_EQ(info.caller().role(), ::geteuid() == 0 ? v1::ROLE_ADMIN : v1::ROLE_NONE);
}

TEST_F(ControlApiTest, ListsMatchTheConfiguration) {
  v1::ListInterfacesResponse itfs;
  ASSERT_TRUE(stub_->ListInterfaces(ctx().get(), {}, &itfs).ok());
  ASSERT_EQ(itfs.interfaces_size(), 1);
  EXPECT_EQ(itfs.interfaces(0).name(), "lo");
  EXPECT_EQ(itfs.interfaces(0).backend(), v1::BACKEND_SOCKET);
  EXPECT_EQ(itfs.interfaces(0).address(), "127.0.0.1");

  v1::ListMemoryRegionsResponse regions;
  ASSERT_TRUE(stub_->ListMemoryRegions(ctx().get(), {}, &regions).ok());
  ASSERT_EQ(regions.regions_size(), 2);
  EXPECT_EQ(regions.regions(0).name(), "rx_host");
  EXPECT_EQ(regions.regions(0).total_bytes(), 2048u * 4096u);

  v1::ListQueuesResponse queues;
  ASSERT_TRUE(stub_->ListQueues(ctx().get(), {}, &queues).ok());
  ASSERT_EQ(queues.queues_size(), 2);
  EXPECT_EQ(queues.queues(0).name(), "rx0");
  EXPECT_EQ(queues.queues(0).direction(), v1::DIRECTION_RX);
  EXPECT_EQ(queues.queues(1).direction(), v1::DIRECTION_TX);

  v1::ListQueuesRequest bad;
  bad.set_interface("eth9");
  EXPECT_EQ(stub_->ListQueues(ctx().get(), bad, &queues).error_code(), grpc::StatusCode::NOT_FOUND);

  v1::ListFlowsResponse flows;
  ASSERT_TRUE(stub_->ListFlows(ctx().get(), {}, &flows).ok());
  ASSERT_GE(flows.flows_size(), 2);
  EXPECT_EQ(flows.flows(0).name(), "stream0");
  EXPECT_EQ(flows.flows(0).match().udp_dst().first(), 4096u);
  EXPECT_EQ(flows.flows(0).origin(), v1::FLOW_ORIGIN_CONFIG);
  EXPECT_EQ(flows.flows(1).name(), "stream1");
  EXPECT_EQ(flows.flows(1).match().udp_dst().first(), 4097u);

  v1::ListSessionsResponse sessions;
  ASSERT_TRUE(stub_->ListSessions(ctx().get(), {}, &sessions).ok());
}

TEST_F(ControlApiTest, FlowsAreCreatedListedAndDeleted) {
  if (!is_root()) GTEST_SKIP() << "needs the admin role (root)";
  v1::Flow created;
  ASSERT_TRUE(stub_->CreateFlow(ctx().get(), flow_request("api0", 6000, 6010), &created).ok());
  EXPECT_EQ(created.queue(), "rx0");  // defaulted to the first RX queue
  EXPECT_EQ(created.origin(), v1::FLOW_ORIGIN_API);
  EXPECT_EQ(created.id(), 2u);  // 0 and 1 belong to stream0 and stream1

  v1::ListFlowsResponse flows;
  ASSERT_TRUE(stub_->ListFlows(ctx().get(), {}, &flows).ok());
  bool found = false;
  for (const auto& f : flows.flows())
    found |= f.name() == "api0" && f.match().udp_dst().last() == 6010;
  EXPECT_TRUE(found);

  v1::DeleteFlowRequest del;
  del.set_name("api0");
  v1::DeleteFlowResponse resp;
  ASSERT_TRUE(stub_->DeleteFlow(ctx().get(), del, &resp).ok());
  auto again = stub_->DeleteFlow(ctx().get(), del, &resp);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(again.error_message(), "no flow named \"api0\"");
}

TEST_F(ControlApiTest, BadRequestsSayWhatIsWrong) {
  if (!is_root()) GTEST_SKIP() << "needs the admin role (root)";
  v1::Flow out;
  auto s = stub_->CreateFlow(ctx().get(), flow_request("dup", 4096, 4096), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(s.error_message(),
            "match udp_dst=4096 overlaps flow \"stream0\" (udp_dst=4096) on interface \"lo\": a "
            "packet could belong to both");

  s = stub_->CreateFlow(ctx().get(), flow_request("stream0", 7000, 7000), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(s.error_message(), "a flow named \"stream0\" already exists");

  s = stub_->CreateFlow(ctx().get(), flow_request("range", 7010, 7000), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "match.udp_dst: a port range runs from low to high (7010 > 7000)");

  auto req = flow_request("noitf", 7000, 7000);
  req.set_interface("eth9");
  s = stub_->CreateFlow(ctx().get(), req, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "no interface named \"eth9\" (interfaces: lo)");

  req = flow_request("noq", 7000, 7000);
  req.set_queue("tx0");  // a TX queue cannot receive a flow
  s = stub_->CreateFlow(ctx().get(), req, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "interface \"lo\" has no RX queue named \"tx0\" (RX queues: rx0)");

  req = flow_request("bad/name", 7000, 7000);
  s = stub_->CreateFlow(ctx().get(), req, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::CreateFlowRequest empty;
  empty.set_name("nomatch");
  empty.set_interface("lo");
  s = stub_->CreateFlow(ctx().get(), empty, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  req = flow_request("ip", 7000, 7000);
  req.mutable_match()->mutable_ipv4_dst()->set_address("10.0.0.1");
  req.mutable_match()->mutable_ipv4_dst()->set_prefix_length(24);
  s = stub_->CreateFlow(ctx().get(), req, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "match.ipv4_dst: expected an IPv4 address or prefix like 10.0.0.0/24, got "
            "\"10.0.0.1/24\" (host bits set after the prefix)");

  v1::AttachRequest attach;
  attach.set_flow("stream0");
  attach.set_gpu(true);
  attach.set_compact(true);
  v1::AttachResponse attached;
  s = stub_->Attach(ctx().get(), attach, &attached);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "compact is for RX rings in host memory (not gpu, not tx_queue)");
}

TEST_F(ControlApiTest, HealthServiceReportsServing) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckResponse resp;
  ASSERT_TRUE(health->Check(ctx().get(), {}, &resp).ok());
  EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(ControlApiTest, ReflectionListsTheControlService) {
  auto reflection = grpc::reflection::v1alpha::ServerReflection::NewStub(channel_);
  auto c = ctx();
  auto stream = reflection->ServerReflectionInfo(c.get());
  grpc::reflection::v1alpha::ServerReflectionRequest req;
  req.set_list_services("");
  ASSERT_TRUE(stream->Write(req));
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  stream->WritesDone();
  std::vector<std::string> names;
  for (const auto& s : resp.list_services_response().service())
    names.push_back(s.name());
  EXPECT_NE(std::find(names.begin(), names.end(), "daqiri.v1.Control"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "grpc.health.v1.Health"), names.end());
}

// A channel with a connection of its own (gRPC shares one per target otherwise).
std::shared_ptr<grpc::Channel> own_channel(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args);
}

grpc::StatusCode info_call(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::Info info;
  return v1::Control::NewStub(channel)->GetInfo(&c, {}, &info).error_code();
}

// One user cannot hold every control connection: past control_connections_per_user the next
// is closed at once (its calls fail UNAVAILABLE, said once in the log), and a connection
// closed makes room again.
TEST(ControlLimits, ConnectionsPastTheUsersLimitAreClosed) {
  TempDir dir;
  std::string socket = dir.file("d.sock");
  std::string config =
      dir.write("d.yaml", test_config(socket, "  limits: {control_connections_per_user: 2}\n"));
  DaemonProcess daemon(dir, {"--config", config});
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  auto a = own_channel(socket);
  auto b = own_channel(socket);
  ASSERT_EQ(info_call(a), grpc::StatusCode::OK);
  ASSERT_EQ(info_call(b), grpc::StatusCode::OK);
  EXPECT_EQ(info_call(own_channel(socket)), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(info_call(own_channel(socket)), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(info_call(a), grpc::StatusCode::OK);  // what it holds keeps working
  b.reset();
  bool room = false;  // once the daemon has seen b's connection close
  for (int i = 0; i < 50 && !room; ++i) {
    room = info_call(own_channel(socket)) == grpc::StatusCode::OK;
    if (!room) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(room);
  std::string log = daemon.log();
  std::string line = "refused: uid " + std::to_string(::getuid());
  size_t first = log.find(line);
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_NE(log.find("holds 2 connections, the most daemon.limits.control_connections_per_user "
                     "allows"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find(line, first + 1), std::string::npos) << log;  // once a spell
  EXPECT_EQ(daemon.stop(), 0) << daemon.log();
}

}  // namespace
}  // namespace daqiri::test
