// A bounded queue of small values from any number of producer threads to one consumer,
// lock-free: each cell carries a sequence number (Vyukov's bounded queue), so a producer claims
// a cell with one compare-and-swap on the tail and publishes it with a release store, and the
// consumer takes cells in order with acquire loads. What a producer wrote before push() (the
// frame it copied) is visible to the consumer after pop(), and ThreadSanitizer sees that order
// too: DPDK's rte_ring orders its plain stores with fences, which it does not model.
// Allocated once; push() and pop() neither allocate nor lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace daqiri::dataplane {

template <typename T>
class HandoffRing {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  // `capacity`: a power of two.
  explicit HandoffRing(size_t capacity)
      : cells_(std::make_unique<Cell[]>(capacity)), mask_(capacity - 1) {
    for (size_t i = 0; i < capacity; ++i)
      cells_[i].seq.store(i, std::memory_order_relaxed);
  }

  // Any thread. False when every cell is taken.
  bool push(const T& value) {
    size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      const size_t seq = c.seq.load(std::memory_order_acquire);
      const auto lag = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
      if (lag == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.value = value;
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (lag < 0) {
        return false;  // the consumer has not taken this cell's last value yet
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  // The one consumer: up to `max` values, in the order their pushes claimed cells.
  size_t pop(T* out, size_t max) {
    size_t n = 0;
    while (n < max) {
      Cell& c = cells_[head_ & mask_];
      if (c.seq.load(std::memory_order_acquire) != head_ + 1) break;
      out[n++] = c.value;
      c.seq.store(head_ + mask_ + 1, std::memory_order_release);
      ++head_;
    }
    return n;
  }

 private:
  struct Cell {
    std::atomic<size_t> seq{0};
    T value{};
  };
  std::unique_ptr<Cell[]> cells_;
  const size_t mask_;
  alignas(64) std::atomic<size_t> tail_{0};  // producers'
  alignas(64) size_t head_ = 0;              // the consumer's
};

}  // namespace daqiri::dataplane
