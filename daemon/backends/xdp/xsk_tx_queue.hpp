// One TX queue of an xdp interface: the TX half of the AF_XDP socket bound to the NIC queue.
// Each frame a client submits is copied into one of the socket's TX chunks (daemon memory no
// client maps), checked there against the queue's policy (dataplane/tx_frame_policy.hpp; under
// `checked` its source MAC becomes the interface's) and sent from there, as the socket backend
// sends from its staging copy: the client's buffer is completed at once, and the chunk comes
// back with the kernel's completion. In copy mode the kernel sends only inside the poller's
// sendto, a few dozen frames a call, so the poller kicks while frames wait in the TX ring.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "backends/xdp/xsk_socket.hpp"
#include "config/config.hpp"
#include "daqiri/frame.hpp"
#include "dataplane/nic_stats.hpp"
#include "dataplane/tx_pacer.hpp"
#include "dataplane/tx_queue_task.hpp"

namespace daqiri::backends::xdp {

struct XskTxSetup {
  uint32_t batch = 0;
  config::TxPolicy policy = config::TxPolicy::kChecked;
  uint32_t source_ipv4 = 0;  // host order: what `checked` holds frames to
  frame::Mac mac{};          // the interface's: `checked` frames' source
  uint32_t pacing_mbps = 0;
  uint32_t max_frame = 0;  // the TX region's buf_size: the longest frame a client submits
  bool send_times = false;
};

struct XskTxCounters {
  std::atomic<uint64_t> packets{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> kicks{0};  // sendto calls that made the kernel send
};

class XskTxQueue final : public dataplane::TxAttachmentSet {
 public:
  static constexpr uint32_t kMaxBatch = 256;
  // The TX half of `socket` (which outlives it).
  XskTxQueue(XskSocket& socket, const XskTxSetup& setup);

  bool poll() override;
  // While frames wait in the socket's TX ring, or a client is attached that does not kick.
  [[nodiscard]] bool needs_timed_wakeup() const override {
    return in_flight_ > 0 || has_client_without_kicks();
  }
  [[nodiscard]] dataplane::TxRules rules() const override {
    return {frame::kUdpHeaders, false, send_times_};
  }

  XskTxCounters counters;
  [[nodiscard]] const XskSocket& socket() const { return socket_; }
  [[nodiscard]] dataplane::NicQueueStats stats(const std::string& name) const;

 private:
  // Chunks the kernel has sent, back on the free stack.
  bool reap();
  // Copies, checks and queues what `a` submitted, as far as chunks and the pacer go.
  bool drain(dataplane::TxAttachment& a);
  // sendto, where the kernel asks for it: it sends what waits in the TX ring.
  void kick();

  XskSocket& socket_;
  xsk_ring_prod& tx_;
  xsk_ring_cons& completion_;
  uint32_t batch_;
  config::TxPolicy policy_;
  uint32_t source_ipv4_;
  frame::Mac mac_;
  dataplane::TxPacer pacer_;
  bool send_times_;
  std::vector<uint32_t> free_;  // TX chunks not in the kernel's hands (a stack)
  uint32_t in_flight_ = 0;
  std::array<daqiri_tx_desc, kMaxBatch> descs_{};    // taken; then the refused ones
  std::array<daqiri_tx_desc, kMaxBatch> pending_{};  // those going out, in order
  std::array<uint32_t, kMaxBatch> chunks_{};         // pending_'s chunks
};

}  // namespace daqiri::backends::xdp
