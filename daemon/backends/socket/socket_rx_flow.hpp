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
#include "dataplane/rx_flow_task.hpp"

namespace daqiri::backends::socket {

inline constexpr uint32_t kMaxBatch = 256;
inline constexpr uint32_t kMaxPortsPerFlow = 64;

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

  [[nodiscard]] const core::Flow& flow() const override { return flow_; }
  [[nodiscard]] std::vector<int> fds() const override;
  [[nodiscard]] memory::BufferPool& pool() override { return pool_; }
  [[nodiscard]] dataplane::RxFanout& fanout() override { return fanout_; }
  // Kernel drops on the flow's sockets (socket buffer full), from /proc/net/udp.
  [[nodiscard]] uint64_t kernel_drops() const override;

 private:
  struct Port {
    int fd = -1;
    uint16_t number = 0;  // the UDP port
    // An empty recvmmsg is a wasted syscall: a port that keeps coming up empty is polled
    // every 2^min(idle, kMaxSkipShift) iterations; one packet brings it back to every iteration.
    uint32_t idle = 0;
    uint32_t skip = 0;
    uint32_t armed = 0;  // buffers [0, armed) are posted
    std::array<uint32_t, kMaxBatch> buffer{};
    std::array<mmsghdr, kMaxBatch> msg{};
    std::array<iovec, kMaxBatch> iov{};
    std::array<sockaddr_in, kMaxBatch> from{};
    // SO_RXQ_OVFL: each datagram carries the socket's drop count when it was queued.
    static constexpr size_t kControl = CMSG_SPACE(sizeof(uint32_t));
    std::array<std::byte, kControl> control{};  // the first datagram's
    uint32_t drops_seen = 0;                    // the last drop count a datagram carried
    // Whose drops the next batches report. The kernel drops while the pool is dry, but only a
    // datagram queued after the drops carries them: the backlog queued before them, and then
    // the first batch after the socket was drained, still speak for the starved time.
    enum class Feed : uint8_t { kFed, kStarved, kReporting };
    Feed feed = Feed::kFed;
  };

  SocketRxFlow(core::Flow flow, memory::BufferPool pool, uint32_t bind_ipv4, uint32_t batch);
  // Points each message at its iovec, address and control buffer (once: a Port never moves).
  void link(Port& port) const;
  // Posts free buffers up to the batch size.
  void arm(Port& port);
  // One recvmmsg; `now_ns` (0: not read yet this poll) stamps the packets.
  bool receive(Port& port, uint64_t& now_ns);
  // Reads a batch's drop count (its last datagram's); drops since the last batch count as
  // no_buffer if starved, else as overflow. Once a batch, not per packet.
  void count_drops(Port& port, msghdr& hdr);
  // The socket's queue is empty: the starved time's drops are reported by the next batch.
  static void drained(Port& port);

  core::Flow flow_;
  memory::BufferPool pool_;
  uint32_t bind_ipv4_;
  uint32_t batch_;
  std::vector<std::unique_ptr<Port>> ports_;
  dataplane::RxFanout fanout_;
};

}  // namespace daqiri::backends::socket
