#include "reorder/reorder_home.hpp"

namespace daqiri::reorder {

Result<dataplane::TxQueueTask*> ReorderHome::open_tx_queue(const backends::QueueHome& home) {
  return fail(ErrorCode::kFailedPrecondition, home.key() + ": a reorder sends nothing");
}

Result<std::unique_ptr<dataplane::RxFlowTask>> ReorderHome::add_flow(
    const core::Flow& flow, const backends::QueueHome& home, memory::PageArena* /*arena*/) {
  return fail(ErrorCode::kFailedPrecondition,
              "flow \"" + flow.name + "\": " + home.key() +
                  " is a reorder's: it delivers batches of its own flows, no flow of its own");
}

dataplane::Grace ReorderHome::remove_flow(dataplane::RxFlowTask* flow,
                                          const backends::QueueHome& home) {
  return home.poller->remove_task(flow, flow->fds());
}

}  // namespace daqiri::reorder
