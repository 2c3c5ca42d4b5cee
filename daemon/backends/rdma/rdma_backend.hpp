// The RDMA backend (rdma-core verbs over RoCE or InfiniBand): one RdmaInterface per rdma
// interface does all its verbs work, on one poller that every queue of the interface shares.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "backends/backend.hpp"

namespace daqiri::backends::rdma {

class RdmaInterface;

class RdmaBackend final : public Backend {
 public:
  static Result<std::unique_ptr<Backend>> open(const BackendContext& context);
  ~RdmaBackend() override;
  RdmaBackend(const RdmaBackend&) = delete;
  RdmaBackend& operator=(const RdmaBackend&) = delete;

  // The interface's poller, whichever the queue (made with the interface's task on first use).
  Result<dataplane::Poller*> queue_poller(const config::InterfaceConfig& itf,
                                          const config::QueueConfig& q, bool rx) override;
  // The interface's task takes TX attachments itself.
  Result<dataplane::TxQueueTask*> open_tx_queue(const QueueHome& home) override;
  // The flow's pool (and remote window) registered with the device; a gpudirect region's pool
  // in GPU memory, registered through its dma-buf.
  Result<std::unique_ptr<dataplane::RxFlowTask>> add_flow(const core::Flow& flow,
                                                          const QueueHome& home,
                                                          memory::PageArena* arena) override;
  // The poller closes the flow's connections (every buffer they held comes back) and lets go.
  void close_flow(dataplane::RxFlowTask& flow, const QueueHome& home) override;
  [[nodiscard]] bool flow_released(const dataplane::RxFlowTask& flow) const override;
  dataplane::Grace remove_flow(dataplane::RxFlowTask* flow, const QueueHome& home) override;
  // RECVs stay posted from a flow's pool.
  [[nodiscard]] QueueTraits traits(const QueueHome& home) const override;
  [[nodiscard]] std::string delivery(const QueueHome& home) const override;
  // "N connections" (established now).
  [[nodiscard]] std::string link_state(const config::InterfaceConfig& itf) const override;
  [[nodiscard]] std::vector<dataplane::NicStats> nic_stats() const override;
  // Queue pairs first: closing them returns buffers to flows and TX attachments.
  void release_buffers() override;

 private:
  explicit RdmaBackend(const BackendContext& context);
  [[nodiscard]] RdmaInterface* interface(const std::string& name) const;
  struct Placed {
    std::unique_ptr<RdmaInterface> task;
    dataplane::Poller* poller = nullptr;
  };
  std::map<std::string, Placed> interfaces_;
};

}  // namespace daqiri::backends::rdma
