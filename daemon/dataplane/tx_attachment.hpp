// One client's TX lease on a queue: a private buffer region the client fills, a TX ring of
// descriptors it submits, and a completion ring through which buffers come back. The daemon
// tracks who owns each buffer; a descriptor naming a buffer the client does not own, or out of
// range, or of impossible length, is a protocol violation.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <vector>

#include "daqiri/abi.h"
#include "daqiri/ring.hpp"
#include "dataplane/attachment_state.hpp"
#include "dataplane/tx_pacer.hpp"
#include "memory/buffer_pool.hpp"
#include "memory/device_memory.hpp"

namespace daqiri::dataplane {

// What a queue's backend accepts in a descriptor; anything else cuts the client.
struct TxRules {
  uint32_t min_length = 0;
  bool rdma_ops = false;  // flags carry an RDMA operation and connection, `remote` a slot
  // accurate_send: flags and `remote` may name the time a frame leaves no earlier than
  // (DAQIRI_TX_AT); take() leaves it, and what was submitted after it, in the ring till then.
  bool send_times = false;
  // The NIC holds each frame till its time (its send scheduling): take() passes them on.
  bool nic_schedules = false;
  // flags may name a connection (bits 16-31, as RX descriptors' `stream`) and nothing else;
  // `remote` is 0 (TCP queues).
  bool connections = false;
  // The longest frame a descriptor may name; 0: the buffer size. (Frames sent from GPU memory
  // are longer than the host header buffers their clients write.)
  uint32_t max_length = 0;
};

// The GPU buffers a GPU TX client writes its frames (or, with header-data split, their
// payloads) into, as the gpu engine made them: buffer i at memory.base + i * info.slot_size,
// the VMM fd the client maps them through, and what the client is told of them.
struct GpuTxBuffers {
  memory::DeviceMemory memory;
  int vmm_fd = -1;  // owned by memory.owner
  daqiri_gpu_ring_info info{};
};

class TxAttachment {
 public:
  // Bytes create() allocates (rings, the buffer region, the ownership table), for charging
  // them before they are.
  static uint64_t footprint(uint32_t buf_size, uint32_t num_bufs, uint32_t ring_size) {
    return abi::RingView::bytes_for(ring_size, sizeof(daqiri_tx_desc)) +
           abi::RingView::bytes_for(std::bit_ceil(num_bufs), sizeof(uint32_t)) +
           uint64_t{buf_size} * num_bufs + num_bufs;
  }
  // `client_kicks`: the client said it kicks (AttachRequest.kicks). `buf_size` 0: no buffer
  // memory (the frames are in GPU memory whole).
  static Result<std::unique_ptr<TxAttachment>> create(uint64_t id, uint32_t buf_size,
                                                      uint32_t num_bufs, uint32_t ring_size,
                                                      bool huge, TxRules rules,
                                                      bool client_kicks = false);

  [[nodiscard]] uint64_t id() const { return id_; }
  [[nodiscard]] memory::SharedMemory& rings() { return rings_; }
  [[nodiscard]] memory::SharedMemory& buffers() { return buffers_; }
  [[nodiscard]] uint32_t buf_size() const { return buf_size_; }
  [[nodiscard]] uint32_t num_bufs() const { return num_bufs_; }
  [[nodiscard]] size_t completion_offset() const { return completion_offset_; }
  [[nodiscard]] int eventfd() const { return eventfd_.get(); }
  // The client's doorbell: it writes this one after a submit that found NEED_WAKEUP set.
  [[nodiscard]] int kick_fd() const { return kick_.get(); }
  // Whether its client said it kicks: then an idle client needs no timed poll.
  [[nodiscard]] bool client_kicks() const { return client_kicks_; }
  [[nodiscard]] const abi::RingView& tx_ring() const { return tx_; }
  // A GPU TX client's: frame i is the first buf_size() bytes in host buffer i (none without a
  // header region) and the rest in GPU buffer i. Set once, before the attachment is shared.
  void send_from_gpu(GpuTxBuffers buffers) { gpu_ = std::move(buffers); }
  [[nodiscard]] const GpuTxBuffers* gpu_buffers() const {
    return gpu_.memory.base != nullptr ? &gpu_ : nullptr;
  }
  AttachmentLifecycle lifecycle;
  AttachmentCounters counters;

  // ---- poller side ----
  // Up to `max` descriptors the client submitted, copied out of shared memory and validated;
  // returns how many. Stops at the first invalid one and marks the attachment violated, once
  // the frames taken reach the pacer's budget (spending them from it), and at a frame whose
  // send time is still to come (read whole again at the next take: nothing of it is kept).
  // While such a frame waits its submission is pending, so arm_wakeup() keeps the poller up.
  uint32_t take(daqiri_tx_desc* out, uint32_t max, TxPacer& pacer);
  uint32_t take(daqiri_tx_desc* out, uint32_t max) {
    TxPacer unpaced(0, 0, 0);
    return take(out, max, unpaced);
  }
  // Hands buffers back through the completion ring (and wakes the client if it sleeps);
  // `failed`: without their work done.
  void complete(const daqiri_tx_desc* done, uint32_t n, bool failed = false);
  // Before its poller sleeps: asks the client to kick (NEED_WAKEUP on the TX ring) and looks
  // again; false if a submission is waiting, and then the poller must not sleep.
  // (One that is cut off or let go has nothing to wait for: its ring is never read again.)
  bool arm_wakeup() const {
    if (lifecycle.released.load(std::memory_order_relaxed) ||
        lifecycle.violated.load(std::memory_order_relaxed)) {
      return true;
    }
    tx_.set_need_wakeup(true);
    return tx_.load_producer_seq_cst() == tx_cons_;
  }
  void disarm_wakeup() const { tx_.set_need_wakeup(false); }
  [[nodiscard]] const std::byte* buffer(uint32_t index) const {
    return buffers_.data() + uint64_t{index} * buf_size_;
  }
  void detach();

 private:
  TxAttachment(uint64_t id, memory::SharedMemory rings, memory::SharedMemory buffers,
               UniqueFd eventfd, UniqueFd kick, abi::RingView tx, abi::RingView completion,
               size_t completion_offset, uint32_t buf_size, uint32_t num_bufs, TxRules rules,
               bool client_kicks);
  [[nodiscard]] bool valid(const daqiri_tx_desc& d) const;

  uint64_t id_;
  memory::SharedMemory rings_;
  memory::SharedMemory buffers_;
  UniqueFd eventfd_;
  UniqueFd kick_;
  abi::RingView tx_;
  abi::RingView completion_;
  size_t completion_offset_;
  uint32_t buf_size_;
  uint32_t num_bufs_;
  TxRules rules_;
  bool client_kicks_;
  GpuTxBuffers gpu_;
  std::vector<uint8_t> with_daemon_;  // 1 while a buffer is submitted and not yet completed
  uint32_t tx_cons_ = 0;
  uint32_t comp_prod_ = 0;
};

// For a task that drains TX attachments (PollTask::arm_wakeups, disarm_wakeups): `of` maps an
// element of `set` to its attachment.
template <typename Set, typename Of>
bool arm_wakeups(const Set& set, Of of) {
  bool quiet = true;
  for (const auto& e : set)
    quiet &= of(e).arm_wakeup();
  return quiet;
}
template <typename Set, typename Of>
void disarm_wakeups(const Set& set, Of of) {
  for (const auto& e : set)
    of(e).disarm_wakeup();
}
// One poll of a TX task that copies each frame before it sends it (nothing stays on loan, so a
// closing attachment is let go at once): `drain` each live attachment of `set`, in the order
// the pacer serves them; true if one did work.
template <typename Drain>
bool serve_copying(const std::vector<TxAttachment*>& set, TxPacer& pacer, Drain drain) {
  bool work = false;
  pacer.refill();
  size_t first = pacer.first_served(set.size());
  for (size_t i = 0; i < set.size(); ++i) {
    TxAttachment* a = set[served(first, i, set.size())];
    if (a->lifecycle.released.load(std::memory_order_relaxed)) continue;
    if (a->lifecycle.closing.load(std::memory_order_acquire)) {
      a->detach();
      continue;
    }
    if (a->lifecycle.violated.load(std::memory_order_relaxed)) continue;
    work |= drain(*a);
  }
  return work;
}

// For such a task's needs_timed_wakeup: whether a client that did not say it kicks is
// attached (a frame it submits to a sleeping poller waits for the poller's timer).
template <typename Set, typename Of>
bool has_client_without_kicks(const Set& set, Of of) {
  return std::any_of(set.begin(), set.end(), [&](const auto& e) { return !of(e).client_kicks(); });
}

}  // namespace daqiri::dataplane
