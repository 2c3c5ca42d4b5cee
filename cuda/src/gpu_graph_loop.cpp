#include "daqiri/gpu_graph_loop.hpp"

#include <string>
#include <utility>

#include "daqiri/cuda/cuda_error.hpp"

namespace daqiri {
namespace {

Error graph_error(cudaError_t e, const std::string& what) {
  return cuda_error(e, "graph loop: " + what);
}

}  // namespace

Result<GpuGraphLoop> GpuGraphLoop::create(const void* kernel, dim3 grid, dim3 block, void** args,
                                          cudaGraphConditionalHandle* handle) {
  GpuGraphLoop loop;
  if (cudaError_t e = cudaGraphCreate(&loop.graph_, 0); e != cudaSuccess) {
    return std::unexpected(graph_error(e, "cudaGraphCreate"));
  }
  if (cudaError_t e =
          cudaGraphConditionalHandleCreate(handle, loop.graph_, 1, cudaGraphCondAssignDefault);
      e != cudaSuccess) {
    return std::unexpected(graph_error(e, "cudaGraphConditionalHandleCreate"));
  }
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = *handle;
  params.conditional.type = cudaGraphCondTypeWhile;
  params.conditional.size = 1;
  cudaGraphNode_t node = nullptr;
  if (cudaError_t e = cudaGraphAddNode(&node, loop.graph_, nullptr, nullptr, 0, &params);
      e != cudaSuccess) {
    return std::unexpected(graph_error(e, "cudaGraphAddNode (while)"));
  }
  // The body graph belongs to the conditional node: freed with the outer graph.
  cudaGraph_t body = params.conditional.phGraph_out[0];
  cudaKernelNodeParams kp{};
  kp.func = const_cast<void*>(kernel);
  kp.gridDim = grid;
  kp.blockDim = block;
  kp.kernelParams = args;
  cudaGraphNode_t kernel_node = nullptr;
  if (cudaError_t e = cudaGraphAddKernelNode(&kernel_node, body, nullptr, 0, &kp);
      e != cudaSuccess) {
    return std::unexpected(graph_error(e, "cudaGraphAddKernelNode"));
  }
  if (cudaError_t e = cudaGraphInstantiate(&loop.exec_, loop.graph_, 0); e != cudaSuccess) {
    return std::unexpected(graph_error(e, "cudaGraphInstantiate"));
  }
  return loop;
}

GpuGraphLoop::GpuGraphLoop(GpuGraphLoop&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

GpuGraphLoop::~GpuGraphLoop() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
}

Result<> GpuGraphLoop::launch(cudaStream_t stream) const {
  if (cudaError_t e = cudaGraphLaunch(exec_, stream); e != cudaSuccess) {
    return std::unexpected(graph_error(e, "cudaGraphLaunch"));
  }
  return {};
}

}  // namespace daqiri
