// Fixed-size buffers carved from one SharedMemory region, with a free stack and per-buffer
// reference counts (a buffer delivered to several attachments returns when the last lets go).
// Owned by one poller thread once installed: no atomics, no locks, no allocation after create.
#pragma once

#include <cstdint>
#include <vector>

#include "memory/shared_memory.hpp"

namespace daqiri::memory {

class BufferPool {
 public:
  static Result<BufferPool> create(const std::string& name, uint32_t buf_size, uint32_t num_bufs,
                                   bool huge);

  [[nodiscard]] uint32_t buf_size() const { return buf_size_; }
  [[nodiscard]] uint32_t num_bufs() const { return num_bufs_; }
  [[nodiscard]] uint32_t available() const { return static_cast<uint32_t>(top_); }
  [[nodiscard]] std::byte* buffer(uint32_t index) const {
    return memory_.data() + uint64_t{index} * buf_size_;
  }
  [[nodiscard]] uint64_t offset(uint32_t index) const { return uint64_t{index} * buf_size_; }
  [[nodiscard]] SharedMemory& memory() { return memory_; }

  // Takes up to n free buffers into `out`; returns how many. Each starts with one reference.
  uint32_t alloc(uint32_t* out, uint32_t n) {
    uint32_t got = n < top_ ? n : static_cast<uint32_t>(top_);
    for (uint32_t i = 0; i < got; ++i) {
      out[i] = free_[--top_];
      refs_[out[i]] = 1;
    }
    return got;
  }
  // Sets the references of a buffer in use (0 frees it).
  void set_refs(uint32_t index, uint16_t refs) {
    refs_[index] = refs;
    if (refs == 0) free_[top_++] = index;
  }
  // Drops one reference; the buffer returns to the free stack at zero.
  void unref(uint32_t index) {
    if (--refs_[index] == 0) free_[top_++] = index;
  }

 private:
  BufferPool(SharedMemory memory, uint32_t buf_size, uint32_t num_bufs);

  SharedMemory memory_;
  uint32_t buf_size_ = 0;
  uint32_t num_bufs_ = 0;
  std::vector<uint32_t> free_;
  size_t top_ = 0;
  std::vector<uint16_t> refs_;
};

}  // namespace daqiri::memory
