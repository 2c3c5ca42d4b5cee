// The DPDK backend: the EAL, the ports named by dpdk interfaces, and the poll tasks of their
// queues. Free of DPDK headers (libdpdk's compile flags stay inside this folder's library).
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.hpp"

namespace daqiri::backends::dpdk {

class Eal;
class Port;
class DpdkRxQueue;
class DpdkTxQueue;
class HardwareRule;
struct RssGroup;

class DpdkBackend final : public Backend {
 public:
  // GPU memory for the pools of gpudirect RX queues, by "interface/queue".
  using DevicePools = std::map<std::string, memory::DeviceMemory>;
  // Starts the EAL and every dpdk interface's port (queues set up, started).
  static Result<std::unique_ptr<Backend>> open(const BackendContext& context);
  ~DpdkBackend() override;
  DpdkBackend(const DpdkBackend&) = delete;
  DpdkBackend& operator=(const DpdkBackend&) = delete;

  // Gives each poller thread an lcore id.
  [[nodiscard]] std::function<void()> thread_setup() const override;
  Result<> open_rx_queue(const QueueHome& home) override;
  Result<dataplane::TxQueueTask*> open_tx_queue(const QueueHome& home) override;
  // A flow steered on its RX queue: in the NIC when rte_flow takes the rule, always by the
  // queue's poller. The flow's pool is its queue's. On a gpudirect queue, whose frames the
  // poller cannot read, only a catch-all or a flow the NIC marks is taken. An RSS flow comes
  // once per queue, in its queues' order; the first makes the RssGroup the others join.
  Result<std::unique_ptr<dataplane::RxFlowTask>> add_flow(const core::Flow& flow,
                                                          const QueueHome& home,
                                                          memory::PageArena* arena) override;
  dataplane::Grace remove_flow(dataplane::RxFlowTask* flow, const QueueHome& home) override;
  // The NIC keeps a descriptor ring of the pool posted; nic_splits: headers beside GPU rings,
  // the rest in the queue's pool.
  [[nodiscard]] QueueTraits traits(const QueueHome& home) const override;
  // "zero-copy", or "copy (...)" once the RX queue's PMD handed over buffers not of its pool.
  [[nodiscard]] std::string delivery(const QueueHome& home) const override;
  [[nodiscard]] std::string link_state(const config::InterfaceConfig& itf) const override;
  [[nodiscard]] std::vector<dataplane::NicStats> nic_stats() const override;

 private:
  explicit DpdkBackend(const BackendContext& context);
  [[nodiscard]] const Port* port(const std::string& interface) const;
  [[nodiscard]] DpdkRxQueue* rx_queue(const std::string& interface, const std::string& q) const;
  [[nodiscard]] DpdkTxQueue* tx_queue(const std::string& interface, const std::string& q) const;
  // The flow's rte_flow rule to `queues` (none asked for when empty), or null when the NIC
  // takes none and the queue's poller can steer the flow itself; an error says why it cannot.
  Result<std::unique_ptr<HardwareRule>> steer(const core::Flow& flow, DpdkRxQueue& queue,
                                              std::span<const uint16_t> queues);
  // The RSS group of a flow's member, the `index`th of its queues: made by the first, joined
  // by the others.
  Result<std::shared_ptr<RssGroup>> rss_group(const core::Flow& flow, size_t index,
                                              const QueueHome& home);
  std::unique_ptr<Eal> eal_;  // first made, last gone
  std::vector<std::unique_ptr<Port>> ports_;
  std::map<std::string, std::weak_ptr<RssGroup>> rss_groups_;  // by flow name
  uint64_t rss_serials_ = 0;                                   // RssGroup::serial's last
};

}  // namespace daqiri::backends::dpdk
