#include "memory/buffer_pool.hpp"

#include <array>
#include <bit>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace daqiri::memory {
namespace {

// One 16-byte store of two pointers where the target has one.
inline void store_pair(void** at, void* first, void* second) {
#if defined(__x86_64__)
  _mm_store_si128(reinterpret_cast<__m128i*>(at), _mm_set_epi64x(reinterpret_cast<int64_t>(second),
                                                                 reinterpret_cast<int64_t>(first)));
#else
  at[0] = first;
  at[1] = second;
#endif
}

}  // namespace

Result<BufferPool> BufferPool::create(const std::string& name, uint32_t buf_size, uint32_t num_bufs,
                                      bool huge, PageArena* arena) {
  uint64_t bytes = uint64_t{buf_size} * num_bufs;
  std::shared_ptr<SharedMemory> memory;
  uint64_t base = 0;
  if (arena) {
    auto share = arena->take(bytes);
    if (!share) return std::unexpected(share.error());
    memory = std::move(share->slab);
    base = share->offset;
  } else {
    auto mem = SharedMemory::create(name, bytes, huge);
    if (!mem) return std::unexpected(mem.error());
    memory = std::make_shared<SharedMemory>(std::move(*mem));
  }
  // Clients only ever read a pool: no writable mapping of it but ours, from now on. (Sealing a
  // shared slab again for its next pool changes nothing.)
  if (auto ok = memory->seal_read_only_for_others(); !ok) return std::unexpected(ok.error());
  return BufferPool(std::move(memory), base, buf_size, num_bufs);
}

Result<BufferPool> BufferPool::over_device(const DeviceMemory& memory, uint32_t buf_size,
                                           uint32_t num_bufs) {
  if (uint64_t{buf_size} * num_bufs > memory.bytes) {
    return fail(ErrorCode::kInvalidArgument,
                "a pool of " + std::to_string(num_bufs) + " x " + std::to_string(buf_size) +
                    " bytes does not fit in " + std::to_string(memory.bytes) +
                    " bytes of device memory");
  }
  BufferPool pool(nullptr, 0, buf_size, num_bufs);
  pool.device_owner_ = memory.owner;
  pool.data_ = memory.base;
  return pool;
}

BufferPool::BufferPool(std::shared_ptr<SharedMemory> memory, uint64_t base, uint32_t buf_size,
                       uint32_t num_bufs)
    : memory_(std::move(memory)),
      data_(memory_ ? memory_->data() : nullptr),
      base_(base),
      buf_size_(buf_size),
      num_bufs_(num_bufs),
      free_(num_bufs),
      count_(num_bufs),
      refs_(num_bufs, 1) {
  if (buf_size != 0) {
    size_shift_ = static_cast<uint32_t>(std::countr_zero(buf_size));
    uint64_t odd = buf_size >> size_shift_;
    // Newton's iteration doubles the correct low bits: odd * odd = 1 (mod 8) to start.
    odd_inverse_ = odd;
    for (int i = 0; i < 5; ++i)
      odd_inverse_ *= 2 - odd * odd_inverse_;
  }
  // Lowest indices first: the first buffers used are the first pages touched.
  for (uint32_t i = 0; i < num_bufs; ++i)
    free_[i] = i;
}

void BufferPool::return_many(const uint32_t* indices, uint32_t n) {
  // Stored two at a time: the owner copies them out with 16-byte loads (rte_mempool_put_bulk),
  // and a load that spans two 8-byte stores cannot be forwarded from them, so it waited for the
  // whole store buffer (the last poll's ring slot stores among it) to drain.
  alignas(16) std::array<void*, kReturnRun> run;
  uint32_t k = 0;
  void* held = nullptr;  // the first of a pair (objects are never null)
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t b = indices[i];
    if (!drop_last_ref(b)) continue;
    void* object = objects_[b];
    if (held == nullptr) {
      held = object;
      continue;
    }
    store_pair(&run[k], held, object);
    held = nullptr;
    k += 2;
    if (k == kReturnRun) {
      owner_->give_back(run.data(), k);
      k = 0;
    }
  }
  if (held != nullptr) run[k++] = held;
  if (k > 0) owner_->give_back(run.data(), k);
}

}  // namespace daqiri::memory
