// One TX queue on the kernel-socket backend: drains its attachments' TX rings and sends each
// frame's IPv4 packet as it is (raw socket, IP_HDRINCL), so the UDP ports and payload the
// client wrote go out byte for byte. Frames must be Ethernet/IPv4/UDP from the interface's
// own address; anything else is a bad descriptor. A PollTask: poll() runs on its poller only.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <memory>
#include <vector>

#include "daqiri/common/unique_fd.hpp"
#include "daqiri/frame.hpp"
#include "dataplane/tx_queue_task.hpp"

namespace daqiri::backends::socket {

class SocketTxQueue final : public dataplane::TxQueueTask {
 public:
  static Result<std::unique_ptr<SocketTxQueue>> create(uint32_t source_ipv4, uint32_t batch);

  bool poll() override;
  // NEED_WAKEUP on its attachments' TX rings while the poller sleeps (their clients kick).
  bool arm_wakeups() override;
  void disarm_wakeups() override;
  // Only while a client is attached that did not say it kicks: it is served by the poller's
  // 1 ms sleeps. (Frames are sent, and their buffers completed, within the poll.)
  [[nodiscard]] bool needs_timed_wakeup() const override;

  [[nodiscard]] dataplane::TxRules rules() const override { return {frame::kUdpHeaders, false}; }
  Result<> add(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) override;
  void remove(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) override;

 private:
  using Set = std::vector<dataplane::TxAttachment*>;
  static constexpr uint32_t kMaxBatch = 256;

  SocketTxQueue(UniqueFd raw, uint32_t source_ipv4, uint32_t batch);
  bool drain(dataplane::TxAttachment& a);

  UniqueFd raw_;
  uint32_t source_ipv4_;
  uint32_t batch_;
  dataplane::Published<Set> set_;
  std::array<daqiri_tx_desc, kMaxBatch> descs_{};
  std::array<mmsghdr, kMaxBatch> msgs_{};
  std::array<iovec, kMaxBatch> iov_{};
  std::array<sockaddr_in, kMaxBatch> to_{};
};

}  // namespace daqiri::backends::socket
