#include "daqiri/mapped_rx_ring.hpp"

#include <cuda_runtime_api.h>

#include <vector>

#include "daqiri/cuda/cuda_error.hpp"

namespace daqiri {

struct MappedRxRing::State {
  MappedRxRingView view{};
  std::vector<void*> registered;  // host ranges this object registered (not those already were)
  uint32_t* mirror = nullptr;

  ~State() {
    for (void* p : registered)
      cudaHostUnregister(p);
    if (mirror != nullptr) cudaFree(mirror);
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
  return std::unique_ptr<MappedRxRing>(new MappedRxRing(std::move(s)));
}

MappedRxRing::MappedRxRing(std::unique_ptr<State> s) : s_(std::move(s)) {}
MappedRxRing::~MappedRxRing() = default;

const MappedRxRingView& MappedRxRing::view() const {
  return s_->view;
}

}  // namespace daqiri
