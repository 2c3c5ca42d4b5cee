#include "burst_graph.hpp"

#include <string>

#include "daqiri/cuda/cuda_error.hpp"

namespace daqiri::example {
namespace {

// The check kernel over `burst` packets; `args` are its parameters (view, first, totals).
cudaKernelNodeParams check_node(void** args, uint32_t burst) {
  cudaKernelNodeParams kp{};
  kp.func = const_cast<void*>(check_burst_function());
  kp.gridDim = dim3(burst);
  kp.blockDim = dim3(kCheckThreads);
  kp.kernelParams = args;
  return kp;
}

CUstreamBatchMemOpParams memop(bool wait, CUdeviceptr address, uint32_t value) {
  CUstreamBatchMemOpParams p{};
  if (wait) {
    p.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    p.waitValue.address = address;
    p.waitValue.value = value;
    p.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  } else {
    p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    p.writeValue.address = address;
    p.writeValue.value = value;
    p.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;  // after the kernel's reads are done
  }
  return p;
}

}  // namespace

Result<BurstGraph> BurstGraph::create(const cuda::DriverApi& api, const GpuRingView& ring,
                                      uint32_t burst, uint32_t stages, Totals* totals) {
  BurstGraph g;
  g.api_ = &api;
  g.ring_ = ring;
  g.totals_ = totals;
  g.burst_ = burst;
  g.stages_ = stages;
  if (CUresult r = api.ctx_get_current(&g.ctx_); r != CUDA_SUCCESS || g.ctx_ == nullptr) {
    return std::unexpected(cuda::driver_error(api, r, "cuCtxGetCurrent"));
  }
  if (cudaError_t e = cudaGraphCreate(&g.graph_, 0); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaGraphCreate"));
  }
  const auto doorbell = reinterpret_cast<CUdeviceptr>(ring.doorbell);
  const auto consumer = reinterpret_cast<CUdeviceptr>(ring.consumer);
  CUgraphNode previous = nullptr;
  for (uint32_t k = 0; k < stages; ++k) {
    uint32_t first = k * burst;
    // wait -> kernel -> write, stage after stage.
    CUstreamBatchMemOpParams wait_op = memop(true, doorbell, first + burst);
    CUDA_BATCH_MEM_OP_NODE_PARAMS wait{g.ctx_, 1, &wait_op, 0};
    CUgraphNode wait_node = nullptr;
    if (CUresult r = api.graph_add_batch_mem_op_node(
            &wait_node, g.graph_, previous ? &previous : nullptr, previous ? 1 : 0, &wait);
        r != CUDA_SUCCESS) {
      return std::unexpected(cuda::driver_error(api, r, "cuGraphAddBatchMemOpNode (wait)"));
    }
    GpuRingView view = ring;
    void* args[] = {&view, &first, &g.totals_};
    cudaKernelNodeParams kp = check_node(args, burst);
    cudaGraphNode_t kernel_node = nullptr;
    cudaGraphNode_t dep = wait_node;
    if (cudaError_t e = cudaGraphAddKernelNode(&kernel_node, g.graph_, &dep, 1, &kp);
        e != cudaSuccess) {
      return std::unexpected(cuda_error(e, "cudaGraphAddKernelNode"));
    }
    CUstreamBatchMemOpParams write_op = memop(false, consumer, first + burst);
    CUDA_BATCH_MEM_OP_NODE_PARAMS write{g.ctx_, 1, &write_op, 0};
    CUgraphNode write_node = nullptr;
    if (CUresult r =
            api.graph_add_batch_mem_op_node(&write_node, g.graph_, &kernel_node, 1, &write);
        r != CUDA_SUCCESS) {
      return std::unexpected(cuda::driver_error(api, r, "cuGraphAddBatchMemOpNode (write)"));
    }
    g.waits_.push_back(wait_node);
    g.kernels_.push_back(kernel_node);
    g.writes_.push_back(write_node);
    previous = write_node;
  }
  if (cudaError_t e = cudaGraphInstantiate(&g.exec_, g.graph_, 0); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaGraphInstantiate"));
  }
  return g;
}

BurstGraph::BurstGraph(BurstGraph&& other) noexcept
    : api_(other.api_),
      ctx_(other.ctx_),
      ring_(other.ring_),
      totals_(other.totals_),
      burst_(other.burst_),
      stages_(other.stages_),
      graph_(other.graph_),
      exec_(other.exec_),
      waits_(std::move(other.waits_)),
      kernels_(std::move(other.kernels_)),
      writes_(std::move(other.writes_)) {
  other.graph_ = nullptr;
  other.exec_ = nullptr;
}

BurstGraph::~BurstGraph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
}

Result<> BurstGraph::set_memop(CUgraphNode node, bool wait, CUdeviceptr address, uint32_t value) {
  CUstreamBatchMemOpParams op = memop(wait, address, value);
  CUDA_BATCH_MEM_OP_NODE_PARAMS p{ctx_, 1, &op, 0};
  if (CUresult r = api_->graph_exec_batch_mem_op_node_set_params(exec_, node, &p);
      r != CUDA_SUCCESS) {
    return std::unexpected(cuda::driver_error(*api_, r, "cuGraphExecBatchMemOpNodeSetParams"));
  }
  return {};
}

Result<> BurstGraph::post(uint32_t first, cudaStream_t stream) {
  const auto doorbell = reinterpret_cast<CUdeviceptr>(ring_.doorbell);
  const auto consumer = reinterpret_cast<CUdeviceptr>(ring_.consumer);
  for (uint32_t k = 0; k < stages_; ++k) {
    uint32_t start = first + k * burst_;
    uint32_t end = start + burst_;
    if (auto ok = set_memop(waits_[k], true, doorbell, end); !ok) return ok;
    GpuRingView view = ring_;
    void* args[] = {&view, &start, &totals_};
    cudaKernelNodeParams kp = check_node(args, burst_);
    if (cudaError_t e = cudaGraphExecKernelNodeSetParams(exec_, kernels_[k], &kp);
        e != cudaSuccess) {
      return std::unexpected(cuda_error(e, "cudaGraphExecKernelNodeSetParams"));
    }
    if (auto ok = set_memop(writes_[k], false, consumer, end); !ok) return ok;
  }
  if (cudaError_t e = cudaGraphLaunch(exec_, stream); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaGraphLaunch"));
  }
  return {};
}

}  // namespace daqiri::example
