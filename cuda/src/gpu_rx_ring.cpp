#include "daqiri/gpu_rx_ring.hpp"

#include <sys/mman.h>

#include <cstring>

#include "daqiri/cuda/driver_api.hpp"
#include "daqiri/cuda/vmm_allocation.hpp"
#include "daqiri/ring.hpp"

namespace daqiri {

struct GpuRxRing::State {
  Client* client = nullptr;
  RxOptions options;
  uint64_t session = 0;  // Client::sessions_opened() when attached: only that session may detach
  GpuRingFds fds;
  const cuda::DriverApi* api = nullptr;
  int device = -1;
  cuda::PrimaryContext ctx;
  cuda::VmmAllocation ring;
  CUdeviceptr ipc_ring = 0;  // RxOptions::cuda_ipc: opened from the legacy handle instead
  void* control = nullptr;   // the host control block, mapped RW
  size_t control_size = 0;
  const std::byte* headers = nullptr;  // header-data split: the header slots, mapped RO
  size_t headers_size = 0;
  bool registered = false;
  CUdeviceptr consumer_device = 0;
  abi::RingView control_ring;

  ~State() {
    if (registered || ipc_ring != 0) {
      if (auto scope = cuda::ContextScope::enter(*api, ctx.get())) {
        if (registered) api->mem_host_unregister(control);
        if (ipc_ring != 0) api->ipc_close_mem_handle(ipc_ring);
      }
    }
    if (control != nullptr) ::munmap(control, control_size);
    if (headers != nullptr) ::munmap(const_cast<std::byte*>(headers), headers_size);
  }
};

Result<std::unique_ptr<GpuRxRing>> GpuRxRing::attach(Client& client, const RxOptions& options) {
  auto api = cuda::DriverApi::get();
  if (!api) return std::unexpected(api.error());
  auto fds = client.attach_gpu_rx_fds(options);
  if (!fds) return std::unexpected(fds.error());
  auto s = std::make_unique<State>();
  s->client = &client;
  s->options = options;
  s->session = client.sessions_opened();
  s->api = *api;
  s->fds = std::move(*fds);
  // From here a failure must detach: the daemon holds the ring until then.
  auto fail_detach = [&](Error e) -> Result<std::unique_ptr<GpuRxRing>> {
    client.detach(s->fds.id);
    return std::unexpected(std::move(e));
  };
  const daqiri_gpu_ring_info& info = s->fds.info;
  if (info.size == 0 || (info.size & (info.size - 1)) != 0 ||
      info.payload_offset + uint64_t{info.size} * info.slot_size > info.alloc_size ||
      info.desc_offset + uint64_t{info.size} * sizeof(daqiri_rx_desc) > info.payload_offset) {
    return fail_detach(
        {ErrorCode::kInternal, "the daemon's GPU ring layout does not check out", {}});
  }
  auto device = cuda::device_with_uuid(**api, info.device_uuid);
  if (!device) return fail_detach(device.error());
  s->device = *device;
  CUdevice dev = 0;
  (*api)->device_get(&dev, s->device);
  auto ctx = cuda::PrimaryContext::retain(**api, dev);
  if (!ctx) return fail_detach(ctx.error());
  s->ctx = std::move(*ctx);
  auto scope = cuda::ContextScope::enter(**api, s->ctx.get());
  if (!scope) return fail_detach(scope.error());
  if (options.cuda_ipc) {
    CUipcMemHandle h{};
    std::memcpy(h.reserved, s->fds.cuda_ipc_handle.data(), sizeof h.reserved);
    if (CUresult r =
            (*api)->ipc_open_mem_handle(&s->ipc_ring, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        r != CUDA_SUCCESS) {
      s->ipc_ring = 0;
      return fail_detach(cuda::driver_error(**api, r, "cuIpcOpenMemHandle of the GPU ring"));
    }
  } else {
    auto ring = cuda::VmmAllocation::import(**api, dev, s->fds.ring.get(), info.alloc_size);
    if (!ring) return fail_detach(ring.error());
    s->ring = std::move(*ring);
  }

  s->control_size = s->fds.control_size;
  void* p =
      ::mmap(nullptr, s->control_size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fds.control.get(), 0);
  if (p == MAP_FAILED)
    return fail_detach(Error{ErrorCode::kInternal, "mmap of the control block", {}});
  s->control = p;
  auto cr = abi::RingView::open(p, s->control_size, DAQIRI_RING_GPU, 0);
  if (!cr || cr->size() != info.size) {
    return fail_detach(
        {ErrorCode::kInternal, "the daemon's GPU ring control block does not check out", {}});
  }
  s->control_ring = *cr;
  // Kernels store the consumer index into host memory: map it for the GPU.
  if (CUresult r = (*api)->mem_host_register(
          p, s->control_size, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
      r != CUDA_SUCCESS) {
    return fail_detach(cuda::driver_error(**api, r, "cuMemHostRegister of the control block"));
  }
  s->registered = true;
  CUdeviceptr base = 0;
  if (CUresult r = (*api)->mem_host_get_device_pointer(&base, p, 0); r != CUDA_SUCCESS) {
    return fail_detach(cuda::driver_error(**api, r, "cuMemHostGetDevicePointer"));
  }
  s->consumer_device = base + offsetof(daqiri_ring_header, consumer);
  if (info.header_size != 0) {
    const daqiri_region_info& h = s->fds.headers_info;
    if (h.buf_size != info.header_size || h.num_bufs != info.size ||
        h.size < uint64_t{h.buf_size} * h.num_bufs) {
      return fail_detach({ErrorCode::kInternal, "the daemon's header slots do not check out", {}});
    }
    void* hp = ::mmap(nullptr, h.size, PROT_READ, MAP_SHARED, s->fds.headers.get(), 0);
    if (hp == MAP_FAILED) {
      return fail_detach(Error{ErrorCode::kInternal, "mmap of the header slots", {}});
    }
    s->headers = static_cast<const std::byte*>(hp);
    s->headers_size = h.size;
  }
  return std::unique_ptr<GpuRxRing>(new GpuRxRing(std::move(s)));
}

GpuRxRing::GpuRxRing(std::unique_ptr<State> s) : s_(std::move(s)) {}

GpuRxRing::~GpuRxRing() {
  // After a reconnect the id means nothing to the new session (or names another attachment).
  if (s_ && s_->client->sessions_opened() == s_->session) s_->client->detach(s_->fds.id);
}

Result<> GpuRxRing::reattach() {
  auto fresh = attach(*s_->client, s_->options);
  if (!fresh) return std::unexpected(fresh.error());
  std::swap(s_, (*fresh)->s_);  // `fresh` now holds the old ring and releases it
  return {};
}

GpuRingView GpuRxRing::view() const {
  const daqiri_gpu_ring_info& info = s_->fds.info;
  // The driver API hands out device addresses as integers.
  // NOLINTBEGIN(performance-no-int-to-ptr)
  auto* base = reinterpret_cast<const uint8_t*>(s_->ipc_ring != 0 ? s_->ipc_ring : s_->ring.ptr());
  return GpuRingView{base,
                     reinterpret_cast<const uint32_t*>(base + info.doorbell_offset),
                     reinterpret_cast<const daqiri_rx_desc*>(base + info.desc_offset),
                     reinterpret_cast<uint32_t*>(s_->consumer_device),
                     info.size - 1,
                     info.slot_size};
  // NOLINTEND(performance-no-int-to-ptr)
}

const daqiri_gpu_ring_info& GpuRxRing::info() const {
  return s_->fds.info;
}

int GpuRxRing::device() const {
  return s_->device;
}

uint64_t GpuRxRing::id() const {
  return s_->fds.id;
}

uint32_t GpuRxRing::producer() const {
  return s_->control_ring.load_producer();
}

bool GpuRxRing::detached() const {
  // A daemon that died without marking the ring still hangs up the session.
  return s_->control_ring.state() != DAQIRI_RING_ACTIVE ||
         s_->client->sessions_opened() != s_->session || !s_->client->connected();
}

void GpuRxRing::release(uint32_t counter) {
  s_->control_ring.publish_consumer(counter);
}

Result<uint32_t> GpuRxRing::wait(uint32_t seen, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    uint32_t p = producer();
    if (p != seen) return p;
    if (detached()) return fail(ErrorCode::kUnavailable, "the GPU ring is detached");
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return seen;
    s_->control_ring.sleep_for_producer(s_->fds.eventfd.get(), seen,
                                        static_cast<int>(left.count()));
  }
}

uint32_t GpuRxRing::header_size() const {
  return s_->fds.info.header_size;
}

std::span<const std::byte> GpuRxRing::header(uint32_t counter) const {
  uint32_t size = s_->fds.info.header_size;
  if (s_->headers == nullptr) return {};
  return {s_->headers + uint64_t{counter & (s_->fds.info.size - 1)} * size, size};
}

}  // namespace daqiri
