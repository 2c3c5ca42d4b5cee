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
#include "dataplane/poller.hpp"
#include "dataplane/rx_flow_task.hpp"
#include "dataplane/tx_attachment.hpp"

namespace daqiri::backends::dpdk {

struct PortStats {
  std::string interface;
  std::string driver;
  bool link_up = false;
  uint32_t speed_mbps = 0;
  uint64_t rx_packets = 0, rx_bytes = 0, rx_missed = 0, rx_errors = 0, rx_nombuf = 0;
  uint64_t tx_packets = 0, tx_bytes = 0, tx_errors = 0;
  std::vector<std::pair<std::string, uint64_t>> xstats;
};

struct QueueStats {
  std::string interface;
  std::string queue;
  bool rx = true;
  uint64_t packets = 0, bytes = 0;
  uint64_t unmatched = 0, copied = 0, no_buffer = 0, truncated = 0;  // RX
  uint64_t no_header = 0, oversize = 0;                              // TX
  uint32_t on_loan = 0;                                              // RX
};

class Eal;
class Port;

class DpdkBackend {
 public:
  // Starts the EAL and every dpdk interface's port (queues set up, started).
  static Result<std::unique_ptr<DpdkBackend>> start(const config::Config& c);
  ~DpdkBackend();
  DpdkBackend(const DpdkBackend&) = delete;
  DpdkBackend& operator=(const DpdkBackend&) = delete;

  // For Poller::start: gives each poller thread an lcore id.
  static void register_thread();

  // "interface/queue" -> its poll task (null if not a DPDK queue).
  [[nodiscard]] dataplane::PollTask* rx_task(const std::string& key) const;
  [[nodiscard]] dataplane::PollTask* tx_task(const std::string& key) const;

  // A flow steered on its RX queue: in the NIC when rte_flow takes the rule, always by the
  // queue's poller. The flow's pool is its queue's.
  Result<std::unique_ptr<dataplane::RxFlowTask>> add_flow(const core::Flow& flow,
                                                          const dataplane::Epoch& epoch);
  void remove_flow(dataplane::RxFlowTask* flow, const dataplane::Epoch& epoch);

  Result<> add_tx(const std::string& key, dataplane::TxAttachment* a,
                  const dataplane::Epoch& epoch);
  void remove_tx(const std::string& key, dataplane::TxAttachment* a, const dataplane::Epoch& epoch);

  // "up 10000 Mbps", "down", per interface.
  [[nodiscard]] std::string link_state(const std::string& interface) const;
  // Interfaces whose PMD does not fill our buffers ("copy"), or "zero-copy", per RX queue.
  [[nodiscard]] std::string delivery(const std::string& key) const;
  [[nodiscard]] std::vector<PortStats> port_stats() const;
  [[nodiscard]] std::vector<QueueStats> queue_stats() const;

 private:
  DpdkBackend() = default;
  std::unique_ptr<Eal> eal_;  // first made, last gone
  std::vector<std::unique_ptr<Port>> ports_;
};

}  // namespace daqiri::backends::dpdk
