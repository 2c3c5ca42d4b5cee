#include "dataplane/rx_attachment.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

namespace daqiri::dataplane {

Result<std::unique_ptr<RxAttachment>> RxAttachment::create(uint64_t id, uint32_t ring_size,
                                                           Backpressure backpressure,
                                                           std::vector<memory::BufferPool*> pools,
                                                           bool compact) {
  if (pools.empty() || pools.size() > kMaxRegions) {
    return fail(ErrorCode::kResourceExhausted,
                "an attachment takes 1 to " + std::to_string(kMaxRegions) + " flow pools");
  }
  daqiri_ring_kind kind = compact ? DAQIRI_RING_RX_COMPACT : DAQIRI_RING_RX;
  uint32_t desc_size = compact ? sizeof(daqiri_rx_desc_compact) : sizeof(daqiri_rx_desc);
  size_t bytes = abi::RingView::bytes_for(ring_size, desc_size);
  auto rings = memory::SharedMemory::create("rx-ring-" + std::to_string(id), bytes, false);
  if (!rings) return std::unexpected(rings.error());
  if (auto ok = rings->seal_size(); !ok) return std::unexpected(ok.error());
  UniqueFd efd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  UniqueFd kick(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!efd || !kick) return fail_errno("eventfd");
  auto ring = abi::RingView::create(rings->data(), kind, ring_size, desc_size);
  return std::unique_ptr<RxAttachment>(new RxAttachment(id, std::move(*rings), std::move(efd),
                                                        std::move(kick), ring, backpressure,
                                                        std::move(pools), compact));
}

RxAttachment::RxAttachment(uint64_t id, memory::SharedMemory rings, UniqueFd eventfd, UniqueFd kick,
                           abi::RingView ring, Backpressure backpressure,
                           std::vector<memory::BufferPool*> pools, bool compact)
    : id_(id),
      rings_(std::move(rings)),
      eventfd_(std::move(eventfd)),
      kick_(std::move(kick)),
      ring_(ring),
      backpressure_(backpressure),
      pools_(std::move(pools)),
      shadow_(ring.size()),
      compact_(compact) {
  if (pools_.size() == 1 && pools_[0]->has_returner()) objects_.resize(ring.size());
}

bool RxAttachment::publish() {
  if (prod_ == published_) return false;
  uint32_t n = prod_ - published_;
  published_ = prod_;
  ring_.publish_producer_release(prod_);
  // Counted here, once a burst: per packet the counters took two more stores each.
  bump(counters.packets, n);
  bump(counters.bytes, unpublished_bytes_);
  unpublished_bytes_ = 0;
  bump(counters.on_loan, n);
  if (ring_.consumer_wants_wakeup()) wake();
  return true;
}

void RxAttachment::wake() {
  woken_at_ = published_;
  uint64_t one = 1;
  [[maybe_unused]] auto w = ::write(eventfd_.get(), &one, sizeof one);
}

bool RxAttachment::reclaim(bool fenced) {
  uint32_t c = ring_.load_consumer();
  // A consumer behind, maybe asleep, and not woken since the last publish: publish() may have
  // missed its NEED_WAKEUP. One look behind a fence after a publish is enough (a consumer that
  // sets the flag after it will see that producer index before it sleeps); fencing every poll
  // would cost more than the rest of the poll (the store buffer drains first).
  if (c != published_ && woken_at_ != published_ && fenced_at_ != published_) {
    if (fenced) {
      ring_.fence_after_publish();
      fenced_at_ = published_;
    }
    if (ring_.consumer_wants_wakeup()) wake();
  }
  if (c == cons_) return true;
  // Unsigned distances: valid iff cons_ <= c <= published_ in ring order.
  if (c - cons_ > published_ - cons_) {
    bump(counters.bad_index, 1);
    lifecycle.violated.store(true, std::memory_order_release);
    return false;
  }
  uint32_t n = c - cons_;
  unref_range(c);
  counters.on_loan.store(counters.on_loan.load(std::memory_order_relaxed) - n,
                         std::memory_order_relaxed);
  return true;
}

void RxAttachment::unref_range(uint32_t to) {
  if (pools_.size() > 1) {
    for (; cons_ != to; ++cons_)
      unref(shadow_[cons_ & ring_.mask()]);
    return;
  }
  // One pool: slots up to by_index_until_ go back by their buffer indices (or kNoBuffer, which
  // the pool skips), those pushed alone after it as their objects, without a look at an index
  // or a count. Each in at most two runs of the ring.
  uint32_t by_index = to - cons_;
  if (lends_objects()) {
    by_index = std::min(by_index, by_index_until_ - cons_);
    if (by_index_until_ - cons_ <= to - cons_) by_index_until_ = to;
  }
  for (uint32_t end = cons_ + by_index; cons_ != end;) {
    uint32_t at = cons_ & ring_.mask();
    uint32_t run = std::min(end - cons_, ring_.size() - at);
    if (lends_objects()) {
      return_mixed(at, run);
    } else {
      pools_[0]->unref_many(shadow_.data() + at, run);
    }
    cons_ += run;
  }
  while (cons_ != to) {
    uint32_t at = cons_ & ring_.mask();
    uint32_t run = std::min(to - cons_, ring_.size() - at);
    pools_[0]->return_objects(objects_.data() + at, run);
    cons_ += run;
  }
}

// Slots pushed by index and alone, mixed (only around a change in the flow's clients): each
// stretch of one kind its own way.
void RxAttachment::return_mixed(uint32_t at, uint32_t n) {
  const uint32_t* entry = shadow_.data() + at;
  for (uint32_t i = 0; i < n;) {
    uint32_t j = i;
    while (j < n && entry[j] != kAlone)
      ++j;
    if (j > i) pools_[0]->unref_many(entry + i, j - i);
    uint32_t k = j;
    while (k < n && entry[k] == kAlone)
      ++k;
    if (k > j) pools_[0]->return_objects(objects_.data() + at + j, k - j);
    i = k;
  }
}

void RxAttachment::release_all() {
  unref_range(prod_);
  published_ = prod_;
  counters.on_loan.store(0, std::memory_order_relaxed);
  ring_.set_state(DAQIRI_RING_DETACHED);
  uint64_t one = 1;  // wake a sleeping client so it notices
  [[maybe_unused]] auto w = ::write(eventfd_.get(), &one, sizeof one);
  lifecycle.released.store(true, std::memory_order_release);
}

}  // namespace daqiri::dataplane
