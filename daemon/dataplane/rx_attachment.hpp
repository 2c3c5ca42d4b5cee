// One client's RX lease on a flow: its descriptor ring in shared memory, its eventfds, and the
// daemon's ledger of every buffer the ring has on loan (LoanLedger), the only record the daemon
// trusts. Created by control; used by the flow's poller only once installed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "daqiri/abi.h"
#include "daqiri/ring.hpp"
#include "dataplane/attachment_state.hpp"
#include "dataplane/descriptor_store.hpp"
#include "dataplane/loan_ledger.hpp"
#include "dataplane/prefetch.hpp"
#include "memory/buffer_pool.hpp"

namespace daqiri::dataplane {

class RxAttachment {
 public:
  // `pools`: the flow pools it is fed from, in region-table order (one for a flow attachment,
  // one per flow for a queue attachment). They must outlive it.
  // `compact`: a ring of daqiri_rx_desc_compact (no stamp, payload offset or stream).
  static Result<std::unique_ptr<RxAttachment>> create(uint64_t id, uint32_t ring_size,
                                                      Backpressure backpressure,
                                                      std::vector<memory::BufferPool*> pools,
                                                      bool compact = false);
  static constexpr size_t kMaxRegions = DAQIRI_MAX_REGIONS;
  // Bytes create() allocates for a ring of `ring_size` (the shared ring, the ledger's entry and
  // object tables), for charging them before they are.
  static uint64_t footprint(uint32_t ring_size, bool compact) {
    uint32_t desc = compact ? sizeof(daqiri_rx_desc_compact) : sizeof(daqiri_rx_desc);
    return abi::RingView::bytes_for(ring_size, desc) +
           uint64_t{ring_size} * (sizeof(uint32_t) + sizeof(void*));
  }

  [[nodiscard]] uint64_t id() const { return id_; }
  [[nodiscard]] Backpressure backpressure() const { return backpressure_; }
  [[nodiscard]] memory::SharedMemory& rings() { return rings_; }
  // The ring itself, for a consumer inside the daemon (the GPU copy engine).
  [[nodiscard]] const abi::RingView& ring() const { return ring_; }
  [[nodiscard]] bool compact() const { return compact_; }
  [[nodiscard]] int eventfd() const { return eventfd_.get(); }
  // The client's doorbell: it writes this one after a release that found NEED_KICK set.
  [[nodiscard]] int kick_fd() const { return kick_.get(); }
  AttachmentLifecycle lifecycle;
  AttachmentCounters counters;

  // ---- control side, any time ----
  // The most buffers it may hold at once while it shares its flows' pools with other
  // attachments (DataPlane sets it as they come and go); beyond it, frames are its drops
  // (dropped_over_share), not the other clients' shortage. Starts as the whole ring.
  void set_share(uint32_t buffers) { share_.store(buffers, std::memory_order_relaxed); }
  [[nodiscard]] uint32_t share() const { return share_.load(std::memory_order_relaxed); }

  // ---- poller side ----
  // Slots it may fill now: its ring's room, within its share (which may have shrunk below
  // what it holds: then none).
  [[nodiscard]] uint32_t free_slots() const {
    uint32_t used = prod_ - ledger_.returned();
    uint32_t cap = std::min(ring_.size(), share());
    return used < cap ? cap - used : 0;
  }
  // The counter a frame it had no slot for goes to: its ring was full, or its share was.
  [[nodiscard]] std::atomic<uint64_t>& no_slot_counter() {
    return prod_ - ledger_.returned() >= ring_.size() ? counters.dropped_ring_full
                                                      : counters.dropped_over_share;
  }
  bool stalled = false;  // block backpressure: its full ring holds the flow back now
  // Whether the client holds buffers that the last reclaim() did not take back.
  [[nodiscard]] bool holds_buffers() const { return ledger_.returned() != prod_; }
  // Before its poller sleeps while the flow waits for releases: asks the client to kick
  // (NEED_KICK) and looks again; false if it released meanwhile (then the poller must not
  // sleep). An attachment that holds nothing has nothing to release: it is not asked.
  bool arm_kick() {
    if (!holds_buffers()) return true;
    kick_armed_ = true;
    ring_.set_need_kick(true);
    return ring_.load_consumer_seq_cst() == ledger_.returned();
  }
  void disarm_kick() {
    if (!kick_armed_) return;
    kick_armed_ = false;
    ring_.set_need_kick(false);
  }
  // A descriptor that lends nothing (a frame the NIC split whose bytes all went to the header).
  static constexpr uint32_t kNoBuffer = LoanLedger::kNoBuffer;
  // How many ring lines ahead of the producer are prefetched for writing (Run::push), by
  // layout. Compact slots go four to a line, so a burst spans fewer lines and 32 ahead pays at
  // large bursts; full slots, two to a line, gain nothing past 16 (measured with run-dpdk).
  template <bool kCompact>
  static constexpr uint32_t kPrefetchLines = kCompact ? 32 : 16;
  // Lends `buffer` of `pool` (one of this attachment's pools) under `desc`. `head`: bytes the
  // NIC split off into memory of the daemon's own, kept beside the slot (see reserve_heads).
  [[gnu::always_inline]] void push(const daqiri_rx_desc& desc, uint32_t buffer,
                                   const memory::BufferPool* pool,
                                   std::span<const std::byte> head = {}) {
    if (head_size_ != 0 && !head.empty()) {
      std::memcpy(heads_.data() + size_t{prod_ & ring_.mask()} * head_size_, head.data(),
                  std::min<size_t>(head.size(), head_size_));
    }
    if (compact_) {
      push_one<true>(desc, buffer, pool);
    } else {
      push_one<false>(desc, buffer, pool);
    }
  }
  // Pushes into this attachment alone with its producer state in registers, for a poller
  // whose run of frames goes to a flow with this one client and no split-off headers. push()
  // keeps the producer index and the byte count in the attachment: two more stores a frame,
  // queued in the store buffer behind the slot stores that wait for the client's lines.
  // finish() writes the state back; nothing else may push to the attachment in between.
  // push<kCompact>: kCompact must be the attachment's compact(). The layout is a template
  // argument, not a member: decided per frame it is a branch per 64-byte frame, and a Run per
  // layout would keep the poller's state out of registers.
  class Run {
   public:
    template <bool kCompact>
    using Slot = std::conditional_t<kCompact, daqiri_rx_desc_compact, daqiri_rx_desc>;
    template <bool kCompact>
    static constexpr uint32_t kSlotsPerLine = DAQIRI_CACHE_LINE / sizeof(Slot<kCompact>);
    Run() = default;
    Run(RxAttachment& a, const memory::BufferPool* pool)
        : a_(&a),
          slots_(a.ring_.slot<std::byte>(0)),
          entries_(a.ledger_.entries()),
          objects_(a.ledger_.objects()),
          mask_(a.ring_.mask()),
          prod_(a.prod_),
          end_(a.prod_ + a.free_slots()) {
      while (a.ledger_.pools()[region_] != pool)
        ++region_;  // at most kMaxRegions compares
    }
    // False: the ring is full.
    template <bool kCompact>
    [[gnu::always_inline]] bool push(const daqiri_rx_desc& desc, uint32_t buffer) {
      uint32_t at = prod_ & mask_;
      if (!emplace<kCompact>(desc, region_)) return false;
      entries_[at] = LoanLedger::entry(region_, buffer);
      by_index_ = true;
      return true;
    }
    // push() of a buffer lent to this attachment alone (its one reference), as its pool's
    // object (BufferPool::Owner) instead of its index: when the client releases it, the
    // object goes straight back to the pool's owner in a run with its neighbours
    // (LoanLedger::give_back), as the bound of docs/benchmarks.md returns mbufs. Only for an
    // attachment that lends_objects() (one pool: region 0). Its ledger entry (kAlone) is
    // written only if a push by index follows it while it is on loan (finish()): a store a
    // frame less on the path where stores queue behind the client's ring lines.
    template <bool kCompact>
    [[gnu::always_inline]] bool push_alone(const daqiri_rx_desc& desc, void* object) {
      uint32_t at = prod_ & mask_;
      if (!emplace<kCompact>(desc, 0)) return false;
      objects_[at] = object;
      return true;
    }
    // Bytes of the descriptors pushed.
    [[nodiscard]] uint64_t bytes() const { return bytes_; }
    void finish() {
      // The slots pushed alone before a push by index join the stretch the ledger gives back
      // entry by entry: marked now.
      if (by_index_) a_->ledger_.mark_by_index(a_->prod_, prod_);
      a_->prod_ = prod_;
      a_->unpublished_bytes_ += bytes_;
    }

   private:
    // The slot (its ledger entry is the caller's).
    template <bool kCompact>
    [[gnu::always_inline]] bool emplace(const daqiri_rx_desc& desc, uint16_t region) {
      if (prod_ == end_) return false;
      // How far ahead slots are prefetched for writing: enough lines in flight to cover a
      // core-to-core round trip, few enough for the core's fill buffers.
      constexpr uint32_t kAhead = kPrefetchLines<kCompact> * kSlotsPerLine<kCompact>;
      if ((prod_ & (kSlotsPerLine<kCompact> - 1)) == 0) {
        prefetch_for_write(slot<kCompact>((prod_ + kAhead) & mask_));
      }
      if constexpr (kCompact) {
        store_rx_desc_compact(slot<true>(prod_ & mask_), desc, region);
      } else {
        store_rx_desc(slot<false>(prod_ & mask_), desc, region);
      }
      bytes_ += desc.length;
      ++prod_;
      return true;
    }
    template <bool kCompact>
    [[nodiscard]] Slot<kCompact>* slot(uint32_t index) const {
      return reinterpret_cast<Slot<kCompact>*>(slots_) + index;
    }
    RxAttachment* a_ = nullptr;
    std::byte* slots_ = nullptr;
    uint32_t* entries_ = nullptr;
    void** objects_ = nullptr;
    uint32_t mask_ = 0;
    uint32_t prod_ = 0;
    uint32_t end_ = 0;
    uint16_t region_ = 0;
    uint64_t bytes_ = 0;
    bool by_index_ = false;  // push() without the object: the slot goes back by reference count
  };
  // Whether Run::push_alone() may be used: one pool, whose buffers go back to their owner.
  [[nodiscard]] bool lends_objects() const { return ledger_.lends_objects(); }
  // Before a receive of up to `n` packets: starts taking the cache lines of the slots they
  // will fill (push keeps kPrefetchLines ahead after that).
  void prepare(uint32_t n) const {
    uint32_t per_line = slots_per_line();
    uint32_t lines = compact_ ? kPrefetchLines<true> : kPrefetchLines<false>;
    n = std::min({n, free_slots(), lines * per_line});
    for (uint32_t i = 0; i < n; i += per_line)
      prefetch_for_write(ring_.slot<std::byte>(prod_ + i));
  }
  // ---- control side, before the attachment is installed ----
  // Room for `bytes` split-off header bytes per slot, for a consumer inside the daemon (the
  // GPU engine of a header-data split ring).
  void reserve_heads(uint32_t bytes) {
    head_size_ = bytes;
    heads_.assign(size_t{ring_.size()} * bytes, std::byte{0});
  }
  // The header bytes kept for slot `counter` (reserve_heads' size).
  [[nodiscard]] const std::byte* head(uint32_t counter) const {
    return heads_.data() + size_t{counter & ring_.mask()} * head_size_;
  }
  [[nodiscard]] uint32_t head_size() const { return head_size_; }
  [[nodiscard]] const std::vector<memory::BufferPool*>& pools() const { return ledger_.pools(); }
  // Makes pushed descriptors visible, counts them, and wakes a sleeping client; whether there
  // were any.
  // The producer index is stored without a fence (a seq_cst store made every poll wait for
  // the store buffer to drain: the ring lines on their way from the client's core), so the
  // NEED_WAKEUP load after it may miss a consumer going to sleep just then. reclaim() looks
  // again each poll while the consumer is behind and unwoken, and once a poll has published
  // nothing (RxFanout) it looks behind a fence, once per published index: a missed wakeup
  // costs at most a poll or two.
  bool publish();
  // Starts loading the consumer index (reclaim() reads it).
  void prefetch_consumer() const { ring_.prefetch_consumer(); }
  // Whether a poll may leave the consumer index unread (RxFanout::begin_single): fewer than
  // kDeferredSlots (at most a quarter of the ring) on loan, and room for a burst of `burst`
  // even if the client has released none of them, so that nothing is dropped or waits for it.
  static constexpr uint32_t kDeferredSlots = 128;
  [[nodiscard]] bool may_defer_reclaim(uint32_t burst) const {
    return prod_ - ledger_.returned() < std::min(kDeferredSlots, ring_.size() / 4) &&
           free_slots() >= burst;
  }
  // Takes back what the client released. False (and `violated`) when the client's consumer
  // index is impossible: outside [our consumer, our producer]. `fenced`: look for a missed
  // wakeup behind a fence (see publish()).
  bool reclaim(bool fenced = true);
  // Returns every buffer still on loan and marks the ring detached; the poller's last act.
  void release_all();

 private:
  RxAttachment(uint64_t id, memory::SharedMemory rings, UniqueFd eventfd, UniqueFd kick,
               abi::RingView ring, Backpressure backpressure,
               std::vector<memory::BufferPool*> pools, bool compact);
  [[nodiscard]] uint32_t slots_per_line() const {
    return compact_ ? Run::kSlotsPerLine<true> : Run::kSlotsPerLine<false>;
  }
  template <bool kCompact>
  [[gnu::always_inline]] void push_one(const daqiri_rx_desc& desc, uint32_t buffer,
                                       const memory::BufferPool* pool) {
    Run run(*this, pool);
    run.push<kCompact>(desc, buffer);  // the caller saw a free slot
    run.finish();
  }
  void wake();

  uint64_t id_;
  memory::SharedMemory rings_;
  UniqueFd eventfd_;
  UniqueFd kick_;
  abi::RingView ring_;
  Backpressure backpressure_;
  // What [ledger_.returned(), prod_) lends: the consumer index validated and reclaimed up to
  // is its returned().
  LoanLedger ledger_;
  std::vector<std::byte> heads_;  // split-off header bytes, head_size_ per slot
  uint32_t head_size_ = 0;
  bool compact_ = false;
  uint32_t prod_ = 0;  // our producer index
  uint32_t published_ = 0;
  uint64_t unpublished_bytes_ = 0;  // of the descriptors pushed since the last publish
  uint32_t woken_at_ = 0;           // the producer index the last eventfd signal announced
  uint32_t fenced_at_ = 0;          // the producer index the last fenced NEED_WAKEUP look was after
  bool kick_armed_ = false;
  std::atomic<uint32_t> share_{UINT32_MAX};
};

}  // namespace daqiri::dataplane
