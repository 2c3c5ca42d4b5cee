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
      ledger_(ring.size(), std::move(pools)),
      compact_(compact) {}

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
  uint32_t cons = ledger_.returned();
  if (c == cons) return true;
  // Unsigned distances: valid iff cons <= c <= published_ in ring order.
  if (c - cons > published_ - cons) {
    bump(counters.bad_index, 1);
    lifecycle.violated.store(true, std::memory_order_release);
    return false;
  }
  uint32_t n = c - cons;
  ledger_.give_back(c);
  counters.on_loan.store(counters.on_loan.load(std::memory_order_relaxed) - n,
                         std::memory_order_relaxed);
  return true;
}

void RxAttachment::release_all() {
  ledger_.give_back(prod_);
  published_ = prod_;
  counters.on_loan.store(0, std::memory_order_relaxed);
  ring_.set_state(DAQIRI_RING_DETACHED);
  uint64_t one = 1;  // wake a sleeping client so it notices
  [[maybe_unused]] auto w = ::write(eventfd_.get(), &one, sizeof one);
  lifecycle.released.store(true, std::memory_order_release);
}

}  // namespace daqiri::dataplane
