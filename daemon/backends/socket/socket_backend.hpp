// The kernel-socket backend: a flow binds UDP (or TCP) sockets and receives into its own pool;
// a TX queue sends frames through a raw socket, or (tx_policy tcp) messages on the TCP
// connections of the interface's flows. Needs nothing but the kernel, on any interface.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/socket/tcp_connections.hpp"

namespace daqiri::backends::socket {

class SocketBackend final : public Backend {
 public:
  static Result<std::unique_ptr<Backend>> open(const BackendContext& context);

  Result<dataplane::TxQueueTask*> open_tx_queue(const QueueHome& home) override;
  // A TCP flow (match on TCP, or connect) or a UDP one, its fds on the queue's poller.
  Result<std::unique_ptr<dataplane::RxFlowTask>> add_flow(const core::Flow& flow,
                                                          const QueueHome& home,
                                                          memory::PageArena* arena) override;
  dataplane::Grace remove_flow(dataplane::RxFlowTask* flow, const QueueHome& home) override;
  // Buffers are taken only to receive into them: none stay posted.
  [[nodiscard]] QueueTraits traits(const QueueHome& /*home*/) const override { return {}; }
  [[nodiscard]] std::string delivery(const QueueHome& /*home*/) const override { return "socket"; }

 private:
  explicit SocketBackend(const BackendContext& context) : Backend(context) {}
  // An interface's TCP connections, shared by its TCP flows and tcp TX queues.
  TcpConnections* connections(const config::InterfaceConfig& itf);

  // Declared first: they go after the queues and flows that write and read them.
  std::map<std::string, std::unique_ptr<TcpConnections>> connections_;
  std::vector<std::unique_ptr<dataplane::TxQueueTask>> tx_queues_;
};

}  // namespace daqiri::backends::socket
