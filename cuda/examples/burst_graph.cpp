#include "burst_graph.hpp"

#include <string>

#include "daqiri/cuda/cuda_error.hpp"
#include "daqiri/cuda/stream_memop.hpp"

namespace daqiri::example {

Result<BurstGraph> BurstGraph::create(const cuda::DriverApi& api, const GpuRingView& ring,
                                      uint32_t burst, uint32_t stages, Totals* totals) {
  BurstGraph g;
  g.api_ = &api;
  g.ring_ = ring;
  g.wait_on_ = reinterpret_cast<CUdeviceptr>(ring.doorbell);
  g.write_to_ = reinterpret_cast<CUdeviceptr>(ring.consumer);
  g.totals_ = totals;
  g.unit_ = burst;
  g.blocks_ = burst;
  g.stages_ = stages;
  if (auto ok = g.build(); !ok) return std::unexpected(ok.error());
  return g;
}

Result<BurstGraph> BurstGraph::create(const cuda::DriverApi& api, const MappedRxRingView& ring,
                                      const MappedRelayView& relay, uint32_t blocks,
                                      uint32_t stages, Totals* totals) {
  if (stages == 0 || stages % 2 != 0) {
    return fail(ErrorCode::kInvalidArgument,
                "stages over a relay come in pairs (its two phases): --stages must be even");
  }
  BurstGraph g;
  g.api_ = &api;
  g.relayed_ = true;
  g.mapped_ = ring;
  g.batch_ = relay.batch;
  g.wait_on_ = reinterpret_cast<CUdeviceptr>(relay.published);
  g.write_to_ = reinterpret_cast<CUdeviceptr>(relay.taken);
  g.totals_ = totals;
  g.unit_ = 1;
  g.blocks_ = blocks;
  g.stages_ = stages;
  if (auto ok = g.build(); !ok) return std::unexpected(ok.error());
  return g;
}

cudaKernelNodeParams BurstGraph::kernel(uint32_t first, uint32_t k, KernelArgs& args) const {
  args = KernelArgs{ring_, mapped_, batch_, first + k * unit_, totals_, {}};
  if (relayed_) {
    args.params[0] = &args.mapped;
    args.params[1] = &args.batch;
  } else {
    args.params[0] = &args.ring;
    args.params[1] = &args.start;
  }
  args.params[2] = &args.totals;
  cudaKernelNodeParams kp{};
  kp.func = const_cast<void*>(relayed_ ? check_batch_function() : check_burst_function());
  kp.gridDim = dim3(blocks_);
  kp.blockDim = dim3(kCheckThreads);
  kp.kernelParams = args.params;
  return kp;
}

Result<> BurstGraph::build() {
  if (CUresult r = api_->ctx_get_current(&ctx_); r != CUDA_SUCCESS || ctx_ == nullptr) {
    return std::unexpected(cuda::driver_error(*api_, r, "cuCtxGetCurrent"));
  }
  if (cudaError_t e = cudaGraphCreate(&graph_, 0); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaGraphCreate"));
  }
  CUgraphNode previous = nullptr;
  for (uint32_t k = 0; k < stages_; ++k) {
    // wait -> kernel -> write, stage after stage. Over a relay the values are its phases,
    // the same on every post.
    const uint32_t end = relayed_ ? relay_phase(k) : (k + 1) * unit_;
    auto wait_node = cuda::add_memop_node(
        *api_, ctx_, graph_, previous,
        cuda::stream_memop(true, wait_on_, end,
                           relayed_ ? CU_STREAM_WAIT_VALUE_EQ : CU_STREAM_WAIT_VALUE_GEQ));
    if (!wait_node) return std::unexpected(wait_node.error());
    KernelArgs args{};
    cudaKernelNodeParams kp = kernel(0, k, args);
    cudaGraphNode_t kernel_node = nullptr;
    cudaGraphNode_t dep = *wait_node;
    if (cudaError_t e = cudaGraphAddKernelNode(&kernel_node, graph_, &dep, 1, &kp);
        e != cudaSuccess) {
      return std::unexpected(cuda_error(e, "cudaGraphAddKernelNode"));
    }
    auto write_node = cuda::add_memop_node(*api_, ctx_, graph_, kernel_node,
                                           cuda::stream_memop(false, write_to_, end));
    if (!write_node) return std::unexpected(write_node.error());
    waits_.push_back(*wait_node);
    kernels_.push_back(kernel_node);
    writes_.push_back(*write_node);
    previous = *write_node;
  }
  if (cudaError_t e = cudaGraphInstantiate(&exec_, graph_, 0); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaGraphInstantiate"));
  }
  return {};
}

BurstGraph::BurstGraph(BurstGraph&& other) noexcept
    : api_(other.api_),
      ctx_(other.ctx_),
      relayed_(other.relayed_),
      ring_(other.ring_),
      mapped_(other.mapped_),
      batch_(other.batch_),
      wait_on_(other.wait_on_),
      write_to_(other.write_to_),
      totals_(other.totals_),
      unit_(other.unit_),
      blocks_(other.blocks_),
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
  CUstreamBatchMemOpParams op = cuda::stream_memop(wait, address, value);
  CUDA_BATCH_MEM_OP_NODE_PARAMS p{ctx_, 1, &op, 0};
  if (CUresult r = api_->graph_exec_batch_mem_op_node_set_params(exec_, node, &p);
      r != CUDA_SUCCESS) {
    return std::unexpected(cuda::driver_error(*api_, r, "cuGraphExecBatchMemOpNodeSetParams"));
  }
  return {};
}

Result<> BurstGraph::post(uint32_t first, cudaStream_t stream) {
  for (uint32_t k = 0; k < stages_ && !relayed_; ++k) {
    const uint32_t end = first + (k + 1) * unit_;
    if (auto ok = set_memop(waits_[k], true, wait_on_, end); !ok) return ok;
    KernelArgs args{};
    cudaKernelNodeParams kp = kernel(first, k, args);
    if (cudaError_t e = cudaGraphExecKernelNodeSetParams(exec_, kernels_[k], &kp);
        e != cudaSuccess) {
      return std::unexpected(cuda_error(e, "cudaGraphExecKernelNodeSetParams"));
    }
    if (auto ok = set_memop(writes_[k], false, write_to_, end); !ok) return ok;
  }
  if (cudaError_t e = cudaGraphLaunch(exec_, stream); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaGraphLaunch"));
  }
  return {};
}

}  // namespace daqiri::example
