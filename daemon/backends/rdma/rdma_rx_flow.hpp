// A flow on an RDMA interface: the connections its interface gives it (a server's peers whose
// address the flow matches, or the one connection its `connect` opens) receive into its pool,
// and each SEND that arrives becomes a MESSAGE descriptor naming the connection. With a remote
// window (the queue's region allows rdma_write or rdma_read) peers may also WRITE into, or READ
// from, the window's slots; a WRITE with immediate delivers the slot it names. The interface's
// poll task does all the work on its poller: this object only holds what clients map.
#pragma once

#include <atomic>
#include <memory>
#include <optional>

#include "dataplane/rx_flow_task.hpp"
#include "memory/device_memory.hpp"

namespace daqiri::backends::rdma {

class RdmaRxFlow final : public dataplane::RxFlowTask {
 public:
  // `device`: the pool in that GPU memory instead of a memfd (gpudirect regions).
  static Result<std::unique_ptr<RdmaRxFlow>> create(const core::Flow& flow, uint32_t buf_size,
                                                    uint32_t num_bufs, bool huge,
                                                    memory::PageArena* arena, uint32_t window_slots,
                                                    const memory::DeviceMemory* device);

  bool poll() override { return false; }  // its interface's task polls for it
  [[nodiscard]] const core::Flow& flow() const override { return flow_; }
  [[nodiscard]] bool carries_connections() const override { return true; }
  [[nodiscard]] std::vector<int> fds() const override { return {}; }
  [[nodiscard]] memory::BufferPool& pool() override { return pool_; }
  [[nodiscard]] dataplane::RxFanout& fanout() override { return fanout_; }
  [[nodiscard]] memory::BufferPool* remote_window() override {
    return window_ ? &*window_ : nullptr;
  }

  // Control asks the interface's poller to close the flow's connections; the poller says when
  // it no longer touches the flow.
  std::atomic<bool> closing{false};
  std::atomic<bool> released{false};

 private:
  RdmaRxFlow(core::Flow flow, memory::BufferPool pool, std::optional<memory::BufferPool> window)
      : flow_(std::move(flow)), pool_(std::move(pool)), window_(std::move(window)) {}

  core::Flow flow_;
  memory::BufferPool pool_;
  std::optional<memory::BufferPool> window_;
  dataplane::RxFanout fanout_;
};

}  // namespace daqiri::backends::rdma
