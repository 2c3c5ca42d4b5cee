// A TX queue of a socket interface with tx_policy tcp: each buffer a client submits is a
// message of bytes written to one TCP connection of the interface's TCP flows, as DAQIRI's
// socket engine sends on a connection. A descriptor names the connection as RX descriptors do
// (`stream`; 0: the one opened first). Messages to one connection go out whole and in order:
// the queue claims the connection (TcpConnections) for a run of messages and, when the
// socket's buffer is full mid-message, keeps the claim and the rest of that message until the
// peer makes room; meanwhile that client's later messages wait, in order, and other clients go
// on. A message naming no open connection comes back failed (`refused`). The bytes go from
// the client's buffer straight into the kernel's copy: nothing of them is checked. A
// PollTask: poll() runs on its poller only.
#pragma once

#include <sys/uio.h>

#include <array>
#include <memory>
#include <vector>

#include "backends/socket/tcp_connections.hpp"
#include "dataplane/tx_bindings.hpp"
#include "dataplane/tx_pacer.hpp"
#include "dataplane/tx_queue_task.hpp"

namespace daqiri::backends::socket {

class TcpTxQueue final : public dataplane::TxQueueTask {
 public:
  // `connections`: the interface's, outliving the queue. `pacing_mbps`: the queue's rate cap
  // in megabits of message bytes a second; 0: none. `max_message`: the TX region's buf_size.
  static std::unique_ptr<TcpTxQueue> create(TcpConnections* connections, uint32_t batch,
                                            uint32_t max_message, uint32_t pacing_mbps);

  bool poll() override;
  // NEED_WAKEUP on its attachments' TX rings while the poller sleeps (their clients kick).
  bool arm_wakeups() override;
  void disarm_wakeups() override;
  // While a client is attached that did not say it kicks, or messages wait for a socket's
  // room or another writer (no fd of ours tells when): the poller's 1 ms sleeps serve them.
  [[nodiscard]] bool needs_timed_wakeup() const override;

  [[nodiscard]] dataplane::TxRules rules() const override {
    return {.min_length = 1, .connections = true};
  }
  Result<> add(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) override;
  dataplane::Grace remove(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) override;

 private:
  static constexpr uint32_t kMaxBatch = 256;
  // One attachment and the messages taken from its ring and not yet sent, in ring order.
  struct Binding {
    dataplane::TxAttachment* attachment = nullptr;
    std::array<daqiri_tx_desc, kMaxBatch> backlog{};
    uint32_t head = 0;
    uint32_t count = 0;
    uint32_t written = 0;  // bytes of backlog[head] in the socket already
    uint16_t held = 0;     // the connection claimed mid-message (0: none)
  };
  using Set = dataplane::TxBindings<Binding>::Set;
  static dataplane::TxAttachment& attachment_of(const Binding* b) { return *b->attachment; }

  TcpTxQueue(TcpConnections* connections, uint32_t batch, dataplane::TxPacer pacer);
  // Sends what `b`'s client submitted, as far as the pacer's budget and the sockets go.
  bool drain(Binding& b);
  // Writes backlog[head, end) to connection `stream` (claimed), completing the messages that
  // went whole (or failed); false if the socket took nothing.
  bool write_run(Binding& b, uint16_t stream, uint32_t end);
  // Completes backlog[head, head + n) of `b` and moves past them.
  void finish(Binding& b, uint32_t n, bool failed);
  // A client going away: a message cut short ends its connection (the peer would otherwise
  // read the next message's bytes as this one's rest).
  void let_go(Binding& b);

  TcpConnections* connections_;
  uint32_t batch_;
  dataplane::TxPacer pacer_;
  dataplane::TxBindings<Binding> bindings_;
  std::array<iovec, kMaxBatch> iov_{};
};

}  // namespace daqiri::backends::socket
