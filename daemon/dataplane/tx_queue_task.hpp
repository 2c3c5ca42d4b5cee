// A backend's TX queue as the data plane drives it: a poll task that drains the TX rings of
// the attachments it was given (DPDK queues have their own path through DpdkBackend).
#pragma once

#include "dataplane/poller.hpp"
#include "dataplane/snapshot.hpp"
#include "dataplane/tx_attachment.hpp"

namespace daqiri::dataplane {

class TxQueueTask : public PollTask {
 public:
  // What its descriptors may say (the attachment checks them before the task sees them).
  [[nodiscard]] virtual TxRules rules() const = 0;
  // Control side (callers serialise); `epoch` is the owning poller's. add() may fail (RDMA
  // registers the attachment's buffers with the NIC); remove()'s Grace says when the
  // attachment may be freed.
  virtual Result<> add(TxAttachment* a, const Epoch& epoch) = 0;
  virtual Grace remove(TxAttachment* a, const Epoch& epoch) = 0;
};

// A TX task whose attachments are a plain set it serves each poll (the socket and xdp
// backends' frame queues): adding, removing and the wakeup handshake with their clients.
class TxAttachmentSet : public TxQueueTask {
 public:
  Result<> add(TxAttachment* a, const Epoch& epoch) override {
    publish_added(set_, a, epoch);
    return {};
  }
  Grace remove(TxAttachment* a, const Epoch& epoch) override {
    return publish_removed(set_, a, epoch);
  }
  // NEED_WAKEUP on the attachments' TX rings while the poller sleeps (their clients kick).
  bool arm_wakeups() override { return dataplane::arm_wakeups(set_.load(), attachment_of); }
  void disarm_wakeups() override { dataplane::disarm_wakeups(set_.load(), attachment_of); }

 protected:
  using Set = std::vector<TxAttachment*>;
  TxAttachmentSet() : set_(std::make_unique<const Set>()) {}
  [[nodiscard]] const Set& attachments() const { return set_.load(); }
  // A client is attached that did not say it kicks: a sleeping poller serves it on its timer.
  [[nodiscard]] bool has_client_without_kicks() const {
    return dataplane::has_client_without_kicks(set_.load(), attachment_of);
  }

 private:
  static TxAttachment& attachment_of(TxAttachment* a) { return *a; }
  Published<Set> set_;
};

}  // namespace daqiri::dataplane
