#include "dataplane/rx_fanout.hpp"

#include <algorithm>

namespace daqiri::dataplane {

size_t RxFanout::begin() {
  gather();
  return reclaim();
}

size_t RxFanout::gather() {
  reclaimed_ = false;
  active_count_ = 0;
  for (RxAttachment* a : set_.load()) {
    if (a->lifecycle.released.load(std::memory_order_relaxed)) continue;
    if (a->lifecycle.closing.load(std::memory_order_acquire)) {
      a->release_all();
      continue;
    }
    if (a->lifecycle.violated.load(std::memory_order_relaxed)) continue;
    a->prefetch_consumer();
    active_[active_count_++] = a;
  }
  return active_count_;
}

size_t RxFanout::reclaim() {
  if (reclaimed_) return active_count_;
  reclaimed_ = true;
  bool fenced = take_fence();
  size_t kept = 0;
  for (size_t i = 0; i < active_count_; ++i) {
    if (active_[i]->reclaim(fenced)) active_[kept++] = active_[i];
  }
  active_count_ = kept;
  return active_count_;
}

RxAttachment* RxFanout::begin_single(uint32_t burst) {
  const Set& set = set_.load();
  if (set.size() != 1) return nullptr;
  RxAttachment* a = set.front();
  const AttachmentLifecycle& l = a->lifecycle;
  if (!a->lends_objects() || l.released.load(std::memory_order_relaxed) ||
      l.closing.load(std::memory_order_acquire) || l.violated.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  active_[0] = a;
  active_count_ = 1;
  reclaimed_ = true;
  // Left unread only after a poll that published: publish() looked at NEED_WAKEUP then, and a
  // poll after one that published nothing reads the index behind a fence, as reclaim() needs.
  bool fenced = take_fence();
  if (!fenced && a->may_defer_reclaim(burst)) return a;
  if (a->reclaim(fenced)) return a;
  active_count_ = 0;
  return nullptr;
}

bool RxFanout::must_wait(uint32_t burst) const {
  bool wait = false;
  for (size_t i = 0; i < active_count_; ++i) {
    RxAttachment* a = active_[i];
    if (a->backpressure() != Backpressure::kBlock) continue;
    bool full = a->free_slots() < burst;
    if (full && !a->stalled) bump(a->counters.stalls);  // counted once per stall, not per poll
    a->stalled = full;
    wait |= full;
  }
  return wait;
}

bool RxFanout::stalled() const {
  return std::any_of(active_.begin(), active_.begin() + active_count_,
                     [](const RxAttachment* a) { return a->stalled; });
}

bool RxFanout::holds_buffers() const {
  return std::any_of(active_.begin(), active_.begin() + active_count_,
                     [](const RxAttachment* a) { return a->holds_buffers(); });
}

bool RxFanout::arm_kicks() {
  bool quiet = true;
  for (size_t i = 0; i < active_count_; ++i)
    quiet &= active_[i]->arm_kick();
  return quiet;
}

void RxFanout::disarm_kicks() {
  for (size_t i = 0; i < active_count_; ++i)
    active_[i]->disarm_kick();
}

uint32_t RxFanout::blocking_room() const {
  uint32_t room = UINT32_MAX;
  for (size_t i = 0; i < active_count_; ++i) {
    if (active_[i]->backpressure() == Backpressure::kBlock) {
      room = std::min(room, active_[i]->free_slots());
    }
  }
  return room;
}

void RxFanout::count_no_buffer(uint64_t n) const {
  for (size_t i = 0; i < active_count_; ++i)
    bump(active_[i]->counters.dropped_no_buffer, n);
}

void RxFanout::publish() {
  for (size_t i = 0; i < active_count_; ++i)
    published_last_ |= active_[i]->publish();
}

bool RxFanout::add(RxAttachment* a, const Epoch& epoch) {
  // The poller copies the set into active_: a set larger than that array is never published.
  if (set_.load().size() >= active_.size()) return false;
  publish_added(set_, a, epoch);
  return true;
}

Grace RxFanout::remove(RxAttachment* a, const Epoch& epoch) {
  return publish_removed(set_, a, epoch);
}

}  // namespace daqiri::dataplane
