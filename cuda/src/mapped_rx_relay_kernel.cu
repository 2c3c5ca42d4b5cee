#include <cuda/atomic>

#include "mapped_rx_relay_kernel.hpp"

namespace daqiri {
namespace {

using cuda::memory_order_acquire;
using cuda::memory_order_relaxed;
using cuda::memory_order_release;

__device__ inline uint64_t global_timer() {
  uint64_t t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Publishes a batch only when the consumer has finished every one before it, so a batch takes
// every packet that arrived meanwhile: a stream consumer keeps up at rates where one stage per
// packet would not. Host memory is touched once a poll (the producer) and once a batch (the
// release); the rest is GPU memory.
__global__ void relay(MappedRxRingView ring, RelayWords* w, uint32_t from, const uint32_t* stop) {
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> producer(
      *const_cast<uint32_t*>(ring.producer));
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> consumer(*ring.consumer);
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> halt(*const_cast<uint32_t*>(stop));
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> published(w->published);
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> taken(w->taken);
  uint32_t n = published.load(memory_order_relaxed);
  uint32_t end = from;
  uint32_t released = end;
  uint64_t give_up = 0;  // once stopping: when to stop waiting for the batch out
  for (;;) {
    const bool stopping = halt.load(memory_order_relaxed) != 0;
    if (stopping && give_up == 0) give_up = global_timer() + 1'000'000;
    if (taken.load(memory_order_acquire) == n) {
      if (released != end) {  // the consumer's reads of the batch are done
        consumer.store(end, memory_order_release);
        released = end;
      }
      if (stopping) break;
      const uint32_t p = producer.load(memory_order_acquire);
      if (p != end) {
        w->batch[0] = end;
        w->batch[1] = p;
        end = p;
        // The stream's wait reads `published` outside the memory model: fence so the batch
        // and the frames' acquire are visible before it moves.
        __threadfence_system();
        published.store(++n, memory_order_release);
      }
    } else if (stopping && global_timer() > give_up) {
      break;
    }
  }
  // Every stage still waiting (GEQ compares cyclically) runs on an empty batch.
  w->batch[0] = end;
  w->batch[1] = end;
  __threadfence_system();
  published.store(n + 0x40000000u, memory_order_release);
}

}  // namespace

cudaError_t launch_relay(const MappedRxRingView& ring, RelayWords* words, uint32_t from,
                         const uint32_t* stop, cudaStream_t stream) {
  relay<<<1, 1, 0, stream>>>(ring, words, from, stop);
  return cudaGetLastError();
}

}  // namespace daqiri
