// One DPDK port: found by PCI address or vdev name, configured from its interface (MTU,
// promiscuous mode, flow isolation, RX/TX queues on client-shared pools), started; stopped and
// closed on destruction, before its queues' pools go.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/dpdk/dpdk_backend.hpp"
#include "backends/dpdk/dpdk_rx_queue.hpp"
#include "backends/dpdk/dpdk_tx_queue.hpp"
#include "backends/dpdk/hardware_steering.hpp"
#include "config/config.hpp"

namespace daqiri::backends::dpdk {

class Port {
 public:
  static Result<std::unique_ptr<Port>> open(const config::InterfaceConfig& itf,
                                            const config::Config& c,
                                            const DpdkBackend::DevicePools& device_pools);
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] uint16_t id() const { return id_; }
  [[nodiscard]] DpdkRxQueue* rx(const std::string& queue) const;
  [[nodiscard]] DpdkTxQueue* tx(const std::string& queue) const;
  [[nodiscard]] const std::map<std::string, std::unique_ptr<DpdkRxQueue>>& rx_queues() const {
    return rx_;
  }
  [[nodiscard]] const std::map<std::string, std::unique_ptr<DpdkTxQueue>>& tx_queues() const {
    return tx_;
  }
  // Its flex items in the NIC's flex parser (made by the flows that match them).
  [[nodiscard]] FlexItems& flex_items() const { return *flex_; }
  [[nodiscard]] dataplane::NicStats stats() const;
  [[nodiscard]] std::string link_state() const;

 private:
  // accurate_send, once the port started: each timed TX queue's frames go to the NIC's send
  // scheduling (mbuf field `offset`, flag `flag`; -1: the PMD offers none) where the NIC's clock
  // can be read, else its poller holds them. Logs which.
  void schedule_sends(const config::InterfaceConfig& itf, int offset, uint64_t flag,
                      const std::string& where);
  // The interface's TX flows as egress rules, once the port started: all in the NIC (its raw
  // TX queues then send frames as written), or none (the poller encapsulates). Logs which.
  void encapsulate_in_nic(const config::InterfaceConfig& itf, const std::string& where);
  Port(std::string name, uint16_t id, std::string driver)
      : name_(std::move(name)),
        id_(id),
        driver_(std::move(driver)),
        flex_(std::make_unique<FlexItems>(id)) {}
  std::string name_;
  uint16_t id_;
  std::string driver_;
  bool started_ = false;
  std::map<std::string, std::unique_ptr<DpdkRxQueue>> rx_;
  std::map<std::string, std::unique_ptr<DpdkTxQueue>> tx_;
  std::vector<std::unique_ptr<HardwareRule>> egress_;  // the TX flows' rules, destroyed first
  std::unique_ptr<FlexItems> flex_;                    // released before the port closes
};

}  // namespace daqiri::backends::dpdk
