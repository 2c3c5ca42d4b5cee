#include "daqiri/gpu_tx_buffers.hpp"

#include "daqiri/cuda/driver_api.hpp"
#include "daqiri/cuda/vmm_allocation.hpp"

namespace daqiri {

struct GpuTxBuffers::State {
  daqiri_gpu_ring_info info{};
  int device = -1;
  cuda::PrimaryContext ctx;
  cuda::VmmAllocation memory;  // after ctx: unmapped before the context is released
};

GpuTxBuffers::GpuTxBuffers(std::unique_ptr<State> s) : s_(std::move(s)) {}
GpuTxBuffers::~GpuTxBuffers() = default;

Result<std::unique_ptr<GpuTxBuffers>> GpuTxBuffers::map(const TxStream& stream) {
  const TxGpuMemory* gpu = stream.gpu_memory();
  if (gpu == nullptr) {
    return fail(ErrorCode::kInvalidArgument, "not a GPU TX stream (TxOptions::gpu)", "stream");
  }
  auto api = cuda::DriverApi::get();
  if (!api) return std::unexpected(api.error());
  auto s = std::make_unique<State>();
  s->info = gpu->info;
  const daqiri_gpu_ring_info& info = s->info;
  if (info.size == 0 ||
      info.payload_offset + uint64_t{info.size} * info.slot_size > info.alloc_size) {
    return fail(ErrorCode::kInternal, "the daemon's GPU TX buffers do not check out");
  }
  auto device = cuda::device_with_uuid(**api, info.device_uuid);
  if (!device) return std::unexpected(device.error());
  s->device = *device;
  CUdevice dev = 0;
  (*api)->device_get(&dev, s->device);
  auto ctx = cuda::PrimaryContext::retain(**api, dev);
  if (!ctx) return std::unexpected(ctx.error());
  s->ctx = std::move(*ctx);
  auto scope = cuda::ContextScope::enter(**api, s->ctx.get());
  if (!scope) return std::unexpected(scope.error());
  auto memory = cuda::VmmAllocation::import(**api, dev, gpu->fd, info.alloc_size);
  if (!memory) return std::unexpected(memory.error());
  s->memory = std::move(*memory);
  return std::unique_ptr<GpuTxBuffers>(new GpuTxBuffers(std::move(s)));
}

void* GpuTxBuffers::buffer(uint32_t index) const {
  if (index >= s_->info.size) return nullptr;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the driver API's device addresses are integers
  return reinterpret_cast<void*>(s_->memory.ptr() + s_->info.payload_offset +
                                 uint64_t{index} * s_->info.slot_size);
}
uint32_t GpuTxBuffers::buffer_size() const {
  return s_->info.slot_size;
}
uint32_t GpuTxBuffers::count() const {
  return s_->info.size;
}
uint32_t GpuTxBuffers::header_size() const {
  return s_->info.header_size;
}
int GpuTxBuffers::device() const {
  return s_->device;
}

}  // namespace daqiri
