// The TCP connections of one socket interface, shared by its TCP flows, which open, read and
// close them on their pollers, and its tcp TX queues, which write to them on theirs. A
// connection's stream id (what RX descriptors carry, and TX descriptors name) picks its slot:
// the low byte is the slot, so a TX lookup is one load, and an id names a slot's connection
// only until the slot is reused (ids run on, skipping those whose low byte is 0).
//
// One writer at a time: a TX queue claims a connection before writing and lets go after, so
// messages from queues on different pollers never interleave inside the byte stream. The fd
// belongs to the table: a flow that closes a connection while a queue writes to it only marks
// it, and whichever of the two comes last closes the fd. Lock-free; no allocation.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "daqiri/common/unique_fd.hpp"

namespace daqiri::backends::socket {

class TcpConnections {
 public:
  static constexpr uint32_t kSlots = 256;  // slot 0 unused: connection 0 is "the first open"

  TcpConnections() = default;
  ~TcpConnections();
  TcpConnections(const TcpConnections&) = delete;
  TcpConnections& operator=(const TcpConnections&) = delete;

  // ---- flow side (the poller of the flow that owns the connection) ----
  // Takes `fd` into a free slot: its stream id, or 0 when every slot is taken (`fd` closes).
  // `open`: writable at once (accepted); a dial in progress becomes so by opened().
  uint16_t add(UniqueFd fd, bool open);
  void opened(uint16_t stream);
  [[nodiscard]] int fd(uint16_t stream) const { return fds_[stream % kSlots]; }
  // Ends the connection: no writer may claim it from now on; its fd closes now, or when the
  // writer that holds it lets go.
  void remove(uint16_t stream);

  // ---- writer side (TX queues' pollers) ----
  enum class Claim { kClaimed, kBusy, kNone };
  // Claims connection `stream` (0: the open one opened first) for writing; `stream` becomes
  // its id. kBusy: another writer holds it; kNone: no such open connection.
  Claim claim(uint16_t& stream);
  // Lets go of a claimed connection; the fd is valid from claim() to here.
  void let_go(uint16_t stream);
  // Whether the flow ended a connection its writer still holds (writes are then pointless).
  [[nodiscard]] bool ended(uint16_t stream) const {
    return (state_[stream % kSlots].load(std::memory_order_acquire) & kRemoved) != 0;
  }

  // Open connections (for tests and stats).
  [[nodiscard]] uint32_t open_count() const;

 private:
  // A slot's state: the stream id in the low 16 bits, and:
  static constexpr uint32_t kTaken = 1u << 16;    // holds a connection (fd set)
  static constexpr uint32_t kOpen = 1u << 17;     // writers may claim it
  static constexpr uint32_t kWriter = 1u << 18;   // a writer holds it
  static constexpr uint32_t kRemoved = 1u << 19;  // the flow ended it
  static constexpr uint32_t kStreamMask = 0xffff;

  void release(uint32_t slot);

  std::array<std::atomic<uint32_t>, kSlots> state_{};
  // Written by the flow before the state that publishes them (release), read after (acquire).
  std::array<int, kSlots> fds_{};
  std::array<std::atomic<uint64_t>, kSlots> order_{};  // when opened: the oldest is connection 0
  std::atomic<uint32_t> next_stream_{1};
  std::atomic<uint64_t> next_order_{1};
};

}  // namespace daqiri::backends::socket
