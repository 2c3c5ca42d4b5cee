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
// One thread that, for i in [0, n), spins until *doorbell >= i + 1 and stamps seen[i].
cudaError_t launch_persistent_waiter(const uint32_t* doorbell, uint64_t* seen, uint32_t n,
                                     cudaStream_t stream);

}  // namespace daqiri::bench
