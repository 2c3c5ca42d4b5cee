#include "backends/rdma/rdma_backend.hpp"

#include "backends/rdma/rdma_interface.hpp"

namespace daqiri::backends::rdma {

Result<std::unique_ptr<Backend>> RdmaBackend::open(const BackendContext& context) {
  return std::unique_ptr<Backend>(new RdmaBackend(context));
}

RdmaBackend::RdmaBackend(const BackendContext& context) : Backend(context) {}

RdmaBackend::~RdmaBackend() = default;

RdmaInterface* RdmaBackend::interface(const std::string& name) const {
  auto it = interfaces_.find(name);
  return it == interfaces_.end() ? nullptr : it->second.task.get();
}

Result<dataplane::Poller*> RdmaBackend::queue_poller(const config::InterfaceConfig& itf,
                                                     const config::QueueConfig& /*q*/,
                                                     bool /*rx*/) {
  if (auto it = interfaces_.find(itf.name); it != interfaces_.end()) return it->second.poller;
  const auto& queues = itf.rx_queues.empty() ? itf.tx_queues : itf.rx_queues;
  uint32_t batch = queues.empty() ? 64 : queues.front().batch_size;
  auto task = RdmaInterface::create(itf, config::sending_ipv4(itf), batch);
  if (!task) return std::unexpected(task.error());
  auto poller = context_.poller_for("rdma:" + itf.name, queues.empty() ? -1 : queues.front().core);
  if (!poller) return std::unexpected(poller.error());
  (*poller)->add_task(task->get(), (*task)->fds());
  interfaces_[itf.name] = {std::move(*task), *poller};
  return *poller;
}

Result<dataplane::TxQueueTask*> RdmaBackend::open_tx_queue(const QueueHome& home) {
  RdmaInterface* itf = interface(home.itf->name);
  if (itf == nullptr) return fail(ErrorCode::kNotFound, "no rdma interface " + home.itf->name);
  return itf;
}

Result<std::unique_ptr<dataplane::RxFlowTask>> RdmaBackend::add_flow(const core::Flow& flow,
                                                                     const QueueHome& home,
                                                                     memory::PageArena* arena) {
  RdmaInterface* itf = interface(home.itf->name);
  if (itf == nullptr) return fail(ErrorCode::kNotFound, "no rdma interface " + home.itf->name);
  std::optional<memory::DeviceMemory> device;
  if (home.region->gpudirect) {
    auto m = context_.device_memory(*home.region);
    if (!m) {
      return fail(m.error().code, "flow \"" + flow.name + "\": region \"" + home.region->name +
                                      "\" is gpudirect: " + m.error().message);
    }
    device = std::move(*m);
  }
  auto f =
      itf->add_flow(flow, *home.region, arena, home.poller->epoch(), device ? &*device : nullptr);
  if (!f) return std::unexpected(f.error());
  return std::unique_ptr<dataplane::RxFlowTask>(std::move(*f));
}

// Every flow of this backend is an RdmaRxFlow: add_flow made it.
void RdmaBackend::close_flow(dataplane::RxFlowTask& flow, const QueueHome& home) {
  interface(home.itf->name)->close_flow(static_cast<RdmaRxFlow*>(&flow), home.poller->epoch());
}

bool RdmaBackend::flow_released(const dataplane::RxFlowTask& flow) const {
  return static_cast<const RdmaRxFlow&>(flow).released.load(std::memory_order_acquire);
}

dataplane::Grace RdmaBackend::remove_flow(dataplane::RxFlowTask* flow, const QueueHome& home) {
  return interface(home.itf->name)
      ->remove_closed_flow(static_cast<RdmaRxFlow*>(flow), home.poller->epoch());
}

QueueTraits RdmaBackend::traits(const QueueHome& home) const {
  return {home.queue->ring_size + home.queue->batch_size, false};
}

std::string RdmaBackend::delivery(const QueueHome& home) const {
  return home.region->gpudirect ? "zero-copy into GPU memory (RDMA, dma-buf)" : "zero-copy (RDMA)";
}

std::string RdmaBackend::link_state(const config::InterfaceConfig& itf) const {
  RdmaInterface* i = interface(itf.name);
  return i ? i->state() : "configured";
}

std::vector<dataplane::NicStats> RdmaBackend::nic_stats() const {
  std::vector<dataplane::NicStats> out;
  out.reserve(interfaces_.size());
  for (const auto& [name, i] : interfaces_)
    out.push_back(i.task->stats());
  return out;
}

void RdmaBackend::release_buffers() {
  interfaces_.clear();
}

}  // namespace daqiri::backends::rdma
