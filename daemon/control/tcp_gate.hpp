// The TCP control listener's front door. gRPC's own TLS listener accepts without asking anyone,
// and gRPC (1.51) adopts an accepted fd only without TLS, so the daemon accepts TCP itself:
// each peer address may hold `per_peer` connections and all of them `total`; one past either
// is closed at once (the client's calls fail UNAVAILABLE). An admitted connection is relayed,
// bytes as they are (TLS stays end to end), to gRPC's TLS listener on a loopback port, and the
// relay's local port is recorded with the real peer (ConnectionRegistry::record_tcp), which
// is how a call learns who made it. One thread, epoll, 32 KiB of buffers a connection.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "control/connection_registry.hpp"
#include "daqiri/common/result.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "system/connection_acceptor.hpp"

namespace daqiri::control {

class TcpGate {
 public:
  struct Limits {
    uint32_t per_peer = 16;
    uint32_t total = 256;
  };
  // Listens on `address` (IPv4 host:port) and relays to 127.0.0.1:`inner_port`.
  static Result<std::unique_ptr<TcpGate>> start(const std::string& address, uint16_t inner_port,
                                                Limits limits, ConnectionRegistry& registry);
  ~TcpGate();  // stops, closing every connection
  TcpGate(const TcpGate&) = delete;
  TcpGate& operator=(const TcpGate&) = delete;

 private:
  struct Pipe;
  struct Connection;
  TcpGate(UniqueFd listener, UniqueFd epoll, UniqueFd wake, uint16_t inner_port, Limits limits,
          ConnectionRegistry& registry);
  void run();
  void accept_all();
  void admit(UniqueFd outer, const std::string& peer, const std::string& ip);
  // Moves what it can both ways; false when the connection is over.
  bool pump(Connection& c);
  void watch(Connection& c, bool add);
  void close(uint64_t id);

  UniqueFd listener_, epoll_, wake_;
  system::ConnectionAcceptor acceptor_;  // gate thread only
  uint16_t inner_port_;
  Limits limits_;
  ConnectionRegistry& registry_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Connection>> connections_;  // gate thread only
  std::map<std::string, uint32_t> per_ip_;
  std::string refused_ip_;  // the last refused peer, so a spell of refusals is logged once
  std::thread thread_;
};

}  // namespace daqiri::control
