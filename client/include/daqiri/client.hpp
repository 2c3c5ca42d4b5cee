// libdaqiri: receive and send packets through daqirid, zero-copy.
//
//   auto client = daqiri::Client::connect(daqiri::ClientOptions{});
//   daqiri::RxOptions options;
//   options.flow = "stream0";
//   auto& rx = **(*client)->attach_rx(options);
//   for (;;) {
//     auto burst = rx.wait_burst(std::chrono::milliseconds(100));
//     if (!burst) break;                      // detached: daemon gone or flow deleted
//     for (const daqiri::Packet& p : *burst) consume(p.payload);
//     rx.release(*burst);                     // buffers go back to the daemon
//   }
//
// Thread-safety: a Client and its streams may be used from several threads as long as each
// object is used by one thread at a time; attach, detach and reconnect must not run
// concurrently with any other call on the same Client. The library never installs signal
// handlers and never touches the caller's CUDA device or context.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "daqiri/abi.h"
#include "daqiri/common/result.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "daqiri/frame.hpp"

namespace daqiri {

struct ClientOptions {
  std::string socket;  // control socket; empty: $DAQIRI_SOCKET, else /run/daqiri/daqiri.sock
  std::string name;    // shown in `daqiri-ctl sessions`
  std::chrono::milliseconds timeout{5000};
};

struct RxOptions {
  // One flow; or, when empty, every flow of `interface`/`queue`; all three empty: the flow
  // $DAQIRI_FLOW names (a container given one flow through CDI).
  std::string flow;
  std::string interface;  // with `queue`: an RX queue, up to 4 flows in one ring
  std::string queue;
  uint32_t ring_size = 0;  // 0: the queue's ring_size
  bool block = false;      // backpressure: false drops new packets when this ring is full
  // GPU rings: cudaMalloc'd and opened through a legacy cudaIpcMemHandle_t instead of a CUDA
  // VMM fd (for tools that only open those).
  bool cuda_ipc = false;
  // Packet::payload of a frame the daemon left unread (the one flow of its DPDK queue:
  // DAQIRI_PAYLOAD_UNREAD) is found in the frame, a read of its first cache line. false leaves
  // it empty, for a client that wants frames only (a capture, a forwarder, a protocol that is
  // not UDP) and would not read them otherwise.
  bool find_payloads = true;
  // 16-byte descriptors (daqiri_rx_desc_compact) instead of 32: Packet::timestamp_ns and
  // stream stay 0 and every payload is found in its frame (see find_payloads). The faster path
  // at small frames: half the ring memory the daemon writes, and the client reads, a frame.
  // Not for TCP or RDMA flows, nor GPU rings (the daemon refuses).
  bool compact = false;
};

struct TxOptions {
  // Neither given: $DAQIRI_TX_INTERFACE and $DAQIRI_TX_QUEUE (a container given one TX queue
  // through CDI).
  std::string interface;
  std::string queue;  // empty: the interface's first TX queue
  // Wake the daemon's TX poller when it sleeps (a write to the kick eventfd in submit()); the
  // daemon is told (AttachRequest.kicks), so while this client is idle its poller may sleep
  // up to a second. false: submit() never makes a syscall, a frame submitted while the
  // daemon is idle waits for its poller's park to end (up to 1 ms), and the poller keeps
  // waking every millisecond while this client is attached.
  bool kick = true;
  // Frames from GPU memory: the queue has a device region (and, for header-data split, a host
  // header region). TxBuffer::data is then the host header buffer (empty without a split), and
  // the GPU buffer of the same index holds the rest: TxStream::gpu_memory() says where, and
  // daqiri/gpu_tx_buffers.hpp (libdaqiri_gpu) maps it.
  bool gpu = false;
};

// o as attach_tx() reads it: naming neither interface nor queue, the TX queue the environment
// names ($DAQIRI_TX_INTERFACE, $DAQIRI_TX_QUEUE), for a tool that needs the interface before
// it attaches.
TxOptions with_environment_queue(TxOptions o);

// A GPU TX stream's GPU buffers: the CUDA VMM fd to import (valid while the stream is
// attached) and the layout (daqiri_gpu_ring_info: `size` buffers of `slot_size` bytes from
// payload_offset; header_size bytes of each frame in the host buffer).
struct TxGpuMemory {
  int fd = -1;
  daqiri_gpu_ring_info info{};
};

struct Packet {
  // Ethernet frame; for a TCP stream, the bytes received; for RDMA, the message
  std::span<const std::byte> frame;
  std::span<const std::byte> payload;  // its UDP payload; for a stream or message, all of it
  uint32_t flow_id = 0;
  uint64_t timestamp_ns = 0;
  uint16_t flags = 0;  // DAQIRI_DESC_*
  // TCP and RDMA: which connection (1, 2, ...), in the order they opened
  uint16_t stream = 0;
};

// A reorder's batch (a Packet with DAQIRI_DESC_BATCH): what it says of itself, and its slots.
struct Batch {
  daqiri_batch_header header{};
  std::span<const std::byte> data;  // header.packets_per_batch slots of header.slot_bytes
  [[nodiscard]] bool timed_out() const { return (header.flags & DAQIRI_BATCH_TIMED_OUT) != 0; }
  // The payload of the packet whose sequence number is `s` modulo packets_per_batch (zeros if
  // none came); empty past the batch.
  [[nodiscard]] std::span<const std::byte> slot(uint32_t s) const {
    uint64_t at = uint64_t{s} * header.slot_bytes;
    if (s >= header.packets_per_batch || at + header.slot_bytes > data.size()) return {};
    return data.subspan(at, header.slot_bytes);
  }
};
// The batch a packet of a reorder carries; nullopt for any other packet.
inline std::optional<Batch> batch_of(const Packet& p) {
  if ((p.flags & DAQIRI_DESC_BATCH) == 0 || p.frame.size() < DAQIRI_BATCH_HEADER_BYTES) {
    return std::nullopt;
  }
  Batch b;
  std::memcpy(&b.header, p.frame.data(), sizeof b.header);
  b.data = p.frame.subspan(DAQIRI_BATCH_HEADER_BYTES);
  return b;
}

class RxStream;

namespace detail {
// What reading an RX stream's descriptors takes, inline in the caller's loop: a call a packet
// into the library was half of a small-frame client's time.
struct RxRingView {
  const std::byte* slots = nullptr;  // the ring's slot 0
  uint32_t mask = 0;                 // slots - 1
  bool compact = false;              // daqiri_rx_desc_compact slots
  bool find_payloads = true;         // RxOptions::find_payloads
  uint32_t region_count = 0;
  std::array<std::span<const std::byte>, DAQIRI_MAX_REGIONS> regions{};

  [[nodiscard]] Packet packet(uint32_t counter) const {
    Packet p;
    uint32_t region = 0, length = 0, payload_offset = DAQIRI_PAYLOAD_UNREAD;
    uint64_t offset = 0;
    if (compact) {
      const auto& d = reinterpret_cast<const daqiri_rx_desc_compact*>(slots)[counter & mask];
      region = d.region;
      offset = daqiri_rx_compact_offset(&d);
      length = d.length;
      p.flow_id = d.flow_id;
      p.flags = d.flags;
    } else {
      const auto& d = reinterpret_cast<const daqiri_rx_desc*>(slots)[counter & mask];
      region = d.region;
      offset = d.offset;
      length = d.length;
      p.flow_id = d.flow_id;
      p.flags = d.flags;
      p.stream = d.stream;
      p.timestamp_ns = d.timestamp_ns;
      payload_offset = d.payload_offset;
    }
    // Descriptors come from the daemon, but a bad one must not make us read outside a mapping.
    if (region >= region_count) return Packet{};
    std::span<const std::byte> m = regions[region];
    if (offset > m.size() || length > m.size() - offset) return Packet{};
    p.frame = m.subspan(offset, length);
    if (p.flags & (DAQIRI_DESC_STREAM | DAQIRI_DESC_MESSAGE)) {
      p.payload = p.frame;
      return p;
    }
    if (payload_offset == DAQIRI_PAYLOAD_UNREAD) {
      if (!find_payloads) return p;
      payload_offset =
          daqiri_udp_payload_offset(reinterpret_cast<const uint8_t*>(p.frame.data()), length);
    }
    if (payload_offset != 0 && payload_offset <= length)
      p.payload = p.frame.subspan(payload_offset);
    return p;
  }
};
}  // namespace detail

// Packets delivered together; a view into the stream's ring, valid until released.
class Burst {
 public:
  class iterator {
   public:
    iterator(const Burst* b, size_t i) : b_(b), i_(i) {}
    Packet operator*() const { return (*b_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const iterator& o) const { return i_ != o.i_; }

   private:
    const Burst* b_;
    size_t i_;
  };

  Burst() = default;
  [[nodiscard]] size_t size() const { return count_; }
  [[nodiscard]] bool empty() const { return count_ == 0; }
  [[nodiscard]] Packet operator[](size_t i) const {
    return view_->packet(first_ + static_cast<uint32_t>(i));
  }
  [[nodiscard]] iterator begin() const { return {this, 0}; }
  [[nodiscard]] iterator end() const { return {this, count_}; }

 private:
  friend class RxStream;
  Burst(const detail::RxRingView* view, uint32_t first, uint32_t count)
      : view_(view), first_(first), count_(count) {}
  const detail::RxRingView* view_ = nullptr;  // its stream's
  uint32_t first_ = 0;
  uint32_t count_ = 0;
};

class RxStream {
 public:
  // Whatever has arrived, up to `max` packets (0: no limit); empty when nothing has. Bursts
  // come in ring order; each must be released (releasing one releases those before it too).
  Burst next_burst(uint32_t max = 0);
  // As next_burst, but sleeps on the stream's eventfd up to `timeout` for something to arrive.
  // Empty on timeout; kUnavailable once the stream is detached.
  Result<Burst> wait_burst(std::chrono::milliseconds timeout, uint32_t max = 0);
  // Returns the burst's buffers (and those of earlier bursts) to the daemon. When the daemon
  // waits for them (a full ring under block backpressure, an empty pool) and its poller
  // sleeps, it also writes the stream's kick eventfd (one syscall) to wake it.
  void release(const Burst& burst);
  // The daemon stopped serving this stream: flow deleted, client cut off, or daemon gone.
  [[nodiscard]] bool detached() const;
  [[nodiscard]] const RxOptions& options() const { return options_; }
  [[nodiscard]] uint64_t id() const;

  // The stream's shared memory, for a consumer that is not this process's CPU: a GPU kernel
  // reading the ring and the buffers where they are, in host memory (daqiri/mapped_rx_ring.hpp).
  // Such a consumer reads descriptors and releases through it instead of next_burst/release.
  struct Memory {
    std::span<std::byte> rings;          // the rings mapping (read-write), `ring` inside it
    daqiri_ring_header* ring = nullptr;  // this stream's RX ring: its producer and consumer
    // The ring's slots and geometry and the regions (mapped read-only), as checked at attach:
    // what Burst reads.
    detail::RxRingView view;
  };
  [[nodiscard]] Memory memory() const;

  ~RxStream();
  RxStream(const RxStream&) = delete;
  RxStream& operator=(const RxStream&) = delete;

  struct State;

 private:
  friend class Client;
  friend class Burst;
  RxStream(RxOptions options, std::unique_ptr<State> state);
  RxOptions options_;
  std::unique_ptr<State> s_;
};

struct TxBuffer {
  uint32_t index = 0;
  std::span<std::byte> data;  // the whole buffer, writable (GPU TX: the header buffer)
  uint32_t length = 0;        // bytes of frame to send (RDMA: of message, or to READ)
  // RDMA queues only (other queues cut a client that sets them): the operation, the
  // connection (as Packet::stream names it; 0: the first connected) and the slot of the
  // peer's remote window that WRITE, WRITE_IMM and READ address. A READ's data is in the
  // buffer when it comes back through reclaim(). TCP queues (tx_policy tcp) take `connection`
  // alone: the TCP connection the message goes to.
  daqiri_rdma_op op = DAQIRI_RDMA_SEND;
  uint16_t connection = 0;
  uint32_t remote_slot = 0;
  // Queues with accurate_send only (others cut a client that sets it): the frame leaves no
  // earlier than this CLOCK_REALTIME time, in ns (the clock of Packet::timestamp_ns); 0: at
  // once. Frames leave in the order submitted, so a later one waits behind it.
  uint64_t send_at_ns = 0;
};

class TxStream {
 public:
  // Up to out.size() buffers the client may fill; fewer while the daemon still has the rest.
  size_t reserve(std::span<TxBuffer> out);
  // Queues frames for sending: `length` bytes of each buffer, an Ethernet/IPv4/UDP frame from
  // the interface's address. Returns how many were queued (the ring may take fewer). If the
  // daemon's poller sleeps, it writes the attachment's kick eventfd (one syscall) to wake it.
  Result<size_t> submit(std::span<const TxBuffer> buffers);
  // Takes back buffers the daemon is done with; returns how many. reserve() calls it.
  size_t reclaim();
  // Waits until every submitted buffer is back, up to `timeout`.
  Result<> flush(std::chrono::milliseconds timeout);
  // Buffers that came back without their work done, since the stream was attached: frames the
  // kernel refused; RDMA operations with no such connection, window or slot, or that failed.
  [[nodiscard]] uint64_t failed() const;
  // The longest frame a buffer takes (GPU TX: header and GPU buffer together).
  [[nodiscard]] uint32_t buf_size() const;
  // TxOptions::gpu: the GPU buffers; nullptr otherwise.
  [[nodiscard]] const TxGpuMemory* gpu_memory() const;
  [[nodiscard]] bool detached() const;
  [[nodiscard]] uint64_t id() const;

  ~TxStream();
  TxStream(const TxStream&) = delete;
  TxStream& operator=(const TxStream&) = delete;

  struct State;

 private:
  friend class Client;
  TxStream(TxOptions options, std::unique_ptr<State> state);
  TxOptions options_;
  std::unique_ptr<State> s_;
};

// The raw parts of a GPU RX attachment, for the GPU library (daqiri/gpu_rx_ring.hpp, in
// libdaqiri_gpu) to import into CUDA; most programs use GpuRxRing instead.
struct GpuRingFds {
  uint64_t id = 0;
  UniqueFd control;  // memfd of the host control block (daqiri_ring_header, kind GPU): map RW
  size_t control_size = 0;
  UniqueFd eventfd;  // signalled after the host mirror of the producer index moves
  UniqueFd ring;     // the GPU ring's CUDA VMM POSIX fd
  daqiri_gpu_ring_info info{};
  UniqueFd headers;  // header-data split: the header slots' memfd, map PROT_READ
  daqiri_region_info headers_info{};
  std::string cuda_ipc_handle;  // RxOptions::cuda_ipc: the ring's cudaIpcMemHandle_t (no `ring`)
};

class Client {
 public:
  // Opens a session with daqirid. Errors carry the daemon's reason.
  static Result<std::unique_ptr<Client>> connect(const ClientOptions& options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Streams belong to the Client and live until detach() or the Client's end.
  Result<RxStream*> attach_rx(const RxOptions& options);
  Result<TxStream*> attach_tx(const TxOptions& options);
  void detach(RxStream* stream);
  void detach(TxStream* stream);
  // A GPU ring on one flow (options.flow; its queue has a device or pinned region). The
  // attachment lasts until detach(id) or the end of the session; reconnect() leaves it out
  // (GpuRxRing::reattach() makes a new one).
  Result<GpuRingFds> attach_gpu_rx_fds(const RxOptions& options);
  void detach(uint64_t attachment_id);

  // After the daemon restarted (streams report detached), opens a new session and re-attaches
  // every stream in place: the RxStream/TxStream pointers stay valid.
  Result<> reconnect();
  // False once the session's connection to the daemon broke.
  [[nodiscard]] bool connected() const;
  [[nodiscard]] uint64_t session_id() const;
  // Sessions this Client has opened: 1 after connect(), one more per reconnect(). An id from
  // an earlier session means nothing to the current one (a restarted daemon numbers sessions
  // and attachments from 1 again), so attachment ids are only valid with the count they came in.
  [[nodiscard]] uint64_t sessions_opened() const;

  struct Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace daqiri
