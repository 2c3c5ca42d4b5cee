// One RX queue of an xdp interface: the RX half of the AF_XDP socket bound to the NIC queue,
// whose UMEM holds the queue's client-shared pool. The flow filter (flow_filter.bpf.c) redirects
// the frames of the queue's flows here; the kernel writes them into buffers this queue posted on
// the fill ring (zero-copy where the driver DMAs there itself, else the kernel copies), and the
// poller lends each to the clients of the flow it matches, as DpdkRxQueue does: the flows share the
// queue's pool (isolation is per queue). A buffer goes back on the fill ring once every client it
// was lent to has released it. The socket's fd wakes the parked poller when frames arrive; the
// poller of a queue with busy_poll spins instead and drives the kernel's preferred busy polling.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "backends/xdp/xsk_socket.hpp"
#include "core/flow_table.hpp"
#include "core/packet_fields.hpp"
#include "dataplane/nic_stats.hpp"
#include "dataplane/poller.hpp"
#include "dataplane/rx_flow_task.hpp"
#include "dataplane/snapshot.hpp"
#include "memory/buffer_pool.hpp"

namespace daqiri::backends::xdp {

class XskRxQueue;

// A flow on an xdp queue: its fan-out and counters; its frames are in the queue's pool.
class XdpRxFlow final : public dataplane::RxFlowTask {
 public:
  XdpRxFlow(core::Flow flow, XskRxQueue& queue, uint32_t slot)
      : flow_(std::move(flow)), queue_(queue), slot_(slot) {}
  bool poll() override { return false; }  // the queue polls
  [[nodiscard]] const core::Flow& flow() const override { return flow_; }
  [[nodiscard]] std::vector<int> fds() const override { return {}; }
  [[nodiscard]] memory::BufferPool& pool() override;
  [[nodiscard]] bool shares_pool() const override { return true; }  // the queue's
  [[nodiscard]] dataplane::RxFanout& fanout() override { return fanout_; }
  // Its rule in the interface's flow filter.
  [[nodiscard]] uint32_t slot() const { return slot_; }
  [[nodiscard]] XskRxQueue& queue() const { return queue_; }

 private:
  core::Flow flow_;
  XskRxQueue& queue_;
  uint32_t slot_;
  dataplane::RxFanout fanout_;
};

struct XskQueueCounters {
  std::atomic<uint64_t> packets{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> unmatched{0};  // redirected here, but no flow of the queue took it
  std::atomic<uint64_t> wakeups{0};    // the kernel asked for a syscall to refill (need_wakeup)
  std::atomic<uint32_t> on_loan{0};
  std::atomic<uint32_t> posted{0};  // buffers on the fill ring and in the kernel's hands
};

struct XskQueueSetup {
  uint32_t ring_size = 0;  // the fill and RX rings' (a power of two)
  uint32_t batch = 0;
  bool busy_poll = false;  // the queue's busy_poll: its poller spins
};

class XskRxQueue final : public dataplane::PollTask {
 public:
  static constexpr uint32_t kMaxBatch = 512;
  // The RX half of `socket` (which outlives it): the fill ring filled from its pool.
  XskRxQueue(XskSocket& socket, const XskQueueSetup& setup);
  XskRxQueue(const XskRxQueue&) = delete;
  XskRxQueue& operator=(const XskRxQueue&) = delete;

  bool poll() override;
  // While the fill ring is short of buffers that clients hold, or a flow waits for a client's
  // releases: nothing else says when they come back.
  [[nodiscard]] bool needs_timed_wakeup() const override { return starved_ || waiting_; }
  bool arm_wakeups() override;
  void disarm_wakeups() override;
  // The socket stays readable while a flow waits for releases: the poller would spin on it.
  [[nodiscard]] bool wakes_on_fds() const override { return !waiting_; }

  [[nodiscard]] memory::BufferPool& pool() { return pool_; }
  [[nodiscard]] const XskSocket& socket() const { return socket_; }
  XskQueueCounters counters;
  // The queue's own counters; the socket's (no_buffer among them) are the caller's to add.
  [[nodiscard]] dataplane::NicQueueStats stats(const std::string& name) const;

  // Control side (callers serialise); `epoch` is the owning poller's.
  void add(XdpRxFlow* flow, const dataplane::Epoch& epoch);
  dataplane::Grace remove(XdpRxFlow* flow, const dataplane::Epoch& epoch);

 private:
  using Flows = std::vector<XdpRxFlow*>;
  // Tops the fill ring up to ring_size_ buffers in the kernel's hands, from the pool's free
  // ones (what clients released, oldest first).
  void refill();
  [[nodiscard]] static XdpRxFlow* steer(const Flows& flows, const core::PacketFields& fields);
  void publish_on_loan(const Flows& flows);

  XskSocket& socket_;
  memory::BufferPool& pool_;  // the socket's RX pool
  xsk_ring_prod& fill_;
  xsk_ring_cons& rx_;
  uint64_t rx_base_;
  uint32_t ring_size_;
  uint32_t batch_;
  bool busy_poll_;  // the queue's poller spins (the data plane's doing), driving the NAPI too
  bool starved_ = false;
  bool waiting_ = false;
  uint32_t posted_ = 0;  // buffers given to the kernel (fill ring, or received, not yet read)
  struct {
    uint32_t on_loan = UINT32_MAX;
    uint32_t posted = 0;
    const Flows* flows = nullptr;
  } published_;  // what publish_on_loan() stored last
  dataplane::Published<Flows> flows_;
};

}  // namespace daqiri::backends::xdp
