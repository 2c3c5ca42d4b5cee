// Owners of the CUDA runtime objects the GPU benchmarks make: each goes back once, on every way
// out of its scope, an early return after a failed call included.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <memory>
#include <type_traits>

namespace daqiri::bench {

// Whether `e` is cudaSuccess; says which call failed and why on stderr when not.
inline bool cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct CudaFreeHost {
  void operator()(void* p) const { cudaFreeHost(p); }
};
struct CudaStreamDestroy {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct CudaEventDestroy {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
struct CudaGraphDestroy {
  void operator()(cudaGraph_t g) const { cudaGraphDestroy(g); }
};
struct CudaGraphExecDestroy {
  void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); }
};
struct CudaHostUnregister {
  void operator()(void* p) const { cudaHostUnregister(p); }
};

template <typename T>
using DeviceMemory = std::unique_ptr<T, CudaFree>;
template <typename T>
using PinnedMemory = std::unique_ptr<T, CudaFreeHost>;
using Stream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, CudaStreamDestroy>;
using Event = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, CudaEventDestroy>;
using Graph = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, CudaGraphDestroy>;
using GraphExec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, CudaGraphExecDestroy>;
// Host memory registered with cudaHostRegister (the pointer is the registration's start).
using HostRegistration = std::unique_ptr<void, CudaHostUnregister>;

// cudaMalloc of `bytes` into `out` (empty after a failure).
template <typename T>
cudaError_t device_alloc(DeviceMemory<T>& out, size_t bytes) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  out.reset(e == cudaSuccess ? static_cast<T*>(p) : nullptr);
  return e;
}

// cudaHostAlloc of `bytes` with `flags` into `out` (empty after a failure).
template <typename T>
cudaError_t pinned_alloc(PinnedMemory<T>& out, size_t bytes, unsigned flags) {
  void* p = nullptr;
  cudaError_t e = cudaHostAlloc(&p, bytes, flags);
  out.reset(e == cudaSuccess ? static_cast<T*>(p) : nullptr);
  return e;
}

inline cudaError_t make_stream(Stream& out, unsigned flags = cudaStreamNonBlocking) {
  cudaStream_t s = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&s, flags);
  out.reset(e == cudaSuccess ? s : nullptr);
  return e;
}

inline cudaError_t make_event(Event& out, unsigned flags = cudaEventDisableTiming) {
  cudaEvent_t ev = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&ev, flags);
  out.reset(e == cudaSuccess ? ev : nullptr);
  return e;
}

inline cudaError_t register_host(HostRegistration& out, void* p, size_t bytes, unsigned flags) {
  cudaError_t e = cudaHostRegister(p, bytes, flags);
  out.reset(e == cudaSuccess ? p : nullptr);
  return e;
}

}  // namespace daqiri::bench
