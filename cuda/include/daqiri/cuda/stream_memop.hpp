// One stream memory operation for a batch (cuStreamBatchMemOp, graph memop nodes): a wait for
// *address >= value (a cyclic compare; or as `wait_flags` says), or a write of value after
// everything before it; and a graph node of one.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "daqiri/cuda/driver_api.hpp"

namespace daqiri::cuda {

inline CUstreamBatchMemOpParams stream_memop(bool wait, CUdeviceptr address, uint32_t value,
                                             unsigned wait_flags = CU_STREAM_WAIT_VALUE_GEQ) {
  CUstreamBatchMemOpParams p{};
  if (wait) {
    p.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    p.waitValue.address = address;
    p.waitValue.value = value;
    p.waitValue.flags = wait_flags;
  } else {
    p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    p.writeValue.address = address;
    p.writeValue.value = value;
    p.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  }
  return p;
}

// A graph node of `op` in context `ctx`, after `after` (nullptr: a root).
inline Result<CUgraphNode> add_memop_node(const DriverApi& api, CUcontext ctx, CUgraph graph,
                                          CUgraphNode after, CUstreamBatchMemOpParams op) {
  CUDA_BATCH_MEM_OP_NODE_PARAMS p{ctx, 1, &op, 0};
  CUgraphNode node = nullptr;
  if (CUresult r = api.graph_add_batch_mem_op_node(&node, graph, after ? &after : nullptr,
                                                   after ? 1 : 0, &p);
      r != CUDA_SUCCESS) {
    return std::unexpected(driver_error(api, r, "cuGraphAddBatchMemOpNode"));
  }
  return node;
}

}  // namespace daqiri::cuda
