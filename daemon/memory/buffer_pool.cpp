#include "memory/buffer_pool.hpp"

namespace daqiri::memory {

Result<BufferPool> BufferPool::create(const std::string& name, uint32_t buf_size, uint32_t num_bufs,
                                      bool huge) {
  auto mem = SharedMemory::create(name, uint64_t{buf_size} * num_bufs, huge);
  if (!mem) return std::unexpected(mem.error());
  return BufferPool(std::move(*mem), buf_size, num_bufs);
}

BufferPool::BufferPool(SharedMemory memory, uint32_t buf_size, uint32_t num_bufs)
    : memory_(std::move(memory)),
      buf_size_(buf_size),
      num_bufs_(num_bufs),
      free_(num_bufs),
      count_(num_bufs),
      refs_(num_bufs, 0) {
  // Lowest indices first: the first buffers used are the first pages touched.
  for (uint32_t i = 0; i < num_bufs; ++i)
    free_[i] = i;
}

}  // namespace daqiri::memory
