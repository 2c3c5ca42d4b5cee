// The DPDK backend as the data plane sees it: the EAL, the ports named by dpdk interfaces, and
// the poll tasks of their queues. Free of DPDK headers (libdpdk's compile flags stay inside
// this folder's library). Control side only; the tasks it returns run on pollers.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "core/flow_table.hpp"
#include "dataplane/nic_stats.hpp"
#include "dataplane/poller.hpp"
#include "dataplane/rx_flow_task.hpp"
#include "dataplane/tx_attachment.hpp"
#include "memory/device_memory.hpp"

namespace daqiri::backends::dpdk {

class Eal;
class Port;
class DpdkRxQueue;
class DpdkTxQueue;

class DpdkBackend {
 public:
  // GPU memory for the pools of gpudirect RX queues, by "interface/queue".
  using DevicePools = std::map<std::string, memory::DeviceMemory>;
  // Starts the EAL and every dpdk interface's port (queues set up, started).
  static Result<std::unique_ptr<DpdkBackend>> start(const config::Config& c,
                                                    const DevicePools& device_pools);
  ~DpdkBackend();
  DpdkBackend(const DpdkBackend&) = delete;
  DpdkBackend& operator=(const DpdkBackend&) = delete;

  // For Poller::start: gives each poller thread an lcore id.
  static void register_thread();

  // A queue's poll task (null if not a DPDK queue).
  [[nodiscard]] dataplane::PollTask* rx_task(const std::string& interface,
                                             const std::string& queue) const;
  [[nodiscard]] dataplane::PollTask* tx_task(const std::string& interface,
                                             const std::string& queue) const;

  // A flow steered on its RX queue: in the NIC when rte_flow takes the rule, always by the
  // queue's poller. The flow's pool is its queue's. On a gpudirect queue, whose frames the
  // poller cannot read, only a catch-all or a flow the NIC marks is taken.
  Result<std::unique_ptr<dataplane::RxFlowTask>> add_flow(const core::Flow& flow,
                                                          const dataplane::Epoch& epoch);
  dataplane::Grace remove_flow(dataplane::RxFlowTask* flow, const dataplane::Epoch& epoch);

  Result<> add_tx(const std::string& interface, const std::string& queue,
                  dataplane::TxAttachment* a, const dataplane::Epoch& epoch);
  dataplane::Grace remove_tx(const std::string& interface, const std::string& queue,
                             dataplane::TxAttachment* a, const dataplane::Epoch& epoch);

  // "up 10000 Mbps", "down", per interface.
  [[nodiscard]] std::string link_state(const std::string& interface) const;
  // Whether the NIC splits the RX queue's frames (header bytes beside GPU rings, the rest in
  // the queue's pool): then no whole frame is anywhere a host client could read it.
  [[nodiscard]] bool nic_splits(const std::string& interface, const std::string& queue) const;
  // "zero-copy", or "copy (...)" once the RX queue's PMD handed over buffers not of its pool.
  [[nodiscard]] std::string delivery(const std::string& interface, const std::string& queue) const;
  [[nodiscard]] std::vector<dataplane::NicStats> nic_stats() const;

 private:
  DpdkBackend() = default;
  [[nodiscard]] const Port* port(const std::string& interface) const;
  [[nodiscard]] DpdkRxQueue* rx_queue(const std::string& interface, const std::string& q) const;
  [[nodiscard]] DpdkTxQueue* tx_queue(const std::string& interface, const std::string& q) const;
  std::unique_ptr<Eal> eal_;  // first made, last gone
  std::vector<std::unique_ptr<Port>> ports_;
};

}  // namespace daqiri::backends::dpdk
