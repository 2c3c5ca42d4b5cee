// One flow on the kernel-socket backend: a UDP socket per destination port of the flow's
// match, bound to the flow's address, whose datagrams land straight in the flow's own buffer
// pool (recvmmsg into pre-armed buffers, 42 bytes in, so that Ethernet/IPv4/UDP headers can be
// written in front: clients see the same frames as from a NIC). Source filters of the match
// are applied here. A PollTask: poll() runs on the owning poller only.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <memory>
#include <vector>

#include "core/flow_table.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "dataplane/rx_flow_task.hpp"

namespace daqiri::backends::socket {

inline constexpr uint32_t kMaxBatch = 256;
// Datagrams a receive asks for at least, whatever the queue's batch_size: a smaller read only
// adds syscalls (a receive returns what is there at once), as DAQIRI's socket engine knows.
inline constexpr uint32_t kMinRead = 32;
inline constexpr uint32_t kMaxPortsPerFlow = 64;
// Entries of a port's receive window (SocketRxFlow::arm): room for it to move a batch up.
inline constexpr uint32_t kPortEntries = 2 * kMaxBatch;

class SocketRxFlow final : public dataplane::RxFlowTask {
 public:
  // Binds the flow's sockets and creates its pool (buf_size x num_bufs, huge or not; in a
  // slab of `arena` when the region shares pages).
  static Result<std::unique_ptr<SocketRxFlow>> create(const core::Flow& flow, uint32_t bind_ipv4,
                                                      uint32_t buf_size, uint32_t num_bufs,
                                                      bool huge, memory::PageArena* arena,
                                                      uint32_t batch);
  ~SocketRxFlow() override;

  bool poll() override;
  // Only while clients hold buffers (their releases are reclaimed by polls; kicks come only
  // when the flow waits for them) or a drop count is still to be read: datagrams themselves
  // wake the poller through fds(), and an idle client that holds nothing needs no poll.
  [[nodiscard]] bool needs_timed_wakeup() const override;

  [[nodiscard]] const core::Flow& flow() const override { return flow_; }
  [[nodiscard]] std::vector<int> fds() const override;
  [[nodiscard]] memory::BufferPool& pool() override { return pool_; }
  [[nodiscard]] dataplane::RxFanout& fanout() override { return fanout_; }
  // Kernel drops on the flow's sockets (socket buffer full), from /proc/net/udp.
  [[nodiscard]] uint64_t kernel_drops() const override;

 protected:
  // A full ring under block backpressure, or a port with no buffer to post (starved).
  [[nodiscard]] bool waits_for_releases() const override;

 private:
  struct Port {
    UniqueFd fd;
    uint16_t number = 0;  // the UDP port
    // An empty recvmmsg is a wasted syscall: a port that keeps coming up empty is polled
    // every 2^min(idle, kMaxSkipShift) iterations; one packet brings it back to every iteration.
    uint32_t idle = 0;
    uint32_t skip = 0;
    uint32_t first = 0;  // entries [first, first + armed) are posted, in the order allocated
    uint32_t armed = 0;
    std::array<uint32_t, kPortEntries> buffer{};
    std::array<mmsghdr, kPortEntries> msg{};
    std::array<iovec, kPortEntries> iov{};
    std::array<sockaddr_in, kPortEntries> from{};
    // The socket's drop count (SO_MEMINFO) as last read, and when to read it next while
    // datagrams keep coming.
    uint32_t drops_seen = 0;
    uint64_t drops_due_ns = 0;
    bool unread_drops = false;  // datagrams came since the count was last read
    // The pool ran dry since the socket was last drained: the kernel's drops until then are
    // the empty pool's (no_buffer), not the poller's (overflow).
    bool starved = false;
  };
  // How often the drop count is read while datagrams arrive: what it costs (a syscall) against
  // how late a drop shows in the counters.
  static constexpr uint64_t kDropReadNs = 1'000'000;

  SocketRxFlow(core::Flow flow, memory::BufferPool pool, uint32_t bind_ipv4, uint32_t batch);
  // Points each message at its iovec and address (once: a Port never moves).
  void link(Port& port) const;
  // Posts free buffers up to the batch size.
  void arm(Port& port);
  // One recvmmsg; `now_ns` (0: not read yet this poll) stamps the packets.
  bool receive(Port& port, uint64_t& now_ns);
  // Reads the socket's drop count; the drops since the last read count as no_buffer if the
  // port is starved, else as overflow. The kernel is asked only at the edges of a starved time,
  // every kDropReadNs while datagrams arrive, and once after they stop: a drop count carried by
  // each datagram (SO_RXQ_OVFL) would cost a control message per datagram.
  void count_drops(Port& port, uint64_t now_ns);
  // After each receive: count_drops() when the time has come. `drained`: the socket's queue
  // is empty now; `now_ns`: the poll's clock reading (0: not taken yet; taken if needed).
  void read_drops_if_due(Port& port, uint64_t& now_ns, bool drained);

  core::Flow flow_;
  memory::BufferPool pool_;
  uint32_t bind_ipv4_;
  uint32_t batch_;
  std::vector<std::unique_ptr<Port>> ports_;
  dataplane::RxFanout fanout_;
};

}  // namespace daqiri::backends::socket
