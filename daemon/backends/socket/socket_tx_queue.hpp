// One TX queue on the kernel-socket backend: drains its attachments' TX rings and sends each
// frame's IPv4 packet (raw socket, IP_HDRINCL), so the UDP ports and payload the client wrote
// go out byte for byte. Each frame is first copied into the queue's own staging memory, checked
// there against the queue's policy (dataplane/tx_frame_policy.hpp) and sent from there: the
// client cannot change what was checked. A frame the policy refuses is completed as failed and
// counted (`refused`). A PollTask: poll() runs on its poller only.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <memory>
#include <vector>

#include "config/config.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "daqiri/frame.hpp"
#include "dataplane/tx_pacer.hpp"
#include "dataplane/tx_queue_task.hpp"

namespace daqiri::backends::socket {

class SocketTxQueue final : public dataplane::TxAttachmentSet {
 public:
  // `max_frame`: the TX region's buf_size, the longest frame a client can submit.
  // `pacing_mbps`: the queue's rate cap in megabits of frames a second; 0: none.
  // `send_times`: accurate_send, frames may name a time to leave at (TxRules::send_times).
  static Result<std::unique_ptr<SocketTxQueue>> create(uint32_t source_ipv4, uint32_t batch,
                                                       uint32_t max_frame, config::TxPolicy policy,
                                                       uint32_t pacing_mbps = 0,
                                                       bool send_times = false);

  bool poll() override;
  // Only while a client is attached that did not say it kicks: it is served by the poller's
  // 1 ms sleeps. (Frames are sent, and their buffers completed, within the poll.)
  [[nodiscard]] bool needs_timed_wakeup() const override { return has_client_without_kicks(); }

  [[nodiscard]] dataplane::TxRules rules() const override {
    return {frame::kUdpHeaders, false, send_times_};
  }

 private:
  static constexpr uint32_t kMaxBatch = 256;

  SocketTxQueue(UniqueFd raw, uint32_t source_ipv4, uint32_t batch, uint32_t max_frame,
                config::TxPolicy policy, dataplane::TxPacer pacer, bool send_times);
  // Sends what `a` submitted, as far as the pacer's budget goes.
  bool drain(dataplane::TxAttachment& a);

  UniqueFd raw_;
  uint32_t source_ipv4_;
  uint32_t batch_;
  uint32_t max_frame_;
  config::TxPolicy policy_;
  dataplane::TxPacer pacer_;
  bool send_times_;
  std::vector<std::byte> staging_;                   // batch_ frames of max_frame_ bytes
  std::array<daqiri_tx_desc, kMaxBatch> descs_{};    // taken; then the refused ones
  std::array<daqiri_tx_desc, kMaxBatch> pending_{};  // those going out, in order
  std::array<mmsghdr, kMaxBatch> msgs_{};
  std::array<iovec, kMaxBatch> iov_{};
  std::array<sockaddr_in, kMaxBatch> to_{};
};

}  // namespace daqiri::backends::socket
