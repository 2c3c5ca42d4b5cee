#include "backends/registry.hpp"

#include <string>

#include "backends/socket/socket_backend.hpp"
#ifdef DAQIRI_HAVE_DPDK
#include "backends/dpdk/dpdk_backend.hpp"
#endif
#ifdef DAQIRI_HAVE_RDMA
#include "backends/rdma/rdma_backend.hpp"
#endif
#ifdef DAQIRI_HAVE_XDP
#include "backends/xdp/xdp_backend.hpp"
#endif
#ifdef DAQIRI_HAVE_CUDA
#include "gpu/cuda_gpu_engine.hpp"
#endif

namespace daqiri::backends {

std::span<const BuiltBackend> built_backends() {
  static constexpr BuiltBackend kBuilt[] = {
      {config::Backend::kSocket, &socket::SocketBackend::open},
#ifdef DAQIRI_HAVE_DPDK
      {config::Backend::kDpdk, &dpdk::DpdkBackend::open},
#endif
#ifdef DAQIRI_HAVE_RDMA
      {config::Backend::kRdma, &rdma::RdmaBackend::open},
#endif
#ifdef DAQIRI_HAVE_XDP
      {config::Backend::kXdp, &xdp::XdpBackend::open},
#endif
  };
  return kBuilt;
}

Result<std::unique_ptr<Backend>> open_backend(config::Backend kind, const BackendContext& context) {
  for (const BuiltBackend& b : built_backends()) {
    if (b.kind == kind) return b.open(context);
  }
  return fail(ErrorCode::kFailedPrecondition, std::string("this daqirid was built without the ") +
                                                  config::to_string(kind) + " backend");
}

std::unique_ptr<gpu::GpuEngine> make_gpu_engine() {
#ifdef DAQIRI_HAVE_CUDA
  return std::make_unique<gpu::CudaGpuEngine>();
#else
  return nullptr;
#endif
}

}  // namespace daqiri::backends
