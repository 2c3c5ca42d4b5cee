// The AF_XDP backend: on each xdp interface (a Linux network interface, by name) the daemon's
// flow filter, which takes the packets of the interface's flows into AF_XDP sockets and passes
// everything else to the kernel (ARP, SSH, ping keep working), and an XskRxQueue per RX queue.
// CreateFlow and DeleteFlow write the filter's rules; nothing is reloaded.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/xdp/flow_filter.h"

namespace daqiri::backends::xdp {

class XdpProgram;
class XskRxQueue;
class XskSocket;
class XskTxQueue;

class XdpBackend final : public Backend {
 public:
  // Attaches the flow filter to every xdp interface, after removing one a daemon killed
  // before it could left there.
  static Result<std::unique_ptr<Backend>> open(const BackendContext& context);
  ~XdpBackend() override;
  XdpBackend(const XdpBackend&) = delete;
  XdpBackend& operator=(const XdpBackend&) = delete;

  // The RX half of the queue id's AF_XDP socket, in the filter's socket map.
  Result<> open_rx_queue(const QueueHome& home) override;
  // The TX half of the queue id's AF_XDP socket.
  Result<dataplane::TxQueueTask*> open_tx_queue(const QueueHome& home) override;
  // A UDP flow: its rule in the interface's filter, its frames steered on the queue.
  Result<std::unique_ptr<dataplane::RxFlowTask>> add_flow(const core::Flow& flow,
                                                          const QueueHome& home,
                                                          memory::PageArena* arena) override;
  // The rule goes first: from the next packet on the kernel has the flow's packets again.
  void close_flow(dataplane::RxFlowTask& flow, const QueueHome& home) override;
  dataplane::Grace remove_flow(dataplane::RxFlowTask* flow, const QueueHome& home) override;
  // The fill ring's buffers are the kernel's.
  [[nodiscard]] QueueTraits traits(const QueueHome& home) const override;
  // "zero-copy (AF_XDP, native XDP)", "copy (AF_XDP, generic XDP)", ...
  [[nodiscard]] std::string delivery(const QueueHome& home) const override;
  // "up, native XDP, copy": the kernel's operstate, the filter's attach mode and the sockets'.
  [[nodiscard]] std::string link_state(const config::InterfaceConfig& itf) const override;
  // Per interface: the filter's counts per flow, and each queue's socket counters.
  [[nodiscard]] std::vector<dataplane::NicStats> nic_stats() const override;

 private:
  struct Interface {
    const config::InterfaceConfig* config = nullptr;
    int ifindex = -1;
    std::unique_ptr<XdpProgram> program;                     // detached after the sockets close
    std::map<uint32_t, std::unique_ptr<XskSocket>> sockets;  // by queue id, RX and TX alike
    std::map<std::string, std::unique_ptr<XskRxQueue>> rx;   // by queue name
    std::map<std::string, std::unique_ptr<XskTxQueue>> tx;
    std::array<std::string, DAQIRI_XDP_MAX_RULES> slots;  // the flow of each rule ("": free)
  };
  // Out of line: a constructor that may throw destroys the members, which need their types.
  explicit XdpBackend(const BackendContext& context);
  [[nodiscard]] XskRxQueue* rx_queue(const QueueHome& home) const;
  // "native XDP, copy": how the interface's filter runs and its sockets take frames.
  [[nodiscard]] static std::string mode(const Interface& i);
  // The socket of queue id `id`, made by its first queue: an RX queue's pool and the TX
  // queue's chunks of that id in one UMEM.
  Result<XskSocket*> socket_for(Interface& i, uint32_t id);
  [[nodiscard]] const config::MemoryRegionConfig* region_of(const config::QueueConfig& q) const;
  std::map<std::string, Interface> interfaces_;  // by interface name
};

}  // namespace daqiri::backends::xdp
