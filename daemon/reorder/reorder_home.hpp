// The backend of a reorder's pseudo-queue ("reorder:NAME" on its interface): the data plane
// installs the reorder itself, since it drains attachments on other flows; this answers what
// the data plane asks of any queue's backend, and takes the reorder off its poller.
#pragma once

#include "backends/backend.hpp"

namespace daqiri::reorder {

class ReorderHome final : public backends::Backend {
 public:
  explicit ReorderHome(backends::BackendContext context) : Backend(std::move(context)) {}
  Result<dataplane::TxQueueTask*> open_tx_queue(const backends::QueueHome& home) override;
  Result<std::unique_ptr<dataplane::RxFlowTask>> add_flow(const core::Flow& flow,
                                                          const backends::QueueHome& home,
                                                          memory::PageArena* arena) override;
  dataplane::Grace remove_flow(dataplane::RxFlowTask* flow,
                               const backends::QueueHome& home) override;
  [[nodiscard]] backends::QueueTraits traits(const backends::QueueHome& /*home*/) const override {
    return {};
  }
  [[nodiscard]] std::string delivery(const backends::QueueHome& /*home*/) const override {
    return "copy (reordered into batches)";
  }
};

}  // namespace daqiri::reorder
