// One stream memory operation for a batch (cuStreamBatchMemOp, graph memop nodes): a wait for
// *address >= value (a cyclic compare), or a write of value after everything before it.
#pragma once

#include <cuda.h>

#include <cstdint>

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

}  // namespace daqiri::cuda
