// Buffer indices coming back from DPDK: an mbuf's external-buffer free callback runs on
// whichever thread frees the mbuf (the TX poller inside rte_eth_tx_burst, or another poller
// when a net_ring hands the mbuf to a receiver), so this is multi-producer, single-consumer.
// Bounded and wait-free for producers: it holds every buffer of the attachment at once, and
// a buffer is in flight at most once, so a push never finds the queue full.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>

namespace daqiri::backends::dpdk {

class CompletionQueue {
 public:
  explicit CompletionQueue(uint32_t capacity)
      : size_(std::bit_ceil(capacity)), cells_(new Cell[size_]) {
    for (uint32_t i = 0; i < size_; ++i)
      cells_[i].sequence.store(i, std::memory_order_relaxed);
  }

  // Any thread.
  void push(uint32_t value) {
    uint32_t pos = tail_.fetch_add(1, std::memory_order_relaxed);
    Cell& c = cells_[pos & (size_ - 1)];
    c.value = value;
    c.sequence.store(pos + 1, std::memory_order_release);
  }

  // The consumer thread only.
  bool pop(uint32_t& value) {
    Cell& c = cells_[head_ & (size_ - 1)];
    if (c.sequence.load(std::memory_order_acquire) != head_ + 1) return false;
    value = c.value;
    c.sequence.store(head_ + size_, std::memory_order_relaxed);
    ++head_;
    return true;
  }

 private:
  struct Cell {
    std::atomic<uint32_t> sequence;
    uint32_t value;
  };
  uint32_t size_;
  std::unique_ptr<Cell[]> cells_;
  alignas(64) std::atomic<uint32_t> tail_{0};
  alignas(64) uint32_t head_ = 0;
};

}  // namespace daqiri::backends::dpdk
