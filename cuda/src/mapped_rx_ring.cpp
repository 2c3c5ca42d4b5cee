#include "daqiri/mapped_rx_ring.hpp"

#include <cuda_runtime_api.h>

#include <utility>
#include <vector>

#include "daqiri/cuda/cuda_error.hpp"
#include "mapped_rx_relay_kernel.hpp"

namespace daqiri {

struct MappedRxRing::State {
  MappedRxRingView view{};
  const daqiri_ring_header* host_ring = nullptr;  // the same ring as this process maps it
  std::vector<void*> registered;  // host ranges this object registered (not those already were)
  uint32_t* mirror = nullptr;
  RelayWords* relay = nullptr;       // device memory
  uint32_t* relay_stop = nullptr;    // mapped host memory: the host sets, the relay polls
  cudaEvent_t relay_done = nullptr;  // recorded after the relay's kernel
  bool relay_started = false;
  bool relay_running = false;

  ~State() {
    for (void* p : registered)
      cudaHostUnregister(p);
    if (mirror != nullptr) cudaFree(mirror);
    if (relay != nullptr) cudaFree(relay);
    if (relay_stop != nullptr) cudaFreeHost(relay_stop);
    if (relay_done != nullptr) cudaEventDestroy(relay_done);
  }

  // The device address of [p, p + bytes), registered here unless this process already did.
  Result<const void*> map_range(const void* p, size_t bytes, bool read_only, const char* what) {
    unsigned flags = cudaHostRegisterMapped | cudaHostRegisterPortable;
    if (read_only) flags |= cudaHostRegisterReadOnly;
    void* host = const_cast<void*>(p);
    cudaError_t e = cudaHostRegister(host, bytes, flags);
    if (e == cudaSuccess) {
      registered.push_back(host);
    } else if (e == cudaErrorHostMemoryAlreadyRegistered) {
      cudaGetLastError();
    } else {
      return std::unexpected(cuda_error(e, std::string("mapping ") + what + " for the GPU"));
    }
    void* device = nullptr;
    if (e = cudaHostGetDevicePointer(&device, host, 0); e != cudaSuccess) {
      return std::unexpected(cuda_error(e, std::string("the GPU's address of ") + what));
    }
    return device;
  }
};

Result<std::unique_ptr<MappedRxRing>> MappedRxRing::map(const RxStream& stream) {
  RxStream::Memory m = stream.memory();
  if (m.view.compact) {
    return fail(ErrorCode::kInvalidArgument,
                "a mapped RX ring reads full descriptors: attach without `compact`");
  }
  int device = 0;
  int read_only = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaGetDevice"));
  }
  cudaDeviceGetAttribute(&read_only, cudaDevAttrHostRegisterReadOnlySupported, device);
  if (read_only == 0 && m.view.region_count != 0) {
    return fail(ErrorCode::kFailedPrecondition,
                "this GPU cannot map read-only host memory (cudaDevAttrHostRegisterReadOnly"
                "Supported), and the stream's buffers are read-only to clients");
  }
  auto s = std::make_unique<State>();
  MappedRxRingView& v = s->view;
  auto rings = s->map_range(m.rings.data(), m.rings.size(), false, "the stream's ring");
  if (!rings) return std::unexpected(rings.error());
  // Addresses inside the rings mapping keep their distance from its start on the GPU's side.
  auto at = [&](const void* host) {
    auto distance = static_cast<const std::byte*>(host) - m.rings.data();
    return static_cast<const std::byte*>(*rings) + distance;
  };
  v.producer = reinterpret_cast<const uint32_t*>(at(&m.ring->producer));
  v.consumer = const_cast<uint32_t*>(reinterpret_cast<const uint32_t*>(at(&m.ring->consumer)));
  v.descs = reinterpret_cast<const daqiri_rx_desc*>(at(m.view.slots));
  v.mask = m.view.mask;
  v.region_count = m.view.region_count;
  for (uint32_t i = 0; i < v.region_count; ++i) {
    const std::span<const std::byte>& region = m.view.regions[i];
    auto r = s->map_range(region.data(), region.size(), true, "a region's buffers");
    if (!r) return std::unexpected(r.error());
    v.regions[i] = static_cast<const uint8_t*>(*r);
    v.region_bytes[i] = region.size();
  }
  if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&s->mirror), sizeof(uint32_t));
      e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaMalloc of the producer's copy"));
  }
  uint32_t producer = __atomic_load_n(&m.ring->producer, __ATOMIC_ACQUIRE);
  if (cudaError_t e = cudaMemcpy(s->mirror, &producer, sizeof producer, cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "initialising the producer's copy"));
  }
  v.mirror = s->mirror;
  s->host_ring = m.ring;
  if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&s->relay), sizeof(RelayWords));
      e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaMalloc of the relay's words"));
  }
  if (cudaError_t e = cudaHostAlloc(reinterpret_cast<void**>(&s->relay_stop), sizeof(uint32_t),
                                    cudaHostAllocMapped);
      e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaHostAlloc of the relay's stop flag"));
  }
  if (cudaError_t e = cudaEventCreateWithFlags(&s->relay_done, cudaEventDisableTiming);
      e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaEventCreate for the relay"));
  }
  // Stages launched before the relay starts wait for batch 1.
  if (cudaError_t e = cudaMemset(s->relay, 0, sizeof(RelayWords)); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "initialising the relay's words"));
  }
  return std::unique_ptr<MappedRxRing>(new MappedRxRing(std::move(s)));
}

MappedRxRing::MappedRxRing(std::unique_ptr<State> s) : s_(std::move(s)) {}
MappedRxRing::~MappedRxRing() {
  (void)stop_relay();
}

const MappedRxRingView& MappedRxRing::view() const {
  return s_->view;
}

MappedRelayView MappedRxRing::relay_view() const {
  return MappedRelayView{&s_->relay->published, &s_->relay->taken, s_->relay->batch};
}

Result<> MappedRxRing::start_relay(cudaStream_t stream) {
  if (s_->relay_started) {
    return fail(ErrorCode::kFailedPrecondition,
                "the ring's relay runs once: map the stream again for another");
  }
  __atomic_store_n(s_->relay_stop, 0u, __ATOMIC_RELEASE);
  const uint32_t from = __atomic_load_n(&s_->host_ring->consumer, __ATOMIC_ACQUIRE);
  uint32_t* stop = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&stop), s_->relay_stop, 0);
      e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "the GPU's address of the relay's stop flag"));
  }
  if (cudaError_t e = launch_relay(s_->view, s_->relay, from, stop, stream); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "launching the relay"));
  }
  if (cudaError_t e = cudaEventRecord(s_->relay_done, stream); e != cudaSuccess) {
    __atomic_store_n(s_->relay_stop, 1u, __ATOMIC_RELEASE);
    cudaStreamSynchronize(stream);
    return std::unexpected(cuda_error(e, "cudaEventRecord after the relay"));
  }
  s_->relay_started = true;
  s_->relay_running = true;
  return {};
}

Result<> MappedRxRing::stop_relay() {
  if (s_ == nullptr || !std::exchange(s_->relay_running, false)) return {};
  __atomic_store_n(s_->relay_stop, 1u, __ATOMIC_RELEASE);
  // Bounded: the relay returns within 1 ms of seeing the flag.
  if (cudaError_t e = cudaEventSynchronize(s_->relay_done); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "waiting for the relay to return"));
  }
  return {};
}

}  // namespace daqiri
