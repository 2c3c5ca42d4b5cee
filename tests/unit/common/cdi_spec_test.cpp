// The CDI spec that hands daqirid's flows to containers: read back as YAML, as a container
// runtime reads it, it has the CDI version and kind, one mount of the socket's folder and the
// socket's variable for every device, a device per flow and TX queue that can be one, and
// `all`.
#include "daqiri/common/cdi_spec.hpp"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>

namespace daqiri::cdi {
namespace {

TEST(CdiSpec, GivesEachFlowADeviceThatNamesItAndTheSocket) {
  Spec spec;
  spec.socket = "/run/daqiri \"x\"/daqiri.sock";
  spec.flows = {"stream0", "radio.ch-1:a", "has space", "all", "-dash"};
  YAML::Node y = YAML::Load(to_yaml(spec));
  EXPECT_EQ(y["cdiVersion"].as<std::string>(), "0.5.0");
  EXPECT_EQ(y["kind"].as<std::string>(), "daqiri.io/flow");
  const YAML::Node edits = y["containerEdits"];
  EXPECT_EQ(edits["env"][0].as<std::string>(), "DAQIRI_SOCKET=/run/daqiri \"x\"/daqiri.sock");
  EXPECT_EQ(edits["mounts"][0]["hostPath"].as<std::string>(), "/run/daqiri \"x\"");
  EXPECT_EQ(edits["mounts"][0]["containerPath"].as<std::string>(), "/run/daqiri \"x\"");
  EXPECT_EQ(edits["mounts"][0]["options"][1].as<std::string>(), "ro");
  EXPECT_FALSE(edits["deviceNodes"]);  // nothing privileged
  EXPECT_FALSE(edits["hooks"]);
  const YAML::Node devices = y["devices"];
  ASSERT_EQ(devices.size(), 3u);  // all, stream0, radio.ch-1:a
  EXPECT_EQ(devices[0]["name"].as<std::string>(), "all");
  EXPECT_EQ(devices[0]["containerEdits"]["env"][0].as<std::string>(), "DAQIRI_FLOW=");
  EXPECT_EQ(devices[1]["name"].as<std::string>(), "stream0");
  EXPECT_EQ(devices[1]["containerEdits"]["env"][0].as<std::string>(), "DAQIRI_FLOW=stream0");
  EXPECT_EQ(devices[2]["name"].as<std::string>(), "radio.ch-1:a");
  EXPECT_FALSE(is_device_name("has space"));
  EXPECT_FALSE(is_device_name("all"));
  EXPECT_FALSE(is_device_name("-dash"));
}

TEST(CdiSpec, GivesEachTxQueueADeviceThatNamesIt) {
  Spec spec;
  spec.socket = "/run/daqiri/daqiri.sock";
  // A flow named as a TX queue's device yields to it; a queue whose names make no device
  // name has none.
  spec.flows = {"stream0", "tx.lo.q0"};
  spec.tx_queues = {{"lo", "q0"}, {"eth 1", "q0"}};
  YAML::Node y = YAML::Load(to_yaml(spec));
  const YAML::Node devices = y["devices"];
  ASSERT_EQ(devices.size(), 3u);  // all, stream0, tx.lo.q0
  EXPECT_EQ(devices[1]["name"].as<std::string>(), "stream0");
  EXPECT_EQ(devices[2]["name"].as<std::string>(), "tx.lo.q0");
  const YAML::Node env = devices[2]["containerEdits"]["env"];
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[0].as<std::string>(), "DAQIRI_TX_INTERFACE=lo");
  EXPECT_EQ(env[1].as<std::string>(), "DAQIRI_TX_QUEUE=q0");
}

TEST(CdiSpec, IsWrittenWholeReadableByAll) {
  auto dir = std::filesystem::temp_directory_path() / ("cdi-test-" + std::to_string(::getpid()));
  std::string path = (dir / "sub" / "daqiri.yaml").string();
  Spec spec;
  spec.socket = "/run/daqiri/daqiri.sock";
  spec.flows = {"a"};
  ASSERT_TRUE(write_spec(path, spec));
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, to_yaml(spec));
  auto perms = std::filesystem::status(path).permissions();
  EXPECT_NE(perms & std::filesystem::perms::others_read, std::filesystem::perms::none);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir / "sub"), {}), 1);  // no temp
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace daqiri::cdi
