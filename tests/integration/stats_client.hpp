// The control API's statistics as the data-plane tests read them: GetStats, retried while a
// restarted daemon's channel reconnects, and waiting until a condition on them holds.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "daqiri/v1/control.grpc.pb.h"

namespace daqiri::test {

// Attachments the pollers deliver to: claimed by their client on the session socket. Wait for
// these, not for Attach, before sending: packets that come between Attach and the claim find
// no one to take them.
inline int claimed(const v1::Stats& s) {
  int n = 0;
  for (const auto& a : s.attachments())
    n += a.claimed() ? 1 : 0;
  return n;
}

// A DPDK port's queue by name, or null.
inline const v1::NicQueueStats* nic_queue(const v1::Stats& s, const std::string& name) {
  for (const auto& n : s.nics()) {
    for (const auto& q : n.queues()) {
      if (q.name() == name) return &q;
    }
  }
  return nullptr;
}

// A flow's counters by name; a failure (and empty counters) when there is none.
inline const v1::FlowStats& flow_stats(const v1::Stats& s, const std::string& name) {
  for (const auto& f : s.flows()) {
    if (f.name() == name) return f;
  }
  static const v1::FlowStats none;
  ADD_FAILURE() << "no flow " << name;
  return none;
}

class StatsClient {
 public:
  explicit StatsClient(const std::string& socket)
      : stub_(v1::Control::NewStub(
            grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()))) {}

  v1::Stats get() {
    using namespace std::chrono_literals;
    v1::Stats s;
    for (int attempt = 0; attempt < 50; ++attempt) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 2s);
      if (stub_->GetStats(&ctx, {}, &s).ok()) return s;
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "GetStats keeps failing";
    return s;
  }

  // How many times the poller named `poller` (e.g. "poll:rx:lo/rx0") has parked; a failure
  // when there is none.
  uint64_t parks(const std::string& poller) {
    v1::Stats s = get();
    for (const auto& p : s.pollers()) {
      if (p.name() == poller) return p.parks();
    }
    ADD_FAILURE() << "no poller " << poller << " in " << s.DebugString();
    return 0;
  }

  // Waits until `pred` holds on fresh stats, up to `timeout`.
  bool eventually(const std::function<bool(const v1::Stats&)>& pred,
                  std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred(get())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

 private:
  std::unique_ptr<v1::Control::Stub> stub_;
};

}  // namespace daqiri::test
