// Delivery of one flow's packets to every attachment of the flow, without copies: one buffer,
// one descriptor per attachment, a reference per descriptor. Poller side is allocation- and
// lock-free; the attachment set is a Published snapshot changed by control threads.
#pragma once

#include <array>
#include <utility>
#include <vector>

#include "dataplane/rx_attachment.hpp"
#include "dataplane/snapshot.hpp"

namespace daqiri::dataplane {

inline constexpr size_t kMaxAttachmentsPerFlow = 16;

class RxFanout {
 public:
  using Set = std::vector<RxAttachment*>;
  RxFanout() : set_(std::make_unique<const Set>()) {}

  // ---- poller side, once per poll ----
  // Loads the attachment set, returns released buffers, lets go of closing attachments, and
  // gathers the ones to deliver to. Returns how many there are. gather() then reclaim().
  size_t begin();
  // begin() in two steps, for a poller with a wait between them (a receive syscall): gather()
  // lets go of closing attachments, collects the others and starts loading their consumer
  // indices (lines the client's core wrote); reclaim() returns what they released, drops any
  // that lied, and returns how many remain. Only the first reclaim() after a gather() works;
  // later ones return the count, so a poller may call it wherever it might be first.
  size_t gather();
  size_t reclaim();
  // begin() for the usual case, a set of one live attachment that lends_objects(): takes back
  // what it released and returns it, without begin()'s loops. Null, with nothing done, for any
  // other set (or an attachment found lying now): then begin() is the way. While the polls
  // publish, it reads the client's consumer index only once a few bursts of `burst` frames are
  // on loan (RxAttachment::may_defer_reclaim), not every poll: that load waits for a line the
  // client's core holds, and each read makes the client's next release fetch the line back.
  RxAttachment* begin_single(uint32_t burst);
  [[nodiscard]] size_t active() const { return active_count_; }
  // The attachment to deliver to when there is exactly one (RxAttachment::Run), else null.
  [[nodiscard]] RxAttachment* single() const { return active_count_ == 1 ? active_[0] : nullptr; }
  // Whether an attachment with blocking backpressure lacks room for `burst` more packets.
  [[nodiscard]] bool must_wait(uint32_t burst) const;
  // Whether the last must_wait() found an attachment whose full ring holds the flow back.
  [[nodiscard]] bool stalled() const;
  // Whether an attachment holds buffers the last reclaim() did not take back.
  [[nodiscard]] bool holds_buffers() const;
  // For a flow that waits for releases, before its poller sleeps: asks the clients that hold
  // buffers to kick (RxAttachment::arm_kick); false if one released meanwhile.
  bool arm_kicks();
  void disarm_kicks();
  // The free slots of the fullest attachment with blocking backpressure (UINT32_MAX: none).
  [[nodiscard]] uint32_t blocking_room() const;
  // Before a receive of up to `n` packets (RxAttachment::prepare).
  void prepare(uint32_t n) const {
    for (size_t i = 0; i < active_count_; ++i)
      active_[i]->prepare(n);
  }
  // Packets every active attachment lost because the flow's pool was empty.
  void count_no_buffer(uint64_t n) const;
  // Hands one buffer to every active attachment with room; returns the references taken.
  // `head`: header bytes the NIC split off (RxAttachment::push). Inline, so that the caller's
  // descriptor stays in registers: built on the stack and read back whole, it made every
  // packet wait for the store buffer (and the ring lines the client holds) to drain.
  [[gnu::always_inline]] uint16_t deliver(const daqiri_rx_desc& desc, uint32_t buffer,
                                          const memory::BufferPool* pool,
                                          std::span<const std::byte> head = {}) {
    uint16_t refs = 0;
    for (size_t i = 0; i < active_count_; ++i) {
      RxAttachment* a = active_[i];
      if (a->free_slots() == 0) {
        bump(a->no_slot_counter(), 1);
        continue;
      }
      a->push(desc, buffer, pool, head);  // counted when published
      ++refs;
    }
    return refs;
  }
  void publish();

  // Deliveries of a run of frames to this flow (a poll's, or consecutive frames of one): with
  // one client, full descriptors and no split-off headers the client's ring state stays in
  // registers (RxAttachment::Run), else deliver() above. finish() before anything else
  // delivers to the flow or publishes. (A compact ring takes the slower way here: choosing the
  // layout per run cost this loop a tenth at 64-byte frames, in registers; the poll a lone
  // catch-all's one client owns has a loop of its own for each layout, DpdkRxQueue.)
  class Run {
   public:
    Run() = default;
    Run(RxFanout& fanout, const memory::BufferPool* pool, bool heads)
        : fanout_(&fanout), pool_(pool), single_(heads ? nullptr : fanout.single()) {
      if (single_ != nullptr && single_->compact()) single_ = nullptr;
      if (single_ != nullptr) ring_ = RxAttachment::Run(*single_, pool);
      alone_ = single_ != nullptr && single_->lends_objects();
    }
    // `object`: the buffer's in its pool's Owner (null where the pool has none): with one
    // client, lent with it (RxAttachment::Run::push_alone).
    [[gnu::always_inline]] uint16_t deliver(const daqiri_rx_desc& desc, uint32_t buffer,
                                            std::span<const std::byte> head = {},
                                            void* object = nullptr) {
      if (single_ == nullptr) return fanout_->deliver(desc, buffer, pool_, head);
      if (alone_ ? ring_.push_alone<false>(desc, object) : ring_.push<false>(desc, buffer)) {
        return 1;
      }
      bump(single_->no_slot_counter(), 1);
      return 0;
    }
    void finish() {
      if (single_ != nullptr) ring_.finish();
    }

   private:
    RxFanout* fanout_ = nullptr;
    const memory::BufferPool* pool_ = nullptr;
    RxAttachment* single_ = nullptr;
    bool alone_ = false;
    RxAttachment::Run ring_;
  };

  // ---- control side (callers serialise) ----
  // Attachments in the set, closing ones included (a snapshot load: the poller may ask too).
  [[nodiscard]] size_t size() const { return set_.load().size(); }
  [[nodiscard]] bool full() const { return size() >= kMaxAttachmentsPerFlow; }
  // False, with nothing changed, when the set holds kMaxAttachmentsPerFlow already.
  [[nodiscard]] bool add(RxAttachment* a, const Epoch& epoch);
  Grace remove(RxAttachment* a, const Epoch& epoch);

 private:
  // Whether this poll's reclaim looks for a missed NEED_WAKEUP behind a fence: when the last
  // poll published nothing (RxAttachment::publish).
  bool take_fence() { return !std::exchange(published_last_, false); }
  Published<Set> set_;
  std::array<RxAttachment*, kMaxAttachmentsPerFlow> active_{};
  size_t active_count_ = 0;
  bool published_last_ = false;
  bool reclaimed_ = false;  // since the last gather()
};

}  // namespace daqiri::dataplane
