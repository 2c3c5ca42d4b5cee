// gpu-bench: the two sides of the GPU delivery benchmark (tools/bench/run-gpu runs them).
//   gpu-bench ring SOCKET FLOW SECONDS FRAME_BYTES [block]
//       attaches a GPU ring to FLOW and hands every slot straight back (host-side release):
//       the rate at which daqirid's copy engine fills GPU memory. Prints
//       "ring packets N seconds S pps P GBps G". `block`: with blocking backpressure, so that
//       a source faster than the engine (net_null) waits instead of being dropped.
//   gpu-bench memcpy BYTES CHUNK SECONDS
//       the peer: cudaMemcpyAsync host-to-device of CHUNK-byte pieces from a memfd mapping
//       registered with CUDA (the same kind of memory daqirid stages frames in), back to back
//       on one stream. Prints "memcpy bytes B seconds S GBps G".
//   gpu-bench memcpy-d2d BYTES CHUNK SECONDS
//       the same from device memory (the peer of gpudirect pools, which are GPU memory).
//   gpu-bench memcpy-rows BYTES ROWS WIDTH PITCH SECONDS STREAMS
//       pitched copies of ROWS rows of WIDTH bytes PITCH apart (frames in pool buffers) into
//       slots of WIDTH rounded up to 256, over STREAMS streams: what the engine's copies cost
//       against one plain copy. GBps counts the rows' bytes.
//   gpu-bench latency kernel|persistent|graph|graph-loop SAMPLES GAP_US
//       doorbell-to-consumer latency of each consumer style, in one process on one GPU: a
//       producer stream stamps the GPU's global timer and then writes the doorbell with
//       cuStreamWriteValue32 (what daqirid's engine does after its gather kernel), every GAP_US
//       microseconds; the consumer stamps when it first sees the doorbell: a kernel launched by a
//       host thread that waits for the copy's completion as daqirid and libdaqiri_gpu do
//       (kernel), one thread of a running kernel polling the doorbell (persistent), or a CUDA
//       graph of cuStreamWaitValue32 + kernel stages (graph). Prints
//       "latency STYLE samples N p50 A p99 B max C" in microseconds. The graph style posts a
//       graph of 100 stages at a time; graph-loop launches one graph whose WHILE node runs a
//       one-thread waiter per doorbell.
//   gpu-bench e2e [mapped-]kernel|persistent|graph|graph-loop|mapped[-graph-host] SOCKET FLOW
//   PACKETS
//       the same consumer styles on a real GPU ring of FLOW, fed by daqirid: from the daemon's
//       receive timestamp (CLOCK_REALTIME, in each descriptor) to the consumer first seeing the
//       packet (the GPU's global timer), the two clocks related by a calibration in this run.
//       Prints "ready" once waiting (then send PACKETS packets, fewer than the ring's slots,
//       well apart), then "e2e STYLE samples N p50 A p99 B max C clock_error D drift_ppm E" in
//       microseconds; D bounds the calibrations' error (one before, one after: the offset is
//       interpolated, E is how fast it moved). The kernel style sleeps on the ring's eventfd
//       between bursts, as daqiri-gpu-receive does. `mapped` (or mapped-STYLE) attaches a host
//       ring instead (the flow's queue on a host or pinned region) mapped for the GPU
//       (daqiri::MappedRxRing): one thread of a kernel polls its producer index in host memory
//       (mapped-graph: the graph's stages take batches from the ring's relay, steps on a
//       stream of their own that turn the index into batches in GPU memory; mapped-graph-host:
//       each stage's stream waits
//       on the host index itself; mapped-kernel: the host thread sleeps on the ring's
//       eventfd).
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cuda_owned.hpp"
#include "daqiri/common/mapping.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "daqiri/cuda/driver_api.hpp"
#include "daqiri/cuda/stream_memop.hpp"
#include "daqiri/gpu_graph_loop.hpp"
#include "daqiri/gpu_rx_ring.hpp"
#include "daqiri/mapped_rx_ring.hpp"
#include "gpu_attach.hpp"
#include "latency_kernels.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace daqiri::bench;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int ring(const std::string& socket, const std::string& flow, double seconds, double frame,
         bool block) {
  daqiri::RxOptions ro;
  ro.flow = flow;
  ro.block = block;
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

// How the peer copies: pieces of `rows` rows of `width` bytes, `pitch` apart in the source and
// `width` rounded up to 256 apart in GPU memory (as ring slots are), alternating over `streams`
// streams. One row of CHUNK bytes on one stream is the plain burst-sized copy.
struct CopyShape {
  size_t rows = 1;
  size_t width = 0;
  size_t pitch = 0;
  int streams = 1;
};

// `from_device`: the source is device memory too (cudaMalloc), not registered host memory.
int memcpy_peer(size_t bytes, CopyShape shape, double seconds, bool from_device) {
  daqiri::UniqueFd fd(::memfd_create("gpu-bench", MFD_CLOEXEC));
  if (!fd || ::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) return 1;
  auto host = daqiri::map_fd(fd.get(), bytes, true);
  if (!host) return 1;
  HostRegistration registered;
  if (register_host(registered, host->data(), bytes, cudaHostRegisterPortable) != cudaSuccess) {
    std::fprintf(stderr, "cudaHostRegister failed\n");
    return 1;
  }
  DeviceMemory<char> device, device_source;
  std::vector<Stream> streams(static_cast<size_t>(std::max(shape.streams, 1)));
  if (device_alloc(device, bytes) != cudaSuccess ||
      (from_device && device_alloc(device_source, bytes) != cudaSuccess)) {
    return 1;
  }
  for (Stream& s : streams) {
    if (make_stream(s) != cudaSuccess) return 1;
  }
  const auto* source = from_device ? device_source.get() : reinterpret_cast<char*>(host->data());
  size_t spitch = std::max(shape.pitch, shape.width);
  size_t dpitch = (shape.width + 255) / 256 * 256;
  size_t span = std::max(spitch, dpitch) * shape.rows;
  auto pass = [&] {
    size_t moved = 0;
    size_t i = 0;
    for (size_t off = 0; off + span <= bytes; off += span, ++i) {
      cudaStream_t s = streams[i % streams.size()].get();
      if (shape.rows == 1) {
        cudaMemcpyAsync(device.get() + off, source + off, shape.width, cudaMemcpyDefault, s);
      } else {
        cudaMemcpy2DAsync(device.get() + off, dpitch, source + off, spitch, shape.width, shape.rows,
                          cudaMemcpyDefault, s);
      }
      moved += shape.rows * shape.width;
    }
    cudaDeviceSynchronize();
    return moved;
  };
  pass();  // warm-up
  uint64_t moved = 0;
  auto start = Clock::now();
  while (seconds_since(start) < seconds)
    moved += pass();
  double s = seconds_since(start);
  std::printf("memcpy bytes %llu seconds %.3f GBps %.3f\n", static_cast<unsigned long long>(moved),
              s, moved / s / 1e9);
  return 0;
}

}  // namespace

void spin_for(double us) {
  auto until = Clock::now() + std::chrono::duration<double, std::micro>(us);
  while (Clock::now() < until) {
  }
}

// A stream memory operation node after `previous` (if any): a wait for *address >= value
// (cyclic; or as `wait_flags` says), or a write of value (after everything before it).
CUgraphNode add_memop_node(const daqiri::cuda::DriverApi& api, CUcontext ctx, cudaGraph_t graph,
                           CUgraphNode previous, bool wait, CUdeviceptr address, uint32_t value,
                           unsigned wait_flags = CU_STREAM_WAIT_VALUE_GEQ) {
  auto node = daqiri::cuda::add_memop_node(
      api, ctx, graph, previous, daqiri::cuda::stream_memop(wait, address, value, wait_flags));
  if (!node) {
    std::fprintf(stderr, "%s\n", node.error().message.c_str());
    return nullptr;
  }
  return *node;
}

// A one-thread kernel node `func(args)` after `previous`.
cudaGraphNode_t add_kernel_node(cudaGraph_t graph, cudaGraphNode_t previous, const void* func,
                                void** args) {
  cudaKernelNodeParams kp{};
  kp.func = const_cast<void*>(func);
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(1);
  kp.kernelParams = args;
  cudaGraphNode_t node = nullptr;
  if (!cuda_ok(cudaGraphAddKernelNode(&node, graph, &previous, 1, &kp), "cudaGraphAddKernelNode")) {
    return nullptr;
  }
  return node;
}

bool launch_graph(Graph& graph, cudaStream_t stream, GraphExec& exec) {
  cudaGraphExec_t instance = nullptr;
  if (!cuda_ok(cudaGraphInstantiate(&instance, graph.get(), 0), "cudaGraphInstantiate")) {
    return false;
  }
  exec.reset(instance);
  return cuda_ok(cudaGraphLaunch(instance, stream), "cudaGraphLaunch");
}

// The consumer side of the graph style: `n` stages of (wait doorbell >= first + i + 1, stamp
// seen[first + i]).
bool launch_graph_waiter(const daqiri::cuda::DriverApi& api, CUdeviceptr doorbell, uint64_t* seen,
                         uint32_t first, uint32_t n, cudaStream_t stream, GraphExec& exec) {
  CUcontext ctx = nullptr;
  api.ctx_get_current(&ctx);
  cudaGraph_t made = nullptr;
  if (!cuda_ok(cudaGraphCreate(&made, 0), "cudaGraphCreate")) return false;
  Graph graph(made);
  cudaGraphNode_t previous = nullptr;
  for (uint32_t i = 0; i < n; ++i) {
    CUgraphNode wait =
        add_memop_node(api, ctx, graph.get(), previous, true, doorbell, first + i + 1);
    uint32_t index = first + i;
    void* args[] = {&seen, &index};
    if (wait == nullptr) return false;
    previous = add_kernel_node(graph.get(), wait, daqiri::bench::stamp_function(), args);
    if (previous == nullptr) return false;
  }
  return launch_graph(graph, stream, exec);
}

// The graph style over a mapped ring's relay (MappedRxRing::launch_relay): `stages` (even) of
// (wait published == (k + 1) % 2, stamp the batch's packets below `packets`, taken = (k + 1) %
// 2). The phases repeat, so the graph is built once and launched again with the relay's steps.
bool build_relay_waiter(const daqiri::cuda::DriverApi& api, const daqiri::MappedRelayView& relay,
                        uint64_t* seen, uint32_t packets, uint32_t stages, GraphExec& exec) {
  CUcontext ctx = nullptr;
  api.ctx_get_current(&ctx);
  cudaGraph_t made = nullptr;
  if (!cuda_ok(cudaGraphCreate(&made, 0), "cudaGraphCreate")) return false;
  Graph graph(made);
  const auto published = reinterpret_cast<CUdeviceptr>(relay.published);
  const auto taken = reinterpret_cast<CUdeviceptr>(relay.taken);
  const uint32_t* batch = relay.batch;
  void* args[] = {&seen, &batch, &packets};
  CUgraphNode previous = nullptr;
  for (uint32_t k = 0; k < stages; ++k) {
    const uint32_t phase = daqiri::relay_phase(k);
    CUgraphNode wait = add_memop_node(api, ctx, graph.get(), previous, true, published, phase,
                                      CU_STREAM_WAIT_VALUE_EQ);
    if (wait == nullptr) return false;
    cudaGraphNode_t kernel =
        add_kernel_node(graph.get(), wait, daqiri::bench::stamp_batch_function(), args);
    if (kernel == nullptr) return false;
    previous = add_memop_node(api, ctx, graph.get(), kernel, false, taken, phase);
    if (previous == nullptr) return false;
  }
  cudaGraphExec_t instance = nullptr;
  if (!cuda_ok(cudaGraphInstantiate(&instance, graph.get(), 0), "cudaGraphInstantiate")) {
    return false;
  }
  exec.reset(instance);
  return true;
}

// The consumer side of the graph-loop style: one launch of a WHILE node whose kernel waits for
// the next doorbell (`host_memory`: a mapped host ring's producer index) and stamps it. `next`:
// a device word, zeroed.
std::optional<daqiri::GpuGraphLoop> launch_loop_waiter(const uint32_t* doorbell, bool host_memory,
                                                       uint64_t* seen, uint32_t* next, uint32_t n,
                                                       cudaStream_t stream) {
  cudaGraphConditionalHandle handle{};
  void* args[] = {&doorbell, &seen, &next, &n, &handle};
  auto loop = daqiri::GpuGraphLoop::create(daqiri::bench::loop_waiter_function(host_memory),
                                           dim3(1), dim3(1), args, &handle);
  if (!loop || !loop->launch(stream)) {
    std::fprintf(stderr, "graph loop: %s\n", loop ? "launch failed" : loop.error().message.c_str());
    return std::nullopt;
  }
  return std::move(*loop);
}

int latency(const std::string& style, uint32_t n, double gap_us) {
  auto api = daqiri::cuda::DriverApi::get();
  if (!api) {
    std::fprintf(stderr, "driver: %s\n", api.error().message.c_str());
    return 1;
  }
  if (!cuda_ok(cudaSetDevice(0), "cudaSetDevice")) return 1;
  DeviceMemory<uint32_t> doorbell;
  DeviceMemory<uint64_t> stamps_memory, seen_memory;
  Stream producer, consumer;
  Event done;
  if (!cuda_ok(device_alloc(doorbell, sizeof(uint32_t)), "cudaMalloc") ||
      !cuda_ok(device_alloc(stamps_memory, n * sizeof(uint64_t)), "cudaMalloc") ||
      !cuda_ok(device_alloc(seen_memory, n * sizeof(uint64_t)), "cudaMalloc") ||
      !cuda_ok(cudaMemset(doorbell.get(), 0, sizeof(uint32_t)), "cudaMemset") ||
      !cuda_ok(cudaMemset(stamps_memory.get(), 0, n * sizeof(uint64_t)), "cudaMemset") ||
      !cuda_ok(cudaMemset(seen_memory.get(), 0, n * sizeof(uint64_t)), "cudaMemset") ||
      !cuda_ok(make_stream(producer), "stream") || !cuda_ok(make_stream(consumer), "stream") ||
      !cuda_ok(make_event(done), "event") || !cuda_ok(cudaDeviceSynchronize(), "setup")) {
    return 1;
  }
  uint64_t* const stamps = stamps_memory.get();
  uint64_t* const seen = seen_memory.get();
  const auto db = reinterpret_cast<CUdeviceptr>(doorbell.get());

  std::atomic<uint32_t> mirror{0};  // the host's view of the doorbell (kernel style)
  auto produce = [&](uint32_t from, uint32_t to) {
    spin_for(10000);  // let the consumer settle into its wait
    for (uint32_t i = from; i < to; ++i) {
      spin_for(gap_us);
      daqiri::bench::launch_stamp(stamps, i, producer.get());
      (*api)->stream_write_value32(producer.get(), db, i + 1, 0);
      cudaEventRecord(done.get(), producer.get());
      while (cudaEventQuery(done.get()) == cudaErrorNotReady) {
      }
      mirror.store(i + 1, std::memory_order_release);  // what the daemon's host mirror does
    }
  };
  if (style == "persistent") {
    if (!cuda_ok(
            daqiri::bench::launch_persistent_waiter(doorbell.get(), false, seen, n, consumer.get()),
            "launch")) {
      return 1;
    }
    produce(0, n);
  } else if (style == "graph") {
    // Graphs of 100 stages (a long chain instantiates slowly), each built before its doorbells.
    constexpr uint32_t kStages = 100;
    for (uint32_t first = 0; first < n; first += kStages) {
      uint32_t m = std::min(kStages, n - first);
      GraphExec exec;
      // Earlier graphs have finished (synchronised below): nothing waits on the doorbell.
      if (!launch_graph_waiter(**api, db, seen, first, m, consumer.get(), exec)) return 1;
      produce(first, first + m);
      if (!cuda_ok(cudaStreamSynchronize(consumer.get()), "consumer")) return 1;
    }
  } else if (style == "graph-loop") {
    DeviceMemory<uint32_t> next;
    if (!cuda_ok(device_alloc(next, sizeof(uint32_t)), "cudaMalloc") ||
        !cuda_ok(cudaMemset(next.get(), 0, sizeof(uint32_t)), "cudaMemset")) {
      return 1;
    }
    auto loop = launch_loop_waiter(doorbell.get(), false, seen, next.get(), n, consumer.get());
    if (!loop) return 1;
    produce(0, n);
    if (!cuda_ok(cudaStreamSynchronize(consumer.get()), "consumer")) return 1;
  } else if (style == "kernel") {
    std::thread host_consumer([&] {
      for (uint32_t i = 0; i < n; ++i) {
        while (mirror.load(std::memory_order_acquire) < i + 1) {
        }
        daqiri::bench::launch_stamp(seen, i, consumer.get());
      }
    });
    produce(0, n);
    host_consumer.join();
  } else {
    std::fprintf(stderr, "style: kernel, persistent, graph or graph-loop\n");
    return 2;
  }
  if (!cuda_ok(cudaStreamSynchronize(consumer.get()), "consumer")) return 1;
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

// The clock of daqirid's receive timestamps (CLOCK_REALTIME).
uint64_t realtime_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// The global timer less CLOCK_REALTIME, from the round (of many) whose host readings around
// the GPU's stamp were closest together; `error_ns` is half that window.
struct TimerOffset {
  int64_t offset_ns = 0;
  int64_t error_ns = 0;
};

std::optional<TimerOffset> calibrate_timer() {
  constexpr uint32_t kRounds = 500;
  PinnedMemory<uint32_t> flag_host;
  PinnedMemory<uint64_t> stamps_host;
  Stream stream;
  if (!cuda_ok(pinned_alloc(flag_host, sizeof(uint32_t), cudaHostAllocMapped), "flag") ||
      !cuda_ok(pinned_alloc(stamps_host, sizeof(uint64_t) * (kRounds + 1), cudaHostAllocMapped),
               "stamps") ||
      !cuda_ok(make_stream(stream), "stream")) {
    return std::nullopt;
  }
  volatile uint32_t* flag = flag_host.get();
  volatile uint64_t* stamps = stamps_host.get();
  *flag = 0;
  for (uint32_t k = 0; k <= kRounds; ++k)
    stamps[k] = 0;
  void* flag_device = nullptr;
  void* stamps_device = nullptr;
  cudaHostGetDevicePointer(&flag_device, flag_host.get(), 0);
  cudaHostGetDevicePointer(&stamps_device, stamps_host.get(), 0);
  if (!cuda_ok(daqiri::bench::launch_timer_echo(static_cast<volatile uint32_t*>(flag_device),
                                                static_cast<volatile uint64_t*>(stamps_device),
                                                kRounds, stream.get()),
               "timer echo")) {
    return std::nullopt;
  }
  TimerOffset best{0, INT64_MAX};
  for (uint32_t k = 1; k <= kRounds; ++k) {
    uint64_t before = realtime_ns();
    *flag = k;
    while (stamps[k] == 0) {
    }
    uint64_t after = realtime_ns();
    auto half = static_cast<int64_t>(after - before) / 2;
    if (half < best.error_ns) {
      best.error_ns = half;
      best.offset_ns = static_cast<int64_t>(stamps[k]) - static_cast<int64_t>(before + half);
    }
  }
  if (!cuda_ok(cudaStreamSynchronize(stream.get()), "timer echo")) return std::nullopt;
  return best;
}

// The e2e figures from the consumer's stamps (GPU timer) and the descriptors' receive times
// (CLOCK_REALTIME), related by the calibration before (`offset`, at `calibrated_at`) and one
// now.
int report_e2e(const std::string& style, const std::vector<uint64_t>& at,
               const std::vector<daqiri_rx_desc>& descs, const TimerOffset& offset,
               uint64_t calibrated_at) {
  // The two clocks drift apart by some ppm (seconds here are tens of microseconds): calibrate
  // again and interpolate the offset for each receive time.
  auto offset_after = calibrate_timer();
  if (!offset_after) return 1;
  uint64_t recalibrated_at = realtime_ns();
  double slope = static_cast<double>(offset_after->offset_ns - offset.offset_ns) /
                 static_cast<double>(recalibrated_at - calibrated_at);
  const size_t n = at.size();
  std::vector<double> us(n);
  for (size_t i = 0; i < n; ++i) {
    double since = static_cast<double>(static_cast<int64_t>(descs[i].timestamp_ns - calibrated_at));
    double received = static_cast<double>(descs[i].timestamp_ns) +
                      static_cast<double>(offset.offset_ns) + slope * since;
    us[i] = (static_cast<double>(at[i]) - received) / 1e3;
  }
  std::sort(us.begin(), us.end());
  std::printf("e2e %s samples %zu p50 %.2f p99 %.2f max %.2f clock_error %.2f drift_ppm %.1f\n",
              style.c_str(), n, us[n / 2], us[static_cast<size_t>(static_cast<double>(n) * 0.99)],
              us.back(),
              static_cast<double>(std::max(offset.error_ns, offset_after->error_ns)) / 1e3,
              slope * 1e6);
  return 0;
}

// What an e2e run stamps into: the clocks related (before), a stamp per packet in GPU memory,
// and the consumer's stream.
struct E2eRun {
  TimerOffset offset;
  uint64_t calibrated_at = 0;
  DeviceMemory<uint64_t> seen;
  Stream stream;
};

std::optional<E2eRun> prepare_e2e(uint32_t n) {
  auto offset = calibrate_timer();
  if (!offset) return std::nullopt;
  std::optional<E2eRun> run(std::in_place);
  run->offset = *offset;
  run->calibrated_at = realtime_ns();
  if (!cuda_ok(device_alloc(run->seen, n * sizeof(uint64_t)), "cudaMalloc") ||
      !cuda_ok(cudaMemset(run->seen.get(), 0, n * sizeof(uint64_t)), "cudaMemset") ||
      !cuda_ok(make_stream(run->stream), "stream")) {
    return std::nullopt;
  }
  return run;
}

// How long a host thread took to build and launch each graph of stages: a feed slower than the
// stages it queues is a consumer that falls behind.
struct FeedTimes {
  uint32_t launches = 0;
  double total_ms = 0;
  double longest_ms = 0;
  void add(std::chrono::steady_clock::duration d) {
    const double ms = std::chrono::duration<double, std::milli>(d).count();
    ++launches;
    total_ms += ms;
    longest_ms = std::max(longest_ms, ms);
  }
};

// Where an e2e consumer learns of packets: a GPU ring's doorbell (GPU memory, written by the
// daemon's engine) or a mapped host ring's producer index (host memory, written by the
// daemon's poller). The attachment it came from is kept alive with it.
struct E2eSource {
  std::optional<daqiri::example::GpuAttachment> gpu;
  std::optional<daqiri::example::MappedAttachment> mapped;
  daqiri::RxStream::Memory host;       // mapped: the host ring as this process sees it
  const uint32_t* doorbell = nullptr;  // the device address the GPU polls
  uint32_t mask = 0;
  int device = 0;

  [[nodiscard]] bool host_memory() const { return mapped.has_value(); }
  // The host's view of the producer index.
  [[nodiscard]] uint32_t producer() const {
    return gpu ? gpu->ring->producer() : __atomic_load_n(&host.ring->producer, __ATOMIC_ACQUIRE);
  }
  // Sleeps on the attachment's eventfd until the producer moves past `seen` (or 100 ms).
  [[nodiscard]] std::optional<uint32_t> wait(uint32_t seen) const {
    if (gpu) {
      auto p = gpu->ring->wait(seen, std::chrono::milliseconds(100));
      return p ? std::optional(*p) : std::nullopt;
    }
    auto b = mapped->stream->wait_burst(std::chrono::milliseconds(100));  // read, not released
    return b ? std::optional(producer()) : std::nullopt;
  }
  // Descriptors [0, n): the receive stamps.
  [[nodiscard]] bool descriptors(std::vector<daqiri_rx_desc>& out) const {
    if (gpu) {
      return cuda_ok(cudaMemcpy(out.data(), gpu->ring->view().descs,
                                out.size() * sizeof(daqiri_rx_desc), cudaMemcpyDeviceToHost),
                     "copy");
    }
    auto* descs = reinterpret_cast<const daqiri_rx_desc*>(host.view.slots);
    std::copy(descs, descs + out.size(), out.begin());
    return true;
  }
};

// `mapped-STYLE` attaches a host ring of FLOW mapped for the GPU (daqiri::MappedRxRing), any
// other STYLE a GPU ring.
std::optional<E2eSource> e2e_source(const std::string& style, const std::string& socket,
                                    const std::string& flow) {
  daqiri::RxOptions ro;
  ro.flow = flow;
  E2eSource src;
  if (style.starts_with("mapped")) {
    src.mapped = daqiri::example::attach_mapped_ring(socket, "gpu-bench", ro);
    if (!src.mapped) return std::nullopt;
    src.host = src.mapped->stream->memory();
    src.doorbell = src.mapped->ring->view().producer;
    src.mask = src.mapped->ring->view().mask;
  } else {
    src.gpu = daqiri::example::attach_gpu_ring(socket, "gpu-bench", ro);
    if (!src.gpu) return std::nullopt;
    src.doorbell = src.gpu->ring->view().doorbell;
    src.mask = src.gpu->ring->view().mask;
    src.device = src.gpu->ring->device();
  }
  return src;
}

int e2e(const std::string& style, const std::string& socket, const std::string& flow, uint32_t n) {
  auto api = daqiri::cuda::DriverApi::get();
  if (!api) {
    std::fprintf(stderr, "driver: %s\n", api.error().message.c_str());
    return 1;
  }
  auto src = e2e_source(style, socket, flow);
  if (!src) return 1;
  const std::string consumer = style == "mapped"              ? "persistent"
                               : style.starts_with("mapped-") ? style.substr(7)
                                                              : style;
  if (n == 0 || n > src->mask) {
    std::fprintf(stderr, "PACKETS must be 1 to %u (the ring's slots less one)\n", src->mask);
    return 2;
  }
  if (!cuda_ok(cudaSetDevice(src->device), "cudaSetDevice")) return 1;
  auto run = prepare_e2e(n);
  if (!run) return 1;
  uint64_t* const seen = run->seen.get();
  Stream& stream = run->stream;
  uint32_t start = src->producer();  // anything that arrived before the waiters is not measured
  if (start != 0) {
    std::fprintf(stderr, "the ring already holds %u packets: send after \"ready\"\n", start);
    return 1;
  }
  const bool host = src->host_memory();
  const auto db = reinterpret_cast<CUdeviceptr>(src->doorbell);
  std::vector<GraphExec> graphs;
  std::optional<daqiri::GpuGraphLoop> loop;
  DeviceMemory<uint32_t> next;
  std::thread host_consumer;
  std::atomic<bool> stop{false};
  Stream relay_stream;
  FeedTimes feed;  // mapped-graph: launching each graph and its relay steps
  // Stages a graph holds (GPU_BENCH_GRAPH_STAGES; even, for the relay's two phases).
  uint32_t graph_stages = 100;
  if (const char* env = std::getenv("GPU_BENCH_GRAPH_STAGES"); env != nullptr) {
    graph_stages = std::max<uint32_t>(2, std::strtoul(env, nullptr, 10)) & ~1u;
  }
  GraphExec relay_waiter;
  if (consumer == "graph" && host) {
    // The graph and as many relay steps, two launches queued at a time, until the relay has
    // released all n packets (or the run is stopped).
    if (!cuda_ok(make_stream(relay_stream), "stream") ||
        !build_relay_waiter(**api, src->mapped->ring->relay_view(), seen, n, graph_stages,
                            relay_waiter)) {
      return 1;
    }
    auto launch_next = [&] {
      const auto began = Clock::now();
      Event done;
      auto relayed = src->mapped->ring->launch_relay(relay_stream.get(), graph_stages);
      if (!relayed) std::fprintf(stderr, "relay: %s\n", relayed.error().message.c_str());
      if (!cuda_ok(cudaGraphLaunch(relay_waiter.get(), stream.get()), "cudaGraphLaunch") ||
          !relayed || !cuda_ok(make_event(done), "event") ||
          !cuda_ok(cudaEventRecord(done.get(), stream.get()), "cudaEventRecord")) {
        std::fflush(stderr);
        std::_Exit(1);  // the graphs launched before wait for good
      }
      feed.add(Clock::now() - began);
      return done;
    };
    auto pending = std::make_shared<std::deque<Event>>();
    pending->push_back(launch_next());
    const daqiri_ring_header* ring = src->host.ring;
    host_consumer = std::thread([&, pending, launch_next, ring]() mutable {
      cudaSetDevice(src->device);  // this thread's current context, which the graphs are built in
      const auto until = Clock::now() + std::chrono::seconds(70);
      while (__atomic_load_n(&ring->consumer, __ATOMIC_ACQUIRE) < n &&
             !stop.load(std::memory_order_relaxed) && Clock::now() < until) {
        while (!pending->empty() && cudaEventQuery(pending->front().get()) == cudaSuccess)
          pending->pop_front();
        if (pending->size() < 2) pending->push_back(launch_next());
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    });
  } else if (consumer == "persistent") {
    if (!cuda_ok(launch_persistent_waiter(src->doorbell, host, seen, n, stream.get()), "launch")) {
      return 1;
    }
  } else if (consumer == "graph" || (consumer == "graph-host" && host)) {
    for (uint32_t first = 0; first < n; first += graph_stages) {
      GraphExec exec;
      if (!launch_graph_waiter(**api, db, seen, first, std::min(graph_stages, n - first),
                               stream.get(), exec)) {
        // The graphs launched before wait on the doorbell for good: the frees' implicit
        // synchronisation would wait with them.
        std::fflush(stderr);
        std::_Exit(1);
      }
      graphs.push_back(std::move(exec));
    }
  } else if (consumer == "graph-loop") {
    if (!cuda_ok(device_alloc(next, sizeof(uint32_t)), "cudaMalloc") ||
        !cuda_ok(cudaMemset(next.get(), 0, sizeof(uint32_t)), "cudaMemset")) {
      return 1;
    }
    auto launched = launch_loop_waiter(src->doorbell, host, seen, next.get(), n, stream.get());
    if (!launched) return 1;
    loop.emplace(std::move(*launched));
  } else if (consumer == "kernel") {
    host_consumer = std::thread([&] {
      uint32_t got = 0;
      while (got < n && !stop.load(std::memory_order_relaxed)) {
        auto p = src->wait(got);
        if (!p || *p == got) continue;
        uint32_t upto = std::min(*p, n);
        daqiri::bench::launch_stamp_range(seen, got, upto - got, stream.get());
        got = upto;
      }
    });
  } else {
    std::fprintf(stderr,
                 "style: [mapped-]kernel, persistent, graph or graph-loop, mapped-graph-host, "
                 "or mapped\n");
    return 2;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (src->producer() < n && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // The kernel style's thread ends at n; the relay's feeder once every packet was released.
  if (src->producer() < n || consumer == "kernel") stop = true;
  if (host_consumer.joinable()) host_consumer.join();
  if (feed.launches != 0) {
    std::printf("graph feed: %u launches, mean %.2f ms, longest %.2f ms\n", feed.launches,
                feed.total_ms / feed.launches, feed.longest_ms);
  }
  if (src->mapped) {
    // The graph stages beyond the last batch run empty once the relay stops.
    if (auto ok = src->mapped->ring->stop_relay(); !ok) {
      std::fprintf(stderr, "relay: %s\n", ok.error().message.c_str());
      return 1;
    }
  }
  if (src->producer() < n) {
    std::fprintf(stderr, "only %u of %u packets arrived\n", src->producer(), n);
    std::fflush(stderr);
    std::_Exit(1);  // a waiter kernel may spin forever
  }
  if (!cuda_ok(cudaStreamSynchronize(stream.get()), "consumer")) return 1;
  std::vector<uint64_t> at(n);
  std::vector<daqiri_rx_desc> descs(n);
  if (!cuda_ok(cudaMemcpy(at.data(), seen, n * sizeof(uint64_t), cudaMemcpyDeviceToHost), "copy") ||
      !src->descriptors(descs)) {
    return 1;
  }
  return report_e2e(style, at, descs, run->offset, run->calibrated_at);
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ring" && (argc == 6 || (argc == 7 && std::string(argv[6]) == "block"))) {
    return ring(argv[2], argv[3], std::strtod(argv[4], nullptr), std::strtod(argv[5], nullptr),
                argc == 7);
  }
  if (mode == "latency" && argc == 5) {
    // A kernel loaded lazily while the persistent waiter spins would wait for it: load all now.
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    return latency(argv[2], static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10)),
                   std::strtod(argv[4], nullptr));
  }
  if (mode == "e2e" && argc == 6) {
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    return e2e(argv[2], argv[3], argv[4],
               static_cast<uint32_t>(std::strtoul(argv[5], nullptr, 10)));
  }
  if ((mode == "memcpy" || mode == "memcpy-d2d") && argc == 5) {
    CopyShape chunk{1, std::strtoull(argv[3], nullptr, 10), 0, 1};
    return memcpy_peer(std::strtoull(argv[2], nullptr, 10), chunk, std::strtod(argv[4], nullptr),
                       mode == "memcpy-d2d");
  }
  if (mode == "memcpy-rows" && argc == 8) {
    CopyShape shape{std::strtoull(argv[3], nullptr, 10), std::strtoull(argv[4], nullptr, 10),
                    std::strtoull(argv[5], nullptr, 10),
                    static_cast<int>(std::strtol(argv[7], nullptr, 10))};
    return memcpy_peer(std::strtoull(argv[2], nullptr, 10), shape, std::strtod(argv[6], nullptr),
                       false);
  }
  std::fprintf(
      stderr,
      "usage: gpu-bench ring SOCKET FLOW SECONDS FRAME_BYTES [block]\n"
      "       gpu-bench latency kernel|persistent|graph|graph-loop SAMPLES GAP_US\n"
      "       gpu-bench e2e [mapped-]kernel|persistent|graph|graph-loop|mapped SOCKET FLOW "
      "PACKETS\n"
      "       gpu-bench memcpy|memcpy-d2d BYTES CHUNK SECONDS\n"
      "       gpu-bench memcpy-rows BYTES ROWS WIDTH PITCH SECONDS STREAMS\n");
  return 2;
}
