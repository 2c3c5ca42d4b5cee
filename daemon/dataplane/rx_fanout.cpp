#include "dataplane/rx_fanout.hpp"

#include <algorithm>

namespace daqiri::dataplane {

size_t RxFanout::begin() {
  active_count_ = 0;
  for (RxAttachment* a : set_.load()) {
    if (a->lifecycle.released.load(std::memory_order_relaxed)) continue;
    if (a->lifecycle.closing.load(std::memory_order_acquire)) {
      a->release_all();
      continue;
    }
    if (a->lifecycle.violated.load(std::memory_order_relaxed)) continue;
    if (!a->reclaim()) continue;
    active_[active_count_++] = a;
  }
  return active_count_;
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

uint16_t RxFanout::deliver(const daqiri_rx_desc& desc, uint32_t buffer,
                           const memory::BufferPool* pool, std::span<const std::byte> head) {
  uint16_t refs = 0;
  for (size_t i = 0; i < active_count_; ++i) {
    RxAttachment* a = active_[i];
    if (a->free_slots() == 0) {
      bump(a->counters.dropped_ring_full, 1);
      continue;
    }
    a->push(desc, buffer, pool, head);
    bump(a->counters.packets, 1);
    bump(a->counters.bytes, desc.length);
    ++refs;
  }
  return refs;
}

void RxFanout::publish() {
  for (size_t i = 0; i < active_count_; ++i)
    active_[i]->publish();
}

void RxFanout::add(RxAttachment* a, const Epoch& epoch) {
  publish_added(set_, a, epoch);
}

void RxFanout::remove(RxAttachment* a, const Epoch& epoch) {
  publish_removed(set_, a, epoch);
}

}  // namespace daqiri::dataplane
