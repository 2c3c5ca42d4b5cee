#include "backends/socket/socket_backend.hpp"

#include <spdlog/spdlog.h>

#include "backends/socket/socket_rx_flow.hpp"
#include "backends/socket/socket_tx_queue.hpp"
#include "backends/socket/tcp_rx_flow.hpp"
#include "backends/socket/tcp_tx_queue.hpp"

namespace daqiri::backends::socket {

Result<std::unique_ptr<Backend>> SocketBackend::open(const BackendContext& context) {
  return std::unique_ptr<Backend>(new SocketBackend(context));
}

TcpConnections* SocketBackend::connections(const config::InterfaceConfig& itf) {
  auto& c = connections_[itf.name];
  if (!c) c = std::make_unique<TcpConnections>();
  return c.get();
}

Result<dataplane::TxQueueTask*> SocketBackend::open_tx_queue(const QueueHome& home) {
  const config::QueueConfig& q = *home.queue;
  config::TxPolicy policy = q.tx_policy.value_or(config::TxPolicy::kChecked);
  if (policy == config::TxPolicy::kTcp) {
    tx_queues_.push_back(TcpTxQueue::create(connections(*home.itf), q.batch_size,
                                            home.region->buf_size, q.pacing_mbps));
  } else {
    auto task =
        SocketTxQueue::create(config::sending_ipv4(*home.itf), q.batch_size, home.region->buf_size,
                              policy, q.pacing_mbps, q.accurate_send);
    if (!task) return std::unexpected(task.error());
    tx_queues_.push_back(std::move(*task));
  }
  dataplane::TxQueueTask* raw = tx_queues_.back().get();
  home.poller->add_task(raw, {});
  return raw;
}

Result<std::unique_ptr<dataplane::RxFlowTask>> SocketBackend::add_flow(const core::Flow& flow,
                                                                       const QueueHome& home,
                                                                       memory::PageArena* arena) {
  if (flow.match.any || flow.match.raw_ethernet() || flow.match.ipv4_length) {
    return fail(ErrorCode::kFailedPrecondition,
                "a catch-all, or a match on more than a datagram's addresses and ports, needs a "
                "dpdk interface, which reads whole frames",
                "match");
  }
  bool huge = home.region->kind == config::RegionKind::kHuge;
  uint32_t ipv4 = config::sending_ipv4(*home.itf);
  std::unique_ptr<dataplane::RxFlowTask> task;
  if (flow.match.is_tcp() || flow.connect) {
    auto t = TcpRxFlow::create(flow, ipv4, home.region->buf_size, home.region->num_bufs, huge,
                               arena, home.queue->batch_size, connections(*home.itf));
    if (!t) return std::unexpected(t.error());
    task = std::move(*t);
  } else {
    auto t = SocketRxFlow::create(flow, ipv4, home.region->buf_size, home.region->num_bufs, huge,
                                  arena, home.queue->batch_size);
    if (!t) return std::unexpected(t.error());
    task = std::move(*t);
  }
  home.poller->add_task(task.get(), task->fds());
  spdlog::debug("flow {} installed on {}", flow.name, home.poller->name());
  return task;
}

dataplane::Grace SocketBackend::remove_flow(dataplane::RxFlowTask* flow, const QueueHome& home) {
  return home.poller->remove_task(flow, flow->fds());
}

}  // namespace daqiri::backends::socket
