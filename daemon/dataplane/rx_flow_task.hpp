// What the data plane needs of a flow's receive task, whatever the backend: its flow, its pool
// and fan-out, its counters, and the fds that should wake its parked poller.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <vector>

#include "core/flow_table.hpp"
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
  std::atomic<uint64_t> no_buffer{0};      // dropped by the kernel while the flow's pool was empty
  std::atomic<uint32_t> on_loan{0};        // buffers held by clients, as of the last poll
  std::atomic<uint32_t> connections{0};    // TCP: open streams
};

// Receive timestamps: CLOCK_REALTIME through the vDSO, once per batch.
inline uint64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

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
  FlowCounters counters;
};

}  // namespace daqiri::dataplane
