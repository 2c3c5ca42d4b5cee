// A TCP flow on the kernel-socket backend, as DAQIRI's socket manager offers them: either the
// daemon listens (match tcp_dst) and takes every connection to those ports, or it connects to
// an endpoint (`connect`) and reconnects when the peer goes away. Received bytes are cut into
// the flow's pool buffers and delivered as STREAM descriptors naming the connection. With
// blocking backpressure a slow client slows the sender down (TCP flow control): nothing is
// lost. The connections live in the interface's TcpConnections, where its tcp TX queues write
// to them. A PollTask: poll() runs on its poller only.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "backends/redial.hpp"
#include "backends/socket/tcp_connections.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "dataplane/rx_flow_task.hpp"

namespace daqiri::backends::socket {

class TcpRxFlow final : public dataplane::RxFlowTask {
 public:
  static constexpr size_t kMaxConnections = 64;

  static Result<std::unique_ptr<TcpRxFlow>> create(const core::Flow& flow, uint32_t bind_ipv4,
                                                   uint32_t buf_size, uint32_t num_bufs, bool huge,
                                                   memory::PageArena* arena, uint32_t batch,
                                                   TcpConnections* connections);
  ~TcpRxFlow() override;

  bool poll() override;
  [[nodiscard]] const core::Flow& flow() const override { return flow_; }
  [[nodiscard]] bool carries_connections() const override { return true; }
  // One fd: the flow's own epoll set, readable when any of its sockets is.
  [[nodiscard]] std::vector<int> fds() const override { return {epoll_.get()}; }
  [[nodiscard]] memory::BufferPool& pool() override { return pool_; }
  [[nodiscard]] dataplane::RxFanout& fanout() override { return fanout_; }
  // Timed wake-ups only for releases that polls take back; a client flow's next dial is due at
  // a time of its own. Bytes, hang-ups, new connections and a dial's outcome all make its epoll
  // fd readable.
  [[nodiscard]] bool needs_timed_wakeup() const override {
    return fanout_.holds_buffers() || gathering_ > 0;
  }
  [[nodiscard]] uint64_t wakeup_due_ns() const override {
    return flow_.connect && count_ == 0 ? redial_.due_ns() : kNoWakeupDue;
  }

 protected:
  // A full ring under block backpressure, or no buffer left in the pool.
  [[nodiscard]] bool waits_for_releases() const override {
    return fanout_.stalled() || pool_.available() == 0;
  }

 private:
  struct Connection {
    int fd = -1;  // the table's
    uint16_t stream = 0;
    bool connecting = false;  // client: a non-blocking connect in progress
    bool ended = false;       // closed by the peer or failed: reaped at the end of the poll
    // Streaming: readable only once kGatherBytes wait (SO_RCVLOWAT), until a quiet spell.
    bool gathering = false;
    uint64_t last_read_ns = 0;  // monotonic
    uint64_t burst_bytes = 0;   // read since the last quiet spell
  };
  // A connection that delivered kGatherBytes with no kQuietNs gap is streaming: it is then read
  // only once that much has arrived (at most a quarter of its receive buffer), many buffers a
  // wake-up, instead of a message at a time while the sender's softirq contends for the
  // socket's lock. kQuietNs without a read ends that, so that a stream's last bytes wait no
  // longer; messages further apart than that are never held.
  static constexpr int kGatherBytes = 64 << 10;
  static constexpr uint64_t kQuietNs = 100'000;

  TcpRxFlow(core::Flow flow, memory::BufferPool pool, UniqueFd epoll, uint32_t batch,
            TcpConnections* connections);
  void accept_all(int listener);
  bool read_some(Connection& c, uint64_t now_ns, uint64_t mono_ns);
  void gather(Connection& c, bool on);
  void end_quiet_gathers();
  void close_connection(size_t index);
  void start_connect(uint64_t now_ns);
  Connection* find(int fd);
  void watch(int fd, uint32_t events, bool add);

  core::Flow flow_;
  memory::BufferPool pool_;
  UniqueFd epoll_;
  uint32_t batch_;
  TcpConnections* connections_;
  std::vector<UniqueFd> listeners_;
  std::array<Connection, kMaxConnections> conns_{};
  size_t count_ = 0;
  RedialBackoff redial_;  // client: when to try connecting again
  uint32_t idle_ = 0;
  uint32_t skip_ = 0;
  size_t gathering_ = 0;  // connections gathering
  dataplane::RxFanout fanout_;
};

}  // namespace daqiri::backends::socket
