// One kind of interface (socket, dpdk, rdma, xdp) as the data plane drives it. Each backend lives
// in daemon/backends/<name>/, implements this interface and nothing else the data plane sees, and
// is made by registry.cpp, the one file that knows which backends were built. Everything here
// runs on control threads under the data plane's lock; what runs on pollers is the tasks a
// backend hands out (RxFlowTask, TxQueueTask, and poll tasks of its own).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/flow_table.hpp"
#include "dataplane/nic_stats.hpp"
#include "dataplane/poller.hpp"
#include "dataplane/rx_flow_task.hpp"
#include "dataplane/tx_queue_task.hpp"
#include "memory/device_memory.hpp"
#include "memory/page_arena.hpp"

namespace daqiri::backends {

// A configured queue, placed on its poller.
struct QueueHome {
  dataplane::Poller* poller = nullptr;
  const config::InterfaceConfig* itf = nullptr;
  const config::QueueConfig* queue = nullptr;
  // The pools' geometry: the queue's region, or with header-data split its second (payload).
  const config::MemoryRegionConfig* region = nullptr;
  // Header-data split on RX, or on TX from a gpudirect region: the header region.
  const config::MemoryRegionConfig* headers = nullptr;
  [[nodiscard]] std::string key() const { return itf->name + "/" + queue->name; }
};

// What the data plane lends a backend for its life.
struct BackendContext {
  const config::Config& config;
  // A poller by name, or the one pinned to `core` when core >= 0 (queues on a core share it).
  std::function<Result<dataplane::Poller*>(const std::string& name, int core)> poller_for;
  // GPU memory for a gpudirect region's pools; an error in a daqirid built without CUDA.
  std::function<Result<memory::DeviceMemory>(const config::MemoryRegionConfig&)> device_memory;
};

// What a queue's flows and clients may count on.
struct QueueTraits {
  // Of a flow's pool, the buffers the backend keeps posted (a NIC's descriptor ring, RECVs)
  // and a poll takes besides: not the clients' to hold.
  uint32_t posted_buffers = 0;
  // The NIC splits frames (headers beside GPU rings): no whole frame reaches host memory.
  bool nic_splits = false;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Runs first on every poller thread, before its first poll (DPDK: an lcore id). Empty: none.
  [[nodiscard]] virtual std::function<void()> thread_setup() const { return {}; }
  // The poller a queue runs on. By default its own, or its core's when pinned.
  virtual Result<dataplane::Poller*> queue_poller(const config::InterfaceConfig& itf,
                                                  const config::QueueConfig& q, bool rx);
  // An RX queue on its poller; its flows come later (add_flow).
  virtual Result<> open_rx_queue(const QueueHome& /*home*/) { return {}; }
  // A TX queue on its poller: the task its attachments are handed to (owned by the backend).
  virtual Result<dataplane::TxQueueTask*> open_tx_queue(const QueueHome& home) = 0;

  // A flow on its RX queue, received from the next poll on. `arena`: the slab its pool takes
  // when the region shares pages (null otherwise).
  virtual Result<std::unique_ptr<dataplane::RxFlowTask>> add_flow(const core::Flow& flow,
                                                                  const QueueHome& home,
                                                                  memory::PageArena* arena) = 0;
  // Removal in steps, so that the data plane bounds the wait between them: close_flow asks the
  // poller to let go (an RDMA flow's connections close, giving back what they held);
  // flow_released says whether it has; remove_flow then takes the flow off its poller, and its
  // Grace says when the flow may be freed.
  virtual void close_flow(dataplane::RxFlowTask& /*flow*/, const QueueHome& /*home*/) {}
  [[nodiscard]] virtual bool flow_released(const dataplane::RxFlowTask& /*flow*/) const {
    return true;
  }
  virtual dataplane::Grace remove_flow(dataplane::RxFlowTask* flow, const QueueHome& home) = 0;

  [[nodiscard]] virtual QueueTraits traits(const QueueHome& home) const = 0;
  // How a queue's clients get frames: "zero-copy", "copy (...)", "socket", ...
  [[nodiscard]] virtual std::string delivery(const QueueHome& home) const = 0;
  // "up 10000 Mbps", "down", "2 connections"; "configured" where the backend cannot tell.
  [[nodiscard]] virtual std::string link_state(const config::InterfaceConfig& /*itf*/) const {
    return "configured";
  }
  [[nodiscard]] virtual std::vector<dataplane::NicStats> nic_stats() const { return {}; }

  // Teardown, with every poller stopped: gives back what the backend holds of flows' pools and
  // attachments' buffers (queue pairs), which are freed next. The backend goes after them.
  virtual void release_buffers() {}

 protected:
  explicit Backend(BackendContext context) : context_(std::move(context)) {}
  BackendContext context_;
};

}  // namespace daqiri::backends
