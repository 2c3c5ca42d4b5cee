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

}  // namespace daqiri::dataplane
