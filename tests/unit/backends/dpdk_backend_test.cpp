// The DPDK backend's pure parts: the EAL command line it derives from the configuration, and
// where a flow without an rte_flow rule can see frames. Built only where DPDK is.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/dpdk/eal_arguments.hpp"
#include "backends/dpdk/software_reach.hpp"
#include "config/config_loader.hpp"
#include "config/dpdk_test_config.hpp"

namespace daqiri::backends::dpdk {
namespace {

using config::dpdk_config;
using config::facts;

TEST(EalArguments, FollowTheInterfaces) {
  config::Diagnostics diags;
  auto c =
      config::parse_config(dpdk_config("net_pcap0,rx_pcap=/x.pcap", 2048, "",
                                       "dpdk: {hugepages: false, memory_mb: 128, main_core: 2, "
                                       "eal_args: [--log-level=pmd:debug]}\n"),
                           "t.yaml", facts(), diags);
  ASSERT_TRUE(c.has_value()) << diags.render();
  auto args = eal_arguments(*c, "daqirid-test");
  auto has = [&args](const std::vector<std::string>& seq) {
    return std::search(args.begin(), args.end(), seq.begin(), seq.end()) != args.end();
  };
  EXPECT_TRUE(has({"--file-prefix=daqirid-test"}));
  EXPECT_TRUE(has({"-l", "2", "--main-lcore", "2", "-m", "128"}));
  EXPECT_TRUE(has({"--no-huge", "--no-shconf"}));
  EXPECT_TRUE(has({"--no-pci"}));
  EXPECT_TRUE(has({"--vdev", "net_pcap0,rx_pcap=/x.pcap"}));
  EXPECT_EQ(args.back(), "--log-level=pmd:debug");

  auto pci = config::parse_config(dpdk_config("0000:3b:00.0"), "t.yaml", facts(), diags);
  ASSERT_TRUE(pci.has_value()) << diags.render();
  args = eal_arguments(*pci, "p");
  EXPECT_TRUE(has({"-a", "0000:3b:00.0"}));
  EXPECT_TRUE(has({"--in-memory"}));  // hugepages by default, from memfds: no files
  EXPECT_FALSE(has({"--no-pci"}));

  EXPECT_NE(file_prefix_for("/run/daqiri/a.sock"), file_prefix_for("/run/daqiri/b.sock"));
  EXPECT_EQ(file_prefix_for("/run/daqiri/a.sock"), file_prefix_for("/run/daqiri/a.sock"));
}

// A flow without an rte_flow rule on an isolated port gets nothing (the daemon refuses it); on a
// NIC's other queues it may get nothing (the daemon warns); a vdev picks its queues itself.
TEST(SoftwareSteering, SaysWhereAFlowWithoutARuleCanSeeFrames) {
  EXPECT_EQ(software_reach(true, true, 0), SoftwareReach::kIsolated);
  EXPECT_EQ(software_reach(true, false, 2), SoftwareReach::kIsolated);
  EXPECT_EQ(software_reach(false, true, 1), SoftwareReach::kNotFirstQueue);
  EXPECT_EQ(software_reach(false, true, 0), SoftwareReach::kReaches);
  EXPECT_EQ(software_reach(false, false, 3), SoftwareReach::kReaches);
}

// A queue's one flow takes its frames unread when no other frame can be on the queue: it is a
// catch-all, or the NIC steers it where only rules deliver (an isolated port, a NIC's other
// queues). A rule on a queue where frames without one land too (a vdev, a NIC's first queue)
// is not enough, nor a software-steered flow anywhere.
TEST(SoftwareSteering, SaysWhenAQueuesOneFlowTakesEveryFrameUnread) {
  for (auto reach :
       {SoftwareReach::kReaches, SoftwareReach::kIsolated, SoftwareReach::kNotFirstQueue}) {
    EXPECT_TRUE(takes_every_frame(true, false, reach));
    EXPECT_FALSE(takes_every_frame(false, false, reach));
  }
  EXPECT_TRUE(takes_every_frame(false, true, SoftwareReach::kIsolated));
  EXPECT_TRUE(takes_every_frame(false, true, SoftwareReach::kNotFirstQueue));
  EXPECT_FALSE(takes_every_frame(false, true, SoftwareReach::kReaches));
}
}  // namespace
}  // namespace daqiri::backends::dpdk
