#include "daqiri/mapped_rx_ring.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "daqiri/cuda/cuda_error.hpp"
#include "daqiri/cuda/driver_api.hpp"
#include "daqiri/cuda/stream_memop.hpp"
#include "mapped_rx_relay_kernel.hpp"

namespace daqiri {

struct MappedRxRing::State {
  MappedRxRingView view{};
  const daqiri_ring_header* host_ring = nullptr;  // the same ring as this process maps it
  std::vector<void*> registered;  // host ranges this object registered (not those already were)
  uint32_t* mirror = nullptr;
  RelayWords* relay = nullptr;       // device memory
  uint32_t* relay_stop = nullptr;    // mapped host memory: the host sets, the relay polls
  cudaEvent_t relay_done = nullptr;  // recorded after each launch of the relay's graph
  cudaGraphExec_t relay_exec = nullptr;
  uint32_t relay_batches = 0;  // steps a launch runs; 0 until the first launch
  bool relay_stopped = false;

  ~State() {
    for (void* p : registered)
      cudaHostUnregister(p);
    if (mirror != nullptr) cudaFree(mirror);
    if (relay != nullptr) cudaFree(relay);
    if (relay_stop != nullptr) cudaFreeHost(relay_stop);
    if (relay_done != nullptr) cudaEventDestroy(relay_done);
    if (relay_exec != nullptr) cudaGraphExecDestroy(relay_exec);
  }

  Result<> build_relay(uint32_t batches);

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
  // Stages launched before the relay's first step wait for published == 1.
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

namespace {

// A relay memop node (wait for *address == value, or write value) after `after`.
Result<CUgraphNode> add_memop(const cuda::DriverApi& api, CUcontext ctx, cudaGraph_t graph,
                              CUgraphNode after, bool wait, const void* address, uint32_t value) {
  return cuda::add_memop_node(api, ctx, graph, after,
                              cuda::stream_memop(wait, reinterpret_cast<CUdeviceptr>(address),
                                                 value, CU_STREAM_WAIT_VALUE_EQ));
}

struct GraphOwner {
  cudaGraph_t g = nullptr;
  ~GraphOwner() {
    if (g != nullptr) cudaGraphDestroy(g);
  }
};

}  // namespace

// Steps of two phases, so that every memop's value is the same on every launch: one graph,
// launched again and again.
Result<> MappedRxRing::State::build_relay(uint32_t batches) {
  auto api = cuda::DriverApi::get();
  if (!api) return std::unexpected(api.error());
  CUcontext ctx = nullptr;
  if (CUresult r = (*api)->ctx_get_current(&ctx); r != CUDA_SUCCESS || ctx == nullptr) {
    return std::unexpected(cuda::driver_error(**api, r, "cuCtxGetCurrent"));
  }
  uint32_t* stop = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&stop), relay_stop, 0);
      e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "the GPU's address of the relay's stop flag"));
  }
  GraphOwner graph;
  if (cudaError_t e = cudaGraphCreate(&graph.g, 0); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaGraphCreate"));
  }
  const uint32_t* producer = view.producer;
  uint32_t* consumer = view.consumer;
  RelayWords* words = relay;
  void* args[] = {&producer, &consumer, &words, &stop};
  CUgraphNode last = nullptr;
  for (uint32_t k = 0; k < batches; ++k) {
    auto wait = add_memop(**api, ctx, graph.g, last, true, &relay->taken, relay_phase(k - 1));
    if (!wait) return std::unexpected(wait.error());
    cudaKernelNodeParams kp{};
    kp.func = const_cast<void*>(relay_step_function());
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(1);
    kp.kernelParams = args;
    cudaGraphNode_t step = nullptr;
    cudaGraphNode_t after = *wait;
    if (cudaError_t e = cudaGraphAddKernelNode(&step, graph.g, &after, 1, &kp); e != cudaSuccess) {
      return std::unexpected(cuda_error(e, "cudaGraphAddKernelNode (relay step)"));
    }
    auto write = add_memop(**api, ctx, graph.g, step, false, &relay->published, relay_phase(k));
    if (!write) return std::unexpected(write.error());
    last = *write;
  }
  if (cudaError_t e = cudaGraphInstantiate(&relay_exec, graph.g, 0); e != cudaSuccess) {
    relay_exec = nullptr;
    return std::unexpected(cuda_error(e, "cudaGraphInstantiate (relay)"));
  }
  relay_batches = batches;
  return {};
}

Result<> MappedRxRing::launch_relay(cudaStream_t stream, uint32_t batches) {
  if (s_->relay_stopped) {
    return fail(ErrorCode::kFailedPrecondition,
                "the ring's relay was stopped: map the stream again for another");
  }
  if (batches == 0 || batches % 2 != 0) {
    return fail(ErrorCode::kInvalidArgument,
                "a relay launch runs an even number of batches (two phases), not " +
                    std::to_string(batches));
  }
  if (s_->relay_batches == 0) {
    const uint32_t from = __atomic_load_n(&s_->host_ring->consumer, __ATOMIC_ACQUIRE);
    const uint32_t batch[2] = {from, from};
    if (cudaError_t e = cudaMemcpy(s_->relay->batch, batch, sizeof batch, cudaMemcpyHostToDevice);
        e != cudaSuccess) {
      return std::unexpected(cuda_error(e, "initialising the relay's batch"));
    }
    __atomic_store_n(s_->relay_stop, 0u, __ATOMIC_RELEASE);
    if (auto ok = s_->build_relay(batches); !ok) return ok;
  } else if (batches != s_->relay_batches) {
    return fail(ErrorCode::kInvalidArgument,
                "the relay's graph runs " + std::to_string(s_->relay_batches) +
                    " batches a launch, not " + std::to_string(batches));
  }
  if (cudaError_t e = cudaGraphLaunch(s_->relay_exec, stream); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "launching the relay's graph"));
  }
  if (cudaError_t e = cudaEventRecord(s_->relay_done, stream); e != cudaSuccess) {
    return std::unexpected(cuda_error(e, "cudaEventRecord after the relay"));
  }
  return {};
}

Result<> MappedRxRing::stop_relay() {
  if (s_ == nullptr || s_->relay_batches == 0 || std::exchange(s_->relay_stopped, true)) return {};
  __atomic_store_n(s_->relay_stop, 1u, __ATOMIC_RELEASE);
  // Bounded: with the flag set every step returns at once, but a step still waits for its
  // stage, and stages the user never launched never come.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    cudaError_t e = cudaEventQuery(s_->relay_done);
    if (e == cudaSuccess) return {};
    if (e != cudaErrorNotReady) return std::unexpected(cuda_error(e, "waiting for the relay"));
    if (std::chrono::steady_clock::now() >= deadline) {
      return fail(ErrorCode::kUnavailable,
                  "the relay's steps still wait for consumer stages after 1 s: launch as many "
                  "stages as relay batches");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace daqiri
