// The fixture of the data-plane tests: daqirid on the test config (socket backend on
// 127.0.0.1, flows stream0 on UDP 4096 and stream1 on 4097), daqiri-ctl tap and daqiri-gen
// as clients and senders, stats through the control API.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daqiri/v1/control.grpc.pb.h"
#include "harness.hpp"
#include "stats_client.hpp"

namespace daqiri::test {

using namespace std::chrono_literals;

class DataPlaneTest : public ::testing::Test {
 protected:
  void start(const std::string& daemon_extra = "") {
    socket_ = dir_.file("d.sock");
    start_config(test_config(socket_, daemon_extra));
  }
  // daqirid on this config text, whose socket is socket_.
  void start_config(const std::string& text) {
    config_ = dir_.write("d.yaml", text);
    daemon_ = std::make_unique<DaemonProcess>(dir_, std::vector<std::string>{"--config", config_});
    ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
    control_.emplace(socket_);
  }
  void TearDown() override {
    if (daemon_) {
      EXPECT_EQ(daemon_->stop(), 0) << daemon_->log();
    }
  }

  std::vector<std::string> tap(const std::string& flow, uint64_t count,
                               std::vector<std::string> extra = {}) {
    std::vector<std::string> a{
        ctl_path(), "--socket", socket_,     "tap", flow, "--count", std::to_string(count),
        "--verify", "--quiet",  "--timeout", "30"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  CommandResult gen(uint16_t port, uint64_t count, uint32_t size, uint32_t rate = 50000) {
    return run({gen_path(), "--dest", "127.0.0.1:" + std::to_string(port), "--size",
                std::to_string(size), "--count", std::to_string(count), "--rate",
                std::to_string(rate)});
  }
  std::vector<std::string> client(std::vector<std::string> args) {
    args.insert(args.begin(), socket_);
    args.insert(args.begin(), test_client_path());
    // the mode goes first: test-client MODE SOCKET ...
    std::swap(args[1], args[2]);
    return args;
  }
  v1::Stats stats() { return control_->get(); }
  const v1::FlowStats* flow_stats(const v1::Stats& s, const std::string& name) {
    for (const auto& f : s.flows()) {
      if (f.name() == name) return &f;
    }
    return nullptr;
  }
  bool eventually(const std::function<bool(const v1::Stats&)>& pred,
                  std::chrono::milliseconds timeout = 5s) {
    return control_->eventually(pred, timeout);
  }
  // Waits until each of `flows` has exactly one client attached.
  bool each_attached(const std::vector<std::string>& flows) {
    return eventually([&](const v1::Stats& s) {
      return std::ranges::all_of(flows, [&](const std::string& f) {
        const v1::FlowStats* fs = flow_stats(s, f);
        return fs != nullptr && fs->attachments() == 1;
      });
    });
  }
  bool healthy() { return run({ctl_path(), "--socket", socket_, "health"}).exit_code == 0; }

  TempDir dir_;
  std::string socket_;
  std::string config_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::optional<StatsClient> control_;
};

}  // namespace daqiri::test
