// Kernels of gpu-bench's doorbell latency mode: stamp the GPU's global timer where a producer
// writes the doorbell, and where each consumer style first sees it.
#include "latency_kernels.hpp"

#include <cuda/atomic>

namespace daqiri::bench {
namespace {

__device__ inline uint64_t global_timer() {
  uint64_t t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void stamp(uint64_t* at, uint32_t i) {
  at[i] = global_timer();
}

__global__ void stamp_range(uint64_t* at, uint32_t first, uint32_t count) {
  uint64_t now = global_timer();
  for (uint32_t i = 0; i < count; ++i)
    at[first + i] = now;
}

// A relay batch's stage (daqiri::MappedRelayView): stamps every counter of the batch below n.
__global__ void stamp_batch(uint64_t* at, const uint32_t* batch, uint32_t n) {
  uint64_t now = global_timer();
  for (uint32_t i = batch[0]; i != batch[1]; ++i)
    if (i < n) at[i] = now;
}

__global__ void timer_echo(const volatile uint32_t* flag, volatile uint64_t* stamps,
                           uint32_t rounds) {
  for (uint32_t k = 1; k <= rounds; ++k) {
    while (*flag < k) {
    }
    stamps[k] = global_timer();
    __threadfence_system();
  }
}

// One thread spins on the doorbell and stamps when it reaches i + 1, for every i. Acquire at
// device scope for a GPU ring's doorbell (GPU memory, as gpu_ring.cuh reads it), at system
// scope for a mapped host ring's producer index (as mapped_rx_ring.cuh reads it).
template <cuda::thread_scope Scope>
__global__ void persistent(const uint32_t* doorbell, uint64_t* seen, uint32_t n) {
  cuda::atomic_ref<uint32_t, Scope> d(*const_cast<uint32_t*>(doorbell));
  for (uint32_t i = 0; i < n; ++i) {
    while (static_cast<int32_t>(d.load(cuda::memory_order_acquire) - (i + 1)) < 0) {
    }
    seen[i] = global_timer();
  }
}

// One run of the graph loop's kernel: waits for doorbell >= next + 1, stamps seen[next] and
// runs again until n. Scope as for `persistent`.
template <cuda::thread_scope Scope>
__global__ void loop_waiter(const uint32_t* doorbell, uint64_t* seen, uint32_t* next, uint32_t n,
                            cudaGraphConditionalHandle loop) {
  cuda::atomic_ref<uint32_t, Scope> d(*const_cast<uint32_t*>(doorbell));
  const uint32_t i = *next;
  while (static_cast<int32_t>(d.load(cuda::memory_order_acquire) - (i + 1)) < 0) {
  }
  seen[i] = global_timer();
  *next = i + 1;
  cudaGraphSetConditional(loop, i + 1 < n ? 1u : 0u);
}

}  // namespace

const void* loop_waiter_function(bool host_memory) {
  return host_memory ? reinterpret_cast<const void*>(&loop_waiter<cuda::thread_scope_system>)
                     : reinterpret_cast<const void*>(&loop_waiter<cuda::thread_scope_device>);
}

cudaError_t launch_stamp(uint64_t* at, uint32_t i, cudaStream_t stream) {
  stamp<<<1, 1, 0, stream>>>(at, i);
  return cudaGetLastError();
}

const void* stamp_function() {
  return reinterpret_cast<const void*>(&stamp);
}

const void* stamp_batch_function() {
  return reinterpret_cast<const void*>(&stamp_batch);
}

cudaError_t launch_stamp_range(uint64_t* at, uint32_t first, uint32_t count, cudaStream_t stream) {
  stamp_range<<<1, 1, 0, stream>>>(at, first, count);
  return cudaGetLastError();
}

cudaError_t launch_timer_echo(const volatile uint32_t* flag, volatile uint64_t* stamps,
                              uint32_t rounds, cudaStream_t stream) {
  timer_echo<<<1, 1, 0, stream>>>(flag, stamps, rounds);
  return cudaGetLastError();
}

cudaError_t launch_persistent_waiter(const uint32_t* doorbell, bool host_memory, uint64_t* seen,
                                     uint32_t n, cudaStream_t stream) {
  if (host_memory) {
    persistent<cuda::thread_scope_system><<<1, 1, 0, stream>>>(doorbell, seen, n);
  } else {
    persistent<cuda::thread_scope_device><<<1, 1, 0, stream>>>(doorbell, seen, n);
  }
  return cudaGetLastError();
}

}  // namespace daqiri::bench
