// gpu-inproc: the in-process peer of daqiri-gpu-receive's consumer styles. The daemon's own GPU
// engine (GpuRxTask) fills a GPU ring in this process, and the same check kernels as
// daqiri-gpu-receive's take packets off it: the figures through the daemon divided by these are
// what the process boundary costs. One thread stands in for the RX poller (1024-byte frames in a
// pinned pool, BURST at a time, as net_null hands the daemon), one for the GPU poller; the
// consumer runs on the main thread.
//   gpu-inproc kernel|persistent|graph|graph-loop BURST COUNT [BLOCKS]
// Prints "inproc STYLE burst B packets N seconds S Mpps M". Kernel per burst: the host spins on
// the producer index in host memory, launches the check over the new packets, synchronises and
// releases. Persistent: BLOCKS blocks of 1024 threads (gpu_ring_consume). Graph: 8 stages of
// BURST packets, re-posted. Graph loop: one launch, a WHILE node running a BURST-packet check.
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "burst_graph.hpp"
#include "burst_loop.hpp"
#include "cuda_owned.hpp"
#include "dataplane/rx_attachment.hpp"
#include "gpu/gpu_rx_task.hpp"
#include "gpu/host_registration.hpp"
#include "memory/buffer_pool.hpp"
#include "pattern_check.hpp"

namespace {

using namespace daqiri;
using Clock = std::chrono::steady_clock;
using bench::cuda_ok;

constexpr uint32_t kFrame = 1024;
constexpr uint32_t kBufSize = 1792;  // what run-gpu gives net_null's 1024-byte frames
constexpr uint32_t kBufs = 16384;
constexpr uint32_t kSlots = 4096;
constexpr uint32_t kStages = 8;
constexpr uint32_t kThreads = 1024;

// The RX poller's part: frames into the attachment, BURST at a time, as long as there is room,
// buffers taken back as the engine lets them go.
void feed(dataplane::RxAttachment& att, memory::BufferPool& pool, uint32_t burst,
          const std::atomic<bool>& stop) {
  std::vector<uint32_t> bufs(burst);
  while (!stop.load(std::memory_order_relaxed)) {
    att.reclaim();
    uint32_t n = std::min(burst, att.free_slots());
    if (n == 0) continue;
    n = pool.alloc(bufs.data(), n);
    for (uint32_t i = 0; i < n; ++i) {
      daqiri_rx_desc d{};
      d.offset = pool.offset(bufs[i]);
      d.length = kFrame;
      d.flow_id = 1;
      d.payload_offset = 42;
      att.push(d, bufs[i], &pool);
    }
    if (n != 0) att.publish();
  }
}

uint64_t consume_kernel_per_burst(const abi::RingView& control, const GpuRingView& view,
                                  uint64_t count, example::Totals* totals, cudaStream_t stream) {
  uint32_t seen = 0;
  uint64_t taken = 0;
  while (taken < count) {
    uint32_t p = control.load_producer();
    if (p == seen) continue;
    if (static_cast<uint64_t>(p - seen) > count - taken)
      p = seen + static_cast<uint32_t>(count - taken);
    if (!cuda_ok(example::launch_check(view, seen, p - seen, totals, stream), "check") ||
        !cuda_ok(cudaStreamSynchronize(stream), "check")) {
      break;
    }
    control.publish_consumer(p);
    taken += p - seen;
    seen = p;
  }
  return taken;
}

uint64_t consume_persistent(const GpuRingView& view, uint64_t count, uint32_t blocks,
                            example::Totals* totals, cudaStream_t stream) {
  bench::PinnedMemory<uint32_t> stop;
  bench::DeviceMemory<uint32_t> done;
  if (!cuda_ok(bench::pinned_alloc(stop, sizeof(uint32_t), cudaHostAllocMapped), "stop") ||
      !cuda_ok(bench::device_alloc(done, sizeof(uint32_t) * blocks), "done") ||
      !cuda_ok(cudaMemset(done.get(), 0, sizeof(uint32_t) * blocks), "done")) {
    return 0;
  }
  *stop = 0;
  uint32_t* stop_device = nullptr;
  cudaHostGetDevicePointer(reinterpret_cast<void**>(&stop_device), stop.get(), 0);
  if (!cuda_ok(example::launch_persistent(view, 0, static_cast<uint32_t>(count), blocks, kThreads,
                                          done.get(), totals, stop_device, stream),
               "persistent") ||
      !cuda_ok(cudaStreamSynchronize(stream), "persistent")) {
    return 0;
  }
  return totals->intact + totals->corrupt;
}

uint64_t consume_graph(const GpuRingView& view, uint32_t burst, uint64_t count,
                       example::Totals* totals, cudaStream_t stream) {
  auto api = cuda::DriverApi::get();
  if (!api) return 0;
  auto graph = example::BurstGraph::create(**api, view, burst, kStages, totals);
  if (!graph) {
    std::fprintf(stderr, "graph: %s\n", graph.error().message.c_str());
    return 0;
  }
  uint64_t posted = 0;
  while (posted < count) {
    if (!graph->post(static_cast<uint32_t>(posted), stream)) return posted;
    posted += graph->per_post();
    if (!cuda_ok(cudaStreamSynchronize(stream), "graph")) return posted;
  }
  return posted;
}

uint64_t consume_graph_loop(const GpuRingView& view, uint32_t burst, uint64_t count,
                            example::Totals* totals, cudaStream_t stream) {
  auto loop = example::BurstLoop::create(view, burst, 0, static_cast<uint32_t>(count), totals);
  if (!loop) {
    std::fprintf(stderr, "graph loop: %s\n", loop.error().message.c_str());
    return 0;
  }
  if (!loop->launch(stream) || !cuda_ok(cudaStreamSynchronize(stream), "graph loop")) return 0;
  return totals->intact + totals->corrupt;
}

int run(const std::string& style, uint32_t burst, uint64_t count, uint32_t blocks) {
  auto gpu = gpu::GpuDevice::open(0);
  if (!gpu) {
    std::fprintf(stderr, "gpu: %s\n", gpu.error().message.c_str());
    return 1;
  }
  if (!(*gpu)->make_current()) return 1;
  auto pool = memory::BufferPool::create("gpu-inproc", kBufSize, kBufs, false);
  if (!pool) return 1;
  auto reg = gpu::HostRegistration::create(pool->data(), pool->mapped_bytes());
  if (!reg) {
    std::fprintf(stderr, "register: %s\n", reg.error().message.c_str());
    return 1;
  }
  auto att =
      dataplane::RxAttachment::create(1, kSlots, dataplane::Backpressure::kDropNew, {&*pool});
  if (!att) return 1;
  auto task = gpu::GpuRxTask::create(**gpu, **att, {reg->device_address()}, kSlots, kBufSize);
  if (!task) {
    std::fprintf(stderr, "engine: %s\n", task.error().message.c_str());
    return 1;
  }
  // The consumer index, stored by kernels: the control block mapped for the GPU, as
  // libdaqiri_gpu maps a client's.
  memory::SharedMemory& control = (*task)->control();
  bench::HostRegistration control_reg;
  if (!cuda_ok(bench::register_host(control_reg, control.data(), control.size(),
                                    cudaHostRegisterMapped | cudaHostRegisterPortable),
               "register the control block")) {
    return 1;
  }
  std::byte* control_device = nullptr;
  cudaHostGetDevicePointer(reinterpret_cast<void**>(&control_device), control.data(), 0);
  const gpu::DeviceRing& ring = (*task)->ring();
  GpuRingView view{
      ring.base(),
      reinterpret_cast<const uint32_t*>(ring.doorbell()),  // NOLINT(performance-no-int-to-ptr)
      ring.descs(),
      reinterpret_cast<uint32_t*>(control_device + offsetof(daqiri_ring_header, consumer)),
      ring.info().size - 1,
      ring.info().slot_size};

  bench::Stream stream;
  example::Totals* totals = nullptr;
  if (!cuda_ok(bench::make_stream(stream), "stream") ||
      !cuda_ok(cudaMallocManaged(reinterpret_cast<void**>(&totals), sizeof *totals), "totals")) {
    return 1;
  }
  *totals = {};
  std::atomic<bool> stop{false};
  std::thread rx([&] { feed(**att, *pool, burst, stop); });
  std::thread engine([&] {
    while (!stop.load(std::memory_order_relaxed))
      (*task)->poll();
  });
  auto start = Clock::now();
  uint64_t taken =
      style == "persistent" ? consume_persistent(view, count, blocks, totals, stream.get())
      : style == "graph"    ? consume_graph(view, burst, count, totals, stream.get())
      : style == "graph-loop"
          ? consume_graph_loop(view, burst, count, totals, stream.get())
          : consume_kernel_per_burst((*task)->control_ring(), view, count, totals, stream.get());
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  rx.join();
  engine.join();
  cudaFree(totals);
  std::printf("inproc %s burst %u packets %llu seconds %.3f Mpps %.2f\n", style.c_str(), burst,
              static_cast<unsigned long long>(taken), seconds, taken / seconds / 1e6);
  return taken == count ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string style = argc > 1 ? argv[1] : "";
  if ((style == "kernel" || style == "persistent" || style == "graph" || style == "graph-loop") &&
      argc >= 4) {
    auto burst = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10));
    uint64_t count = std::strtoull(argv[3], nullptr, 10);
    auto blocks = argc > 4 ? static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 10)) : 1;
    if (burst != 0 && burst <= 1024 && count != 0 && count % (uint64_t{burst} * kStages) == 0 &&
        blocks != 0) {
      return run(style, burst, count, blocks);
    }
  }
  std::fprintf(stderr,
               "usage: gpu-inproc kernel|persistent|graph|graph-loop BURST COUNT [BLOCKS]\n"
               "  (COUNT a multiple of BURST x %u)\n",
               kStages);
  return 2;
}
