// Launchers of gpu-bench's latency kernels (latency_kernels.cu). Times are the GPU's
// %globaltimer in nanoseconds: one clock for producer and consumer.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace daqiri::bench {

// at[i] = now, in a one-thread kernel on `stream`.
cudaError_t launch_stamp(uint64_t* at, uint32_t i, cudaStream_t stream);
// The kernel launch_stamp uses (parameters: uint64_t* at, uint32_t i), for graph nodes.
const void* stamp_function();
// at[first .. first + count) = now, in a one-thread kernel on `stream`.
cudaError_t launch_stamp_range(uint64_t* at, uint32_t first, uint32_t count, cudaStream_t stream);
// The kernel of a relay batch's stage (parameters: uint64_t* at, const uint32_t* batch,
// uint32_t n; one thread): at[i] = now for i in [batch[0], batch[1]), i < n.
const void* stamp_batch_function();
// One thread that, for i in [0, n), spins until *doorbell >= i + 1 and stamps seen[i].
// `host_memory`: the doorbell is a mapped host ring's producer index (read at system scope).
cudaError_t launch_persistent_waiter(const uint32_t* doorbell, bool host_memory, uint64_t* seen,
                                     uint32_t n, cudaStream_t stream);
// The graph-loop waiter, for daqiri::GpuGraphLoop (parameters: const uint32_t* doorbell,
// uint64_t* seen, uint32_t* next, uint32_t n, cudaGraphConditionalHandle loop; one thread): each
// run waits until *doorbell >= *next + 1, stamps seen[*next] and moves *next on, until n.
// `host_memory`: the doorbell is a mapped host ring's producer index (system scope).
const void* loop_waiter_function(bool host_memory);
// Relates the global timer to a host clock: for k in [1, rounds], one thread waits for *flag to
// reach k and writes the timer to stamps[k]. Both in mapped host memory; the host raises the
// flag between two readings of its clock.
cudaError_t launch_timer_echo(const volatile uint32_t* flag, volatile uint64_t* stamps,
                              uint32_t rounds, cudaStream_t stream);

}  // namespace daqiri::bench
