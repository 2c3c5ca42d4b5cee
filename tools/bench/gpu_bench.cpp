// gpu-bench: the two sides of the GPU delivery benchmark (tools/bench/run-gpu runs them).
//   gpu-bench ring SOCKET FLOW SECONDS FRAME_BYTES
//       attaches a GPU ring to FLOW and hands every slot straight back (host-side release):
//       the rate at which daqirid's copy engine fills GPU memory. Prints
//       "ring packets N seconds S pps P GBps G".
//   gpu-bench memcpy BYTES CHUNK SECONDS
//       the peer: cudaMemcpyAsync host-to-device of CHUNK-byte pieces from a memfd mapping
//       registered with CUDA (the same kind of memory daqirid stages frames in), back to back
//       on one stream. Prints "memcpy bytes B seconds S GBps G".
//   gpu-bench latency kernel|persistent|graph SAMPLES GAP_US
//       doorbell-to-consumer latency of each consumer style, in one process on one GPU: a
//       producer stream stamps the GPU's global timer and then writes the doorbell with
//       cuStreamWriteValue32 (what daqirid's engine does after its gather kernel), every GAP_US
//       microseconds; the consumer stamps when it first sees the doorbell: a kernel launched by a
//       host thread that waits for the copy's completion as daqirid and libdaqiri_gpu do
//       (kernel), one thread of a running kernel polling the doorbell (persistent), or a CUDA
//       graph of cuStreamWaitValue32 + kernel stages (graph). Prints
//       "latency STYLE samples N p50 A p99 B max C" in microseconds. The graph style posts a
//       graph of 100 stages at a time.
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/cuda/driver_api.hpp"
#include "daqiri/gpu_rx_ring.hpp"
#include "gpu_attach.hpp"
#include "latency_kernels.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int ring(const std::string& socket, const std::string& flow, double seconds, double frame) {
  daqiri::RxOptions ro;
  ro.flow = flow;
  auto attached = daqiri::example::attach_gpu_ring(socket, "gpu-bench", ro);
  if (!attached) return 1;
  daqiri::GpuRxRing* r = attached->ring.get();
  uint32_t seen = 0;
  auto drain = [&](double secs) {
    uint64_t n = 0;
    auto start = Clock::now();
    while (seconds_since(start) < secs) {
      uint32_t p = r->producer();
      if (p == seen) continue;
      r->release(p);
      n += p - seen;
      seen = p;
    }
    return n;
  };
  drain(1.0);  // warm-up: pollers spinning, pools primed
  auto start = Clock::now();
  uint64_t n = drain(seconds);
  double s = seconds_since(start);
  std::printf("ring packets %llu seconds %.3f pps %.0f GBps %.3f\n",
              static_cast<unsigned long long>(n), s, n / s, n * frame / s / 1e9);
  return n > 0 ? 0 : 1;
}

int memcpy_peer(size_t bytes, size_t chunk, double seconds) {
  int fd = ::memfd_create("gpu-bench", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) return 1;
  void* host = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (host == MAP_FAILED) return 1;
  if (cudaHostRegister(host, bytes, cudaHostRegisterPortable) != cudaSuccess) {
    std::fprintf(stderr, "cudaHostRegister failed\n");
    return 1;
  }
  void* device = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaMalloc(&device, bytes) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return 1;
  }
  auto pass = [&] {
    for (size_t off = 0; off + chunk <= bytes; off += chunk) {
      cudaMemcpyAsync(static_cast<char*>(device) + off, static_cast<char*>(host) + off, chunk,
                      cudaMemcpyHostToDevice, stream);
    }
    cudaStreamSynchronize(stream);
    return bytes / chunk * chunk;
  };
  pass();  // warm-up
  uint64_t moved = 0;
  auto start = Clock::now();
  while (seconds_since(start) < seconds)
    moved += pass();
  double s = seconds_since(start);
  std::printf("memcpy bytes %llu seconds %.3f GBps %.3f\n", static_cast<unsigned long long>(moved),
              s, moved / s / 1e9);
  cudaFree(device);
  cudaHostUnregister(host);
  ::munmap(host, bytes);
  ::close(fd);
  return 0;
}

}  // namespace

void spin_for(double us) {
  auto until = Clock::now() + std::chrono::duration<double, std::micro>(us);
  while (Clock::now() < until) {
  }
}

bool cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

// The consumer side of the graph style: `n` stages of (wait doorbell >= first + i + 1, stamp
// seen[first + i]).
bool launch_graph_waiter(const daqiri::cuda::DriverApi& api, CUdeviceptr doorbell, uint64_t* seen,
                         uint32_t first, uint32_t n, cudaStream_t stream, cudaGraphExec_t* exec) {
  CUcontext ctx = nullptr;
  api.ctx_get_current(&ctx);
  cudaGraph_t graph = nullptr;
  if (!cuda_ok(cudaGraphCreate(&graph, 0), "cudaGraphCreate")) return false;
  cudaGraphNode_t previous = nullptr;
  for (uint32_t i = 0; i < n; ++i) {
    CUstreamBatchMemOpParams op{};
    op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    op.waitValue.address = doorbell;
    op.waitValue.value = first + i + 1;
    op.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    CUDA_BATCH_MEM_OP_NODE_PARAMS wp{ctx, 1, &op, 0};
    CUgraphNode wait = nullptr;
    if (api.graph_add_batch_mem_op_node(&wait, graph, previous ? &previous : nullptr,
                                        previous ? 1 : 0, &wp) != CUDA_SUCCESS) {
      std::fprintf(stderr, "cuGraphAddBatchMemOpNode failed\n");
      return false;
    }
    uint32_t index = first + i;
    void* args[] = {&seen, &index};
    cudaKernelNodeParams kp{};
    kp.func = const_cast<void*>(daqiri::bench::stamp_function());
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(1);
    kp.kernelParams = args;
    if (!cuda_ok(cudaGraphAddKernelNode(&previous, graph, &wait, 1, &kp),
                 "cudaGraphAddKernelNode")) {
      return false;
    }
  }
  bool ok = cuda_ok(cudaGraphInstantiate(exec, graph, 0), "cudaGraphInstantiate") &&
            cuda_ok(cudaGraphLaunch(*exec, stream), "cudaGraphLaunch");
  cudaGraphDestroy(graph);
  return ok;
}

int latency(const std::string& style, uint32_t n, double gap_us) {
  auto api = daqiri::cuda::DriverApi::get();
  if (!api) {
    std::fprintf(stderr, "driver: %s\n", api.error().message.c_str());
    return 1;
  }
  if (!cuda_ok(cudaSetDevice(0), "cudaSetDevice")) return 1;
  uint32_t* doorbell = nullptr;
  uint64_t* stamps = nullptr;
  uint64_t* seen = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&doorbell), sizeof(uint32_t));
  cudaMalloc(reinterpret_cast<void**>(&stamps), n * sizeof(uint64_t));
  cudaMalloc(reinterpret_cast<void**>(&seen), n * sizeof(uint64_t));
  cudaMemset(doorbell, 0, sizeof(uint32_t));
  cudaMemset(stamps, 0, n * sizeof(uint64_t));
  cudaMemset(seen, 0, n * sizeof(uint64_t));
  cudaStream_t producer = nullptr, consumer = nullptr;
  cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking);
  cudaEvent_t done = nullptr;
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  if (!cuda_ok(cudaDeviceSynchronize(), "setup")) return 1;
  const auto db = reinterpret_cast<CUdeviceptr>(doorbell);

  std::atomic<uint32_t> mirror{0};  // the host's view of the doorbell (kernel style)
  auto produce = [&](uint32_t from, uint32_t to) {
    spin_for(10000);  // let the consumer settle into its wait
    for (uint32_t i = from; i < to; ++i) {
      spin_for(gap_us);
      daqiri::bench::launch_stamp(stamps, i, producer);
      (*api)->stream_write_value32(producer, db, i + 1, 0);
      cudaEventRecord(done, producer);
      while (cudaEventQuery(done) == cudaErrorNotReady) {
      }
      mirror.store(i + 1, std::memory_order_release);  // what the daemon's host mirror does
    }
  };
  if (style == "persistent") {
    if (!cuda_ok(daqiri::bench::launch_persistent_waiter(doorbell, seen, n, consumer), "launch")) {
      return 1;
    }
    produce(0, n);
  } else if (style == "graph") {
    // Graphs of 100 stages (a long chain instantiates slowly), each built before its doorbells.
    constexpr uint32_t kStages = 100;
    for (uint32_t first = 0; first < n; first += kStages) {
      uint32_t m = std::min(kStages, n - first);
      cudaGraphExec_t exec = nullptr;
      if (!launch_graph_waiter(**api, db, seen, first, m, consumer, &exec)) return 1;
      produce(first, first + m);
      if (!cuda_ok(cudaStreamSynchronize(consumer), "consumer")) return 1;
      cudaGraphExecDestroy(exec);
    }
  } else if (style == "kernel") {
    std::thread host_consumer([&] {
      for (uint32_t i = 0; i < n; ++i) {
        while (mirror.load(std::memory_order_acquire) < i + 1) {
        }
        daqiri::bench::launch_stamp(seen, i, consumer);
      }
    });
    produce(0, n);
    host_consumer.join();
  } else {
    std::fprintf(stderr, "style: kernel, persistent or graph\n");
    return 2;
  }
  if (!cuda_ok(cudaStreamSynchronize(consumer), "consumer")) return 1;
  std::vector<uint64_t> a(n), b(n);
  cudaMemcpy(a.data(), stamps, n * sizeof(uint64_t), cudaMemcpyDeviceToHost);
  cudaMemcpy(b.data(), seen, n * sizeof(uint64_t), cudaMemcpyDeviceToHost);
  std::vector<double> us(n);
  for (uint32_t i = 0; i < n; ++i)
    us[i] = static_cast<double>(static_cast<int64_t>(b[i] - a[i])) / 1e3;
  std::sort(us.begin(), us.end());
  std::printf("latency %s samples %u p50 %.2f p99 %.2f max %.2f\n", style.c_str(), n, us[n / 2],
              us[static_cast<size_t>(n * 0.99)], us.back());
  return 0;
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ring" && argc == 6) {
    return ring(argv[2], argv[3], std::strtod(argv[4], nullptr), std::strtod(argv[5], nullptr));
  }
  if (mode == "latency" && argc == 5) {
    // A kernel loaded lazily while the persistent waiter spins would wait for it: load all now.
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    return latency(argv[2], static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10)),
                   std::strtod(argv[4], nullptr));
  }
  if (mode == "memcpy" && argc == 5) {
    return memcpy_peer(std::strtoull(argv[2], nullptr, 10), std::strtoull(argv[3], nullptr, 10),
                       std::strtod(argv[4], nullptr));
  }
  std::fprintf(stderr,
               "usage: gpu-bench ring SOCKET FLOW SECONDS FRAME_BYTES\n"
               "       gpu-bench latency kernel|persistent|graph SAMPLES GAP_US\n"
               "       gpu-bench memcpy BYTES CHUNK SECONDS\n");
  return 2;
}
