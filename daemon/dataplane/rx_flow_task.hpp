// What the data plane needs of a flow's receive task, whatever the backend: its flow, its pool
// and fan-out, its counters, and the fds that should wake its parked poller.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/flow_table.hpp"
#include "dataplane/clock.hpp"
#include "dataplane/poller.hpp"
#include "dataplane/rx_fanout.hpp"
#include "memory/buffer_pool.hpp"

namespace daqiri::dataplane {

struct FlowCounters {
  std::atomic<uint64_t> packets{0};  // datagrams, or stream chunks
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> no_attachment{0};  // arrived while nobody was attached
  std::atomic<uint64_t> rings_full{0};     // every attached client's ring was full
  std::atomic<uint64_t> filtered{0};       // failed the match's source filters
  std::atomic<uint64_t> truncated{0};      // larger than a buffer
  // Kernel drops, as the socket's drop count (SO_MEMINFO) reports them, split by cause:
  std::atomic<uint64_t> no_buffer{0};    // the flow's pool was empty (clients held it)
  std::atomic<uint64_t> overflow{0};     // the pool had buffers: the poller fell behind
  std::atomic<uint32_t> on_loan{0};      // buffers held by clients, as of the last poll
  std::atomic<uint32_t> connections{0};  // TCP: open streams
  // A reorder's (ReorderBatcher::Counters, published once a poll).
  std::atomic<uint64_t> late{0};
  std::atomic<uint64_t> duplicates{0};
  std::atomic<uint64_t> short_frames{0};
  std::atomic<uint64_t> not_samples{0};
  std::atomic<uint64_t> timed_out{0};
};

// Where a flow's packets are told apart from others: by the poller (or the kernel's socket
// demultiplexing), or by the NIC (rte_flow) before they reach a queue.
enum class Steering { kSoftware, kHardware };

class RxFlowTask : public PollTask {
 public:
  [[nodiscard]] virtual const core::Flow& flow() const = 0;
  [[nodiscard]] virtual std::vector<int> fds() const = 0;
  [[nodiscard]] virtual memory::BufferPool& pool() = 0;
  [[nodiscard]] virtual RxFanout& fanout() = 0;
  // Drops the kernel counted on the flow's sockets (control side; may read /proc).
  [[nodiscard]] virtual uint64_t kernel_drops() const { return 0; }
  [[nodiscard]] virtual Steering steering() const { return Steering::kSoftware; }
  // RDMA: the pool peers WRITE into, delivered as a second region of the flow's attachments.
  [[nodiscard]] virtual memory::BufferPool* remote_window() { return nullptr; }
  // Whether its pool is its queue's, shared with the queue's other flows (DPDK), rather than
  // its own, freed with it.
  [[nodiscard]] virtual bool shares_pool() const { return false; }
  // Whether it is a reorder (its packets are batches; its counters have the reorder's rows).
  [[nodiscard]] virtual bool reorders() const { return false; }
  // Whether its descriptors name connections (`stream`): TCP and RDMA flows.
  [[nodiscard]] virtual bool carries_connections() const { return false; }
  // After an attachment joined or left its fan-out (control side).
  virtual void clients_changed() {}
  FlowCounters counters;

  // A flow that waits for its clients' releases (a full ring under block backpressure, an
  // empty pool) sleeps without its fds, which stay readable, and asks the clients that hold
  // buffers to kick instead (RxFanout::arm_kicks); its sleeps stay timed (needs_timed_wakeup),
  // for a kick lost or never sent.
  bool arm_wakeups() override { return !waits_for_releases() || fanout().arm_kicks(); }
  void disarm_wakeups() override { fanout().disarm_kicks(); }
  [[nodiscard]] bool wakes_on_fds() const override { return !waits_for_releases(); }

 protected:
  // As of the last poll.
  [[nodiscard]] virtual bool waits_for_releases() const { return false; }
};

}  // namespace daqiri::dataplane
