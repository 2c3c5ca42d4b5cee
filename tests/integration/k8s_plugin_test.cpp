// daqiri-k8s-plugin against the kubelet side of the device-plugin API (v1beta1), spoken by the
// test over the real Unix sockets: a Registration server on kubelet.sock that records what
// registers, and a DevicePlugin client on each plugin's socket, as the kubelet's device
// manager calls it. No kubelet runs here; the daemon and the plugin are the real programs.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <vector>

#include "dataplane_fixture.hpp"
#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"

namespace daqiri::test {
namespace {

using ::testing::HasSubstr;

// The kubelet's Registration service: each RegisterRequest kept, in order.
class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  explicit FakeKubelet(const std::string& socket) {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~FakeKubelet() override { server_->Shutdown(); }
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    std::lock_guard lock(mutex_);
    registered_.push_back(*req);
    cv_.notify_all();
    return grpc::Status::OK;
  }
  // The `n`th registration of `resource` (1: the first), within 10 s.
  std::optional<v1beta1::RegisterRequest> wait_for(const std::string& resource, int n = 1) {
    std::unique_lock lock(mutex_);
    std::optional<v1beta1::RegisterRequest> found;
    cv_.wait_for(lock, 10s, [&] {
      int seen = 0;
      for (const auto& r : registered_) {
        if (r.resource_name() == resource && ++seen == n) found = r;
      }
      return found.has_value();
    });
    return found;
  }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<v1beta1::RegisterRequest> registered_;
};

class K8sPluginTest : public DataPlaneTest {
 protected:
  void SetUp() override {
    start();
    if (HasFatalFailure()) return;
    plugins_ = dir_.file("device-plugins");
    std::filesystem::create_directories(plugins_);
    kubelet_ = std::make_unique<FakeKubelet>(plugins_ + "/kubelet.sock");
    plugin_ = std::make_unique<Spawned>(
        dir_, std::vector<std::string>{k8s_plugin_path(), "--socket", socket_, "--plugin-dir",
                                       plugins_, "--poll-ms", "100"});
  }
  void TearDown() override {
    plugin_.reset();
    kubelet_.reset();
    DataPlaneTest::TearDown();
  }
  std::unique_ptr<v1beta1::DevicePlugin::Stub> plugin(const v1beta1::RegisterRequest& r) {
    return v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
        "unix:" + plugins_ + "/" + r.endpoint(), grpc::InsecureChannelCredentials()));
  }
  CommandResult ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {ctl_path(), "--socket", socket_});
    return run(args);
  }

  std::string plugins_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<Spawned> plugin_;
};

// Each flow registers as its own resource, whose 16 devices are holds on it; Allocate hands a
// container the flow's CDI device and, for runtimes without CDI, the same by hand.
TEST_F(K8sPluginTest, AdvertisesEachFlowAndHandsItOutThroughCdi) {
  auto r0 = kubelet_->wait_for("daqiri.io/flow-stream0");
  ASSERT_TRUE(r0) << plugin_->output();
  ASSERT_TRUE(kubelet_->wait_for("daqiri.io/flow-stream1")) << plugin_->output();
  EXPECT_EQ(r0->version(), "v1beta1");
  EXPECT_EQ(r0->endpoint(), "daqiri-flow-stream0.sock");

  auto stub = plugin(*r0);
  grpc::ClientContext watch;
  auto stream = stub->ListAndWatch(&watch, v1beta1::Empty{});
  v1beta1::ListAndWatchResponse list;
  ASSERT_TRUE(stream->Read(&list));
  ASSERT_EQ(list.devices_size(), 16);
  EXPECT_EQ(list.devices(0).id(), "stream0-0");
  EXPECT_EQ(list.devices(15).id(), "stream0-15");
  for (const auto& d : list.devices())
    EXPECT_EQ(d.health(), "Healthy");
  watch.TryCancel();

  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("stream0-3");
  v1beta1::AllocateResponse resp;
  grpc::ClientContext ctx;
  grpc::Status allocated = stub->Allocate(&ctx, req, &resp);
  ASSERT_TRUE(allocated.ok()) << allocated.error_message() << "\n" << plugin_->output();
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& c = resp.container_responses(0);
  ASSERT_EQ(c.cdi_devices_size(), 1);
  EXPECT_EQ(c.cdi_devices(0).name(), "daqiri.io/flow=stream0");
  EXPECT_EQ(c.envs().at("DAQIRI_FLOW"), "stream0");
  EXPECT_EQ(c.envs().at("DAQIRI_SOCKET"), socket_);
  ASSERT_EQ(c.mounts_size(), 1);
  EXPECT_EQ(c.mounts(0).host_path(), dir_.path().string());
  EXPECT_TRUE(c.mounts(0).read_only());

  // Another flow's device on this resource is not one of its own.
  v1beta1::AllocateRequest wrong;
  wrong.add_container_requests()->add_devices_ids("stream1-0");
  grpc::ClientContext ctx2;
  EXPECT_EQ(stub->Allocate(&ctx2, wrong, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// Each TX queue registers as a resource of max_clients devices (64 by default); Allocate hands
// a container the queue's CDI device and the variables that name it to the client libraries.
TEST_F(K8sPluginTest, AdvertisesEachTxQueueWithItsCapacity) {
  auto r = kubelet_->wait_for("daqiri.io/tx-lo-tx0");
  ASSERT_TRUE(r) << plugin_->output();
  EXPECT_EQ(r->endpoint(), "daqiri-tx-lo-tx0.sock");
  auto stub = plugin(*r);
  grpc::ClientContext watch;
  auto stream = stub->ListAndWatch(&watch, v1beta1::Empty{});
  v1beta1::ListAndWatchResponse list;
  ASSERT_TRUE(stream->Read(&list));
  ASSERT_EQ(list.devices_size(), 64);
  EXPECT_EQ(list.devices(63).id(), "tx.lo.tx0-63");
  watch.TryCancel();

  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("tx.lo.tx0-7");
  v1beta1::AllocateResponse resp;
  grpc::ClientContext ctx;
  grpc::Status allocated = stub->Allocate(&ctx, req, &resp);
  ASSERT_TRUE(allocated.ok()) << allocated.error_message() << "\n" << plugin_->output();
  const auto& c = resp.container_responses(0);
  ASSERT_EQ(c.cdi_devices_size(), 1);
  EXPECT_EQ(c.cdi_devices(0).name(), "daqiri.io/flow=tx.lo.tx0");
  EXPECT_EQ(c.envs().at("DAQIRI_TX_INTERFACE"), "lo");
  EXPECT_EQ(c.envs().at("DAQIRI_TX_QUEUE"), "tx0");
  EXPECT_FALSE(c.envs().contains("DAQIRI_FLOW"));
  // A device past its capacity is none of its own.
  v1beta1::AllocateRequest past;
  past.add_container_requests()->add_devices_ids("tx.lo.tx0-64");
  grpc::ClientContext ctx2;
  EXPECT_EQ(stub->Allocate(&ctx2, past, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// A flow created at runtime becomes a resource; deleted, its devices turn unhealthy on the
// kubelet's open stream, the stream ends and the socket goes. The daemon gone, every device
// is unhealthy.
TEST_F(K8sPluginTest, FollowsTheFlowTableLive) {
  ASSERT_TRUE(kubelet_->wait_for("daqiri.io/flow-stream0")) << plugin_->output();
  ASSERT_EQ(ctl({"flows", "add", "radio", "-i", "lo", "--udp-dst", "5000"}).exit_code, 0);
  auto radio = kubelet_->wait_for("daqiri.io/flow-radio");
  ASSERT_TRUE(radio) << plugin_->output();
  auto stub = plugin(*radio);
  grpc::ClientContext watch;
  auto stream = stub->ListAndWatch(&watch, v1beta1::Empty{});
  v1beta1::ListAndWatchResponse list;
  ASSERT_TRUE(stream->Read(&list));
  EXPECT_EQ(list.devices(0).health(), "Healthy");

  ASSERT_EQ(ctl({"flows", "del", "radio"}).exit_code, 0);
  ASSERT_TRUE(stream->Read(&list)) << plugin_->output();
  EXPECT_EQ(list.devices(0).health(), "Unhealthy");
  while (stream->Read(&list)) {
  }
  (void)stream->Finish();
  EXPECT_FALSE(std::filesystem::exists(plugins_ + "/" + radio->endpoint()));

  auto s0 = kubelet_->wait_for("daqiri.io/flow-stream0");
  auto stub0 = plugin(*s0);
  grpc::ClientContext watch0;
  auto stream0 = stub0->ListAndWatch(&watch0, v1beta1::Empty{});
  ASSERT_TRUE(stream0->Read(&list));
  EXPECT_EQ(list.devices(0).health(), "Healthy");
  EXPECT_EQ(daemon_->stop(), 0);
  daemon_.reset();
  ASSERT_TRUE(stream0->Read(&list)) << plugin_->output();
  EXPECT_EQ(list.devices(0).health(), "Unhealthy");
  watch0.TryCancel();
  EXPECT_THAT(plugin_->output(), HasSubstr("every device unhealthy"));
}

// A restarting kubelet removes the plugins' sockets and listens anew: each resource is served
// and registered again.
TEST_F(K8sPluginTest, RegistersAgainWhenTheKubeletRestarts) {
  auto first = kubelet_->wait_for("daqiri.io/flow-stream0");
  ASSERT_TRUE(first) << plugin_->output();
  kubelet_.reset();
  for (const auto& e : std::filesystem::directory_iterator(plugins_))
    std::filesystem::remove(e.path());
  kubelet_ = std::make_unique<FakeKubelet>(plugins_ + "/kubelet.sock");
  auto again = kubelet_->wait_for("daqiri.io/flow-stream0");
  ASSERT_TRUE(again) << plugin_->output();
  EXPECT_TRUE(std::filesystem::exists(plugins_ + "/" + again->endpoint()));
  EXPECT_TRUE(kubelet_->wait_for("daqiri.io/flow-stream1"));
}

}  // namespace
}  // namespace daqiri::test
