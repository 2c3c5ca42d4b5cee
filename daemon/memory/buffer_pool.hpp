// Fixed-size buffers carved from one SharedMemory region, with a free queue and per-buffer
// reference counts (a buffer delivered to several attachments returns when the last lets go).
// The free list is FIFO, not a stack: clients release in ring order, so buffers come back in
// the order they were handed out and the next burst again lands in consecutive buffers. A
// burst of equal-sized frames is then one strided array in the client's mapping (Python's
// Burst.payloads() is a view, not a gather).
// A free buffer's count reads 1, what alloc() hands it out with: a buffer that goes to one
// reader and back costs no store to its count.
// Owned by one poller thread once installed: no atomics, no locks, no allocation after create.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "memory/device_memory.hpp"
#include "memory/page_arena.hpp"
#include "memory/shared_memory.hpp"

namespace daqiri::memory {

class BufferPool {
 public:
  // Where a buffer goes when its last reference does: back on the pool's free queue, which
  // alloc() takes from; straight back to the allocator that owns the buffers (a DPDK mempool:
  // return_to()); or nowhere, its count left at 0 for the owner that picks buffers itself (an
  // RDMA remote window: make_owner_managed()).
  enum class Mode : uint8_t { kFreeQueue, kReturnedToOwner, kOwnerManaged };
  [[nodiscard]] Mode mode() const { return mode_; }

  // A pool in a memfd of its own, or, with an arena, in a slab it shares with other pools;
  // sealed read-only for everyone else (clients map it PROT_READ, reopened O_RDONLY).
  static Result<BufferPool> create(const std::string& name, uint32_t buf_size, uint32_t num_bufs,
                                   bool huge, PageArena* arena = nullptr);
  // A pool over memory the host does not map (GPU memory a NIC writes into): the same
  // bookkeeping, but buffer() is a device address and there is no memory() to share; the pool
  // keeps the memory's owner alive. INVALID_ARGUMENT when the pool does not fit.
  static Result<BufferPool> over_device(const DeviceMemory& memory, uint32_t buf_size,
                                        uint32_t num_bufs);

  [[nodiscard]] uint32_t buf_size() const { return buf_size_; }
  [[nodiscard]] uint32_t num_bufs() const { return num_bufs_; }
  [[nodiscard]] uint32_t available() const { return count_; }
  [[nodiscard]] std::byte* buffer(uint32_t index) const { return data_ + offset(index); }
  // The buffer whose first byte is at `start`, without a division (an exact quotient is the
  // dividend, shifted, times the inverse of the divisor's odd part modulo 2^64).
  [[nodiscard]] uint32_t index_at(const std::byte* start) const {
    auto bytes = static_cast<uint64_t>(start - buffer(0));
    return static_cast<uint32_t>((bytes >> size_shift_) * odd_inverse_);
  }
  // Where a buffer starts in memory(): what descriptors carry.
  [[nodiscard]] uint64_t offset(uint32_t index) const {
    return base_ + uint64_t{index} * buf_size_;
  }
  // The memfd clients map: the pool's own, or the slab it shares (starting at base()). Not for
  // a pool on_device().
  [[nodiscard]] SharedMemory& memory() const { return *memory_; }
  [[nodiscard]] bool on_device() const { return memory_ == nullptr; }
  // Where offsets count from (the memfd's mapping, or the device memory) and how far they reach.
  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] uint64_t mapped_bytes() const {
    return memory_ ? memory_->size() : uint64_t{buf_size_} * num_bufs_;
  }
  [[nodiscard]] uint64_t base() const { return base_; }

  // Takes up to n free buffers into `out`, oldest freed first; returns how many. Each starts
  // with one reference.
  uint32_t alloc(uint32_t* out, uint32_t n) {
    uint32_t got = 0;
    for (auto run = oldest_free(n); !run.empty(); run = oldest_free(n - got)) {
      std::copy(run.begin(), run.end(), out + got);
      got += static_cast<uint32_t>(run.size());
      take(static_cast<uint32_t>(run.size()));
    }
    return got;
  }
  // The oldest free buffers, up to `n` of them, as one run of the queue (which wraps, so fewer
  // may come back while more are free), for a caller that maps each to something else on the
  // way out; take() them then. alloc() copies them out run by run.
  [[nodiscard]] std::span<const uint32_t> oldest_free(uint32_t n) const {
    return {free_.data() + head_, std::min({n, count_, num_bufs_ - head_})};
  }
  // Takes the first `n` buffers of oldest_free() (n at most its size).
  void take(uint32_t n) {
    head_ += n;
    if (head_ == num_bufs_) head_ = 0;
    count_ -= n;
  }
  // Sets the references of a buffer in use (0 frees it).
  void set_refs(uint32_t index, uint16_t refs) {
    if (refs == 0) {
      push_free(index);
      return;
    }
    refs_[index] = refs;
  }
  // A buffer alloc() handed out went to `refs` readers (0: none, it is free again). It holds
  // one reference already, so a buffer with one reader costs no store.
  void lend(uint32_t index, uint16_t refs) {
    if (refs != 1) set_refs(index, refs);
  }
  // Drops one reference; the buffer returns to the free queue at zero.
  void unref(uint32_t index) {
    if (refs_[index] == 1) {
      push_free(index);
      return;
    }
    --refs_[index];
  }
  // unref() of each of `n` indices in turn; an index >= num_bufs() names none and is skipped.
  // Keeps the queue's ends in registers, where a loop of unref() goes through memory for them.
  void unref_many(const uint32_t* indices, uint32_t n) {
    if (mode_ == Mode::kOwnerManaged) {
      for (uint32_t i = 0; i < n; ++i)
        if (indices[i] < num_bufs_) --refs_[indices[i]];
      return;
    }
    if (mode_ == Mode::kReturnedToOwner) {
      return_many(indices, n);
      return;
    }
    uint32_t tail = head_ + count_;
    if (tail >= num_bufs_) tail -= num_bufs_;
    uint32_t freed = 0;
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t b = indices[i];
      if (!drop_last_ref(b)) continue;
      free_[tail] = b;
      if (++tail == num_bufs_) tail = 0;
      ++freed;
    }
    count_ += freed;
  }
  [[nodiscard]] uint16_t refs(uint32_t index) const { return refs_[index]; }
  // For a pool whose free buffers another allocator keeps (a DPDK mempool, where the PMD takes
  // them from): a buffer whose last reference goes is handed straight back to it, as that
  // allocator's object `objects[index]`, instead of joining the free queue for the owner to look
  // its objects up later (a store and two loads more a buffer). In runs of up to kReturnRun, as
  // many as a mempool's cache takes in one put: smaller runs send the cache to the mempool's
  // ring and back every poll at large bursts. Set once, on a pool whose buffers are all
  // allocated (the free queue stays empty).
  // The allocator, as this folder sees it (no DPDK here):
  class Owner {
   public:
    // Takes back `n` of its objects, whose buffers no client holds any more.
    virtual void give_back(void* const* objects, uint32_t n) = 0;

   protected:
    ~Owner() = default;
  };
  static constexpr uint32_t kReturnRun = 512;  // DPDK: RTE_MEMPOOL_CACHE_MAX_SIZE
  // `objects[index]`: the owner's object for each buffer, all of which it holds now.
  void return_to(void* const* objects, Owner& owner) {
    objects_ = objects;
    owner_ = &owner;
    mode_ = Mode::kReturnedToOwner;
  }
  // Hands `n` objects of buffers with one reference each (their last) straight back to the
  // owner, for a caller that kept the objects of what it lent: no reference count is read.
  void return_objects(void* const* objects, uint32_t n) { owner_->give_back(objects, n); }
  // For a pool whose owner picks the buffers itself (an RDMA remote window, where the peer
  // names the slot it wrote): empties the free queue for good; a buffer is free when its
  // references are 0, and alloc() finds none.
  void make_owner_managed() {
    mode_ = Mode::kOwnerManaged;
    count_ = 0;
    std::fill(refs_.begin(), refs_.end(), uint16_t{0});
  }

 private:
  BufferPool(std::shared_ptr<SharedMemory> memory, uint64_t base, uint32_t buf_size,
             uint32_t num_bufs);

  std::shared_ptr<SharedMemory> memory_;
  std::shared_ptr<void> device_owner_;  // on_device() pools
  std::byte* data_ = nullptr;
  uint64_t base_ = 0;
  uint32_t buf_size_ = 0;
  uint32_t num_bufs_ = 0;
  uint32_t size_shift_ = 0;   // buf_size_ = odd << size_shift_
  uint64_t odd_inverse_ = 1;  // odd * odd_inverse_ = 1 (mod 2^64)
  // unref() without the free queue: true when `index` names a buffer and that was its last
  // reference (its count stays 1, as alloc() hands it out).
  bool drop_last_ref(uint32_t index) {
    if (index >= num_bufs_) return false;
    uint16_t r = refs_[index];
    if (r == 1) return true;
    refs_[index] = static_cast<uint16_t>(r - 1);
    return false;
  }
  // The last reference went: back to the queue, its count left at (or set to) 1.
  void push_free(uint32_t index) {
    if (mode_ == Mode::kOwnerManaged) {
      refs_[index] = 0;
      return;
    }
    refs_[index] = 1;
    if (mode_ == Mode::kReturnedToOwner) {
      owner_->give_back(&objects_[index], 1);
      return;
    }
    uint32_t tail = head_ + count_;
    free_[tail >= num_bufs_ ? tail - num_bufs_ : tail] = index;
    ++count_;
  }

  std::vector<uint32_t> free_;  // a ring: count_ entries from head_
  uint32_t head_ = 0;
  uint32_t count_ = 0;
  std::vector<uint16_t> refs_;
  Mode mode_ = Mode::kFreeQueue;
  void* const* objects_ = nullptr;  // kReturnedToOwner: the owner's object of each buffer
  Owner* owner_ = nullptr;
  // unref_many() of a pool in kReturnedToOwner.
  void return_many(const uint32_t* indices, uint32_t n);
};

}  // namespace daqiri::memory
