// daqiri-gpu-receive: a flow's packets straight into GPU memory, checked on the GPU in one of
// the three consumer styles:
//   kernel      the host waits (eventfd), launches a kernel per burst, releases after it
//   persistent  a grid of --blocks blocks runs for the whole stream, polls the doorbell and
//               releases from the GPU (daqiri/gpu_ring_consumer.cuh)
//   graph       a CUDA graph of (cuStreamWaitValue32, kernel, cuStreamWriteValue32) stages,
//               re-posted; --count must be a multiple of --burst x --stages
//   graph-loop  one CUDA graph launch for the whole stream: a WHILE node runs the check kernel
//               once per --burst packets, waiting, checking and releasing on the GPU;
//               --count must be a multiple of --burst
//   mapped      a host ring (host, huge or pinned region) read where it is by a persistent
//               grid, as `persistent` does a GPU ring: the daemon does no GPU work for it
//   mapped-graph  the same ring, read by a CUDA graph of --stages stages (even; re-posted) that
//               take the ring's relay's batches (MappedRxRing::launch_relay), each checked by
//               --blocks blocks: a batch is every packet that arrived during the stage before
//   hds         header-data split queues: each frame put back together on the host from its
//               header slot and its GPU part, then checked (proves the halves line up)
// It verifies daqiri-gen's payload pattern and prints what it saw:
//   daqiri-gpu-receive --socket /run/daqiri/daqiri.sock --flow stream0 --count 1000
//   attached: ring 7 on GPU 0, 1024 slots of 2048 bytes
//   received 1000 packets: 1000 intact, 0 corrupt, payload bytes 1000000, byte sum ..., sequence
//   sum ...
// With --cuda-ipc yes the ring is opened from a legacy cudaIpcMemHandle_t (cudaMalloc'd by the
// daemon) instead of a CUDA VMM fd.
// With --reconnect yes (kernel style), a daemon restart is survived: the client reconnects and
// the ring is attached again (GpuRxRing::reattach), counting on.
// Exit status 0 when --count packets arrived and every one was intact.
#include <cuda_runtime_api.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <thread>

#include "burst_graph.hpp"
#include "burst_loop.hpp"
#include "daqiri/gpu_rx_ring.hpp"
#include "daqiri/mapped_rx_ring.hpp"
#include "daqiri/test_pattern.hpp"
#include "gpu_attach.hpp"
#include "pattern_check.hpp"

using daqiri::example::Totals;

namespace {

struct Run {
  daqiri::GpuRxRing& ring;
  Totals* totals;
  cudaStream_t stream;
  uint64_t count;
  std::chrono::steady_clock::time_point deadline;
  daqiri::Client* reconnect = nullptr;  // --reconnect: outlive a daemon restart
};

// The daemon went away: reconnects (retrying until the deadline) and attaches a new ring.
bool reattach(Run& r) {
  while (std::chrono::steady_clock::now() < r.deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!r.reconnect->reconnect()) continue;
    if (auto ok = r.ring.reattach(); !ok) {
      std::fprintf(stderr, "reattach: %s\n", ok.error().message.c_str());
      continue;
    }
    std::printf("reattached: ring %llu\n", static_cast<unsigned long long>(r.ring.id()));
    std::fflush(stdout);
    return true;
  }
  return false;
}

// Waits for `stream` until the deadline; false if the work is still running then.
bool wait_stream(cudaStream_t stream, std::chrono::steady_clock::time_point deadline) {
  while (cudaStreamQuery(stream) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// Kernel per burst: packets received.
uint64_t run_kernel_per_burst(Run& r) {
  uint32_t seen = 0;
  uint64_t received = 0;
  while (received < r.count && std::chrono::steady_clock::now() < r.deadline) {
    auto p = r.ring.wait(seen, std::chrono::milliseconds(100));
    if (!p && r.reconnect != nullptr && reattach(r)) {
      seen = 0;  // a new ring counts from 0
      continue;
    }
    if (!p) {
      std::fprintf(stderr, "wait: %s\n", p.error().message.c_str());
      break;
    }
    uint32_t n = *p - seen;
    if (n == 0) continue;
    cudaError_t e = daqiri::example::launch_check(r.ring.view(), seen, n, r.totals, r.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(r.stream);
    if (e != cudaSuccess) {
      std::fprintf(stderr, "kernel: %s\n", cudaGetErrorString(e));
      std::exit(1);
    }
    r.ring.release(*p);
    seen = *p;
    received += n;
  }
  return received;
}

// Header-data split, checked on the host: each frame put back together from its header slot
// (host memory) and the rest of it in the GPU slot, then daqiri-gen's pattern checked and
// counted as the kernels count it. Proves the two halves line up, index for index.
uint64_t run_split(Run& r) {
  const daqiri_gpu_ring_info& info = r.ring.info();
  uint32_t head_size = r.ring.header_size();
  if (head_size == 0) {
    std::fprintf(stderr, "--style hds: the flow's queue has no header region\n");
    std::exit(2);
  }
  daqiri::GpuRingView view = r.ring.view();
  std::vector<std::byte> frame(uint64_t{head_size} + info.slot_size);
  uint32_t seen = 0;
  uint64_t received = 0;
  while (received < r.count && std::chrono::steady_clock::now() < r.deadline) {
    auto p = r.ring.wait(seen, std::chrono::milliseconds(100));
    if (!p) {
      std::fprintf(stderr, "wait: %s\n", p.error().message.c_str());
      break;
    }
    for (; seen != *p; ++seen, ++received) {
      daqiri_rx_desc d{};
      cudaMemcpy(&d, view.descs + (seen & view.mask), sizeof d, cudaMemcpyDeviceToHost);
      uint32_t head = std::min(d.length, head_size);
      bool split = (d.flags & DAQIRI_DESC_SPLIT) != 0;
      std::memcpy(frame.data(), r.ring.header(seen).data(), head);
      if (d.length > head) {
        cudaMemcpy(frame.data() + head, view.base + d.offset, d.length - head,
                   cudaMemcpyDeviceToHost);
      }
      uint16_t at = daqiri_rx_payload_offset(&d, reinterpret_cast<const uint8_t*>(frame.data()));
      std::span<const std::byte> payload(frame.data() + at, at <= d.length ? d.length - at : 0);
      daqiri::pattern::Header h{};
      bool ok = split && daqiri::pattern::check(payload, h) == daqiri::pattern::Check::kOk;
      ++(ok ? r.totals->intact : r.totals->corrupt);
      r.totals->payload_bytes += payload.size();
      for (std::byte b : payload)
        r.totals->byte_sum += static_cast<uint8_t>(b);
      if (ok) r.totals->sequence_sum += h.sequence;
    }
    r.ring.release(*p);
  }
  return received;
}

// Persistent kernel over `view` (a GPU ring or a mapped host ring): it runs until `count`
// packets were checked (or the timeout, when the host raises the stop flag); the host only
// waits.
template <typename View>
uint64_t run_persistent(const View& view, Totals* totals, cudaStream_t stream, uint64_t count,
                        std::chrono::steady_clock::time_point deadline, uint32_t blocks,
                        uint32_t threads) {
  uint32_t* stop = nullptr;  // mapped host memory: the host writes, the kernel polls
  cudaHostAlloc(reinterpret_cast<void**>(&stop), sizeof(uint32_t), cudaHostAllocMapped);
  *stop = 0;
  uint32_t* stop_dev = nullptr;
  cudaHostGetDevicePointer(reinterpret_cast<void**>(&stop_dev), stop, 0);
  uint32_t* done = nullptr;  // each block's progress: counter 0 to start with
  cudaMalloc(reinterpret_cast<void**>(&done), sizeof(uint32_t) * blocks);
  cudaMemset(done, 0, sizeof(uint32_t) * blocks);
  cudaError_t e = daqiri::example::launch_persistent(view, 0, static_cast<uint32_t>(count), blocks,
                                                     threads, done, totals, stop_dev, stream);
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kernel: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
  if (!wait_stream(stream, deadline)) {
    __atomic_store_n(stop, 1u, __ATOMIC_RELEASE);
  }
  e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kernel: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
  cudaFreeHost(stop);
  cudaFree(done);
  return totals->intact + totals->corrupt;  // the kernel released every range it checked
}

// CUDA graph: re-posted until `count` packets; the host only re-posts and waits.
uint64_t run_graph(Run& r, uint32_t burst, uint32_t stages) {
  auto api = daqiri::cuda::DriverApi::get();
  if (!api) {
    std::fprintf(stderr, "driver: %s\n", api.error().message.c_str());
    std::exit(1);
  }
  auto graph = daqiri::example::BurstGraph::create(**api, r.ring.view(), burst, stages, r.totals);
  if (!graph) {
    std::fprintf(stderr, "graph: %s\n", graph.error().message.c_str());
    std::exit(1);
  }
  uint64_t posted = 0;
  while (posted < r.count) {
    if (auto ok = graph->post(static_cast<uint32_t>(posted), r.stream); !ok) {
      std::fprintf(stderr, "graph: %s\n", ok.error().message.c_str());
      std::exit(1);
    }
    posted += graph->per_post();
    if (!wait_stream(r.stream, r.deadline)) {
      // A stream memory wait cannot be cancelled: report what arrived and leave.
      std::printf("received %llu packets: timed out waiting in the graph\n",
                  r.totals->intact + r.totals->corrupt);
      std::fflush(stdout);
      std::_Exit(1);
    }
  }
  return posted;
}

// CUDA graph over a mapped host ring: the graph and as many relay steps posted again and
// again, two posts ahead, until the relay has released `count` packets (or the deadline); then
// the relay stops and lets the stages still waiting run empty.
uint64_t run_mapped_graph(daqiri::example::MappedAttachment& m, Totals* totals, cudaStream_t stream,
                          uint64_t count, std::chrono::steady_clock::time_point deadline,
                          uint32_t blocks, uint32_t stages) {
  auto api = daqiri::cuda::DriverApi::get();
  cudaStream_t relay_stream = nullptr;
  cudaStreamCreateWithFlags(&relay_stream, cudaStreamNonBlocking);
  cudaEvent_t posted_done[2] = {};
  for (cudaEvent_t& e : posted_done)
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  const daqiri_ring_header* host = m.stream->memory().ring;
  const uint32_t from = __atomic_load_n(&host->consumer, __ATOMIC_ACQUIRE);
  auto graph = api ? daqiri::example::BurstGraph::create(
                         **api, m.ring->view(), m.ring->relay_view(), blocks, stages, totals)
                   : std::unexpected(api.error());
  auto post = [&](uint64_t round) -> daqiri::Result<> {
    if (auto ok = graph->post(0, stream); !ok) return ok;
    if (auto ok = m.ring->launch_relay(relay_stream, stages); !ok) return ok;
    cudaEventRecord(posted_done[round % 2], stream);
    return {};
  };
  auto released = [&] { return __atomic_load_n(&host->consumer, __ATOMIC_ACQUIRE) - from; };
  bool stopped = false;
  auto ok = graph ? post(0) : daqiri::Result<>(std::unexpected(graph.error()));
  for (uint64_t round = 1; ok && !stopped; ++round) {
    if (round >= 2) {  // post `round` once post `round - 2` is done
      while (!stopped && cudaEventQuery(posted_done[round % 2]) == cudaErrorNotReady) {
        stopped = released() >= count || std::chrono::steady_clock::now() >= deadline;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    stopped = stopped || released() >= count;
    if (!stopped) ok = post(round);
  }
  if (ok) ok = m.ring->stop_relay();
  cudaError_t e = ok ? cudaStreamSynchronize(stream) : cudaSuccess;
  if (!ok || e != cudaSuccess) {
    std::fprintf(stderr, "graph: %s\n", ok ? cudaGetErrorString(e) : ok.error().message.c_str());
    std::exit(1);
  }
  for (cudaEvent_t& ev : posted_done)
    cudaEventDestroy(ev);
  cudaStreamDestroy(relay_stream);
  return totals->intact + totals->corrupt;
}

// CUDA graph loop: launched once; the host only waits (and stops it at the deadline).
uint64_t run_graph_loop(Run& r, uint32_t burst) {
  auto loop = daqiri::example::BurstLoop::create(r.ring.view(), burst, 0,
                                                 static_cast<uint32_t>(r.count), r.totals);
  if (!loop) {
    std::fprintf(stderr, "graph loop: %s\n", loop.error().message.c_str());
    std::exit(1);
  }
  if (auto ok = loop->launch(r.stream); !ok) {
    std::fprintf(stderr, "graph loop: %s\n", ok.error().message.c_str());
    std::exit(1);
  }
  if (!wait_stream(r.stream, r.deadline)) loop->stop();
  if (cudaError_t e = cudaStreamSynchronize(r.stream); e != cudaSuccess) {
    std::fprintf(stderr, "graph loop: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
  return r.totals->intact + r.totals->corrupt;
}

// The counts a run prints, and its exit status: 0 when `count` packets arrived, all intact.
int report(uint64_t received, uint64_t count, const Totals& totals,
           std::chrono::steady_clock::time_point start) {
  std::printf(
      "received %llu packets: %llu intact, %llu corrupt, payload bytes %llu, byte sum %llu, "
      "sequence sum %llu\n",
      static_cast<unsigned long long>(received), totals.intact, totals.corrupt,
      totals.payload_bytes, totals.byte_sum, totals.sequence_sum);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("elapsed %.6f seconds from attach, %.3f Mpps\n", seconds,
              static_cast<double>(received) / seconds / 1e6);
  return received == count && totals.intact == count && totals.corrupt == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket, flow;
  uint64_t count = 0;
  uint32_t ring_size = 0;
  int timeout_s = 30;
  std::string style = "kernel";
  uint32_t blocks = 1, threads = 1024, burst = 32, stages = 8;
  int gpu = 0;
  std::string reconnect_arg = "no", cuda_ipc_arg = "no", block_arg = "no";
  CLI::App app{"daqiri-gpu-receive: a flow's packets into a GPU ring, checked on the GPU"};
  app.add_option("--socket", socket, "daqirid's control socket");
  app.add_option("--flow", flow, "the flow to attach to")->required();
  app.add_option("--count", count, "packets to receive")->required()->check(CLI::PositiveNumber);
  app.add_option("--ring", ring_size, "GPU ring slots (default: the queue's ring_size)");
  app.add_option("--timeout", timeout_s, "seconds to wait for them")->capture_default_str();
  app.add_option("--style", style, "consumer style")
      ->check(CLI::IsMember(
          {"kernel", "persistent", "graph", "graph-loop", "hds", "mapped", "mapped-graph"}))
      ->capture_default_str();
  app.add_option("--gpu", gpu, "mapped: the CUDA device to run on")->capture_default_str();
  app.add_option("--blocks", blocks,
                 "persistent, mapped: blocks of its grid (all resident); mapped-graph: of each "
                 "stage's kernel")
      ->capture_default_str();
  app.add_option("--threads", threads, "persistent, mapped: threads of each block")
      ->capture_default_str();
  app.add_option("--burst", burst, "graph, graph-loop: packets per stage")->capture_default_str();
  app.add_option("--stages", stages, "graph, mapped-graph: stages per post")->capture_default_str();
  app.add_option("--reconnect", reconnect_arg, "kernel: survive a daemon restart")
      ->check(CLI::IsMember({"yes", "no"}));
  app.add_option("--cuda-ipc", cuda_ipc_arg, "open the ring from a legacy cudaIpcMemHandle_t")
      ->check(CLI::IsMember({"yes", "no"}));
  app.add_option("--block", block_arg,
                 "blocking backpressure: the flow waits for this ring instead of dropping "
                 "(the flow's allow_block must let us)")
      ->check(CLI::IsMember({"yes", "no"}));
  CLI11_PARSE(app, argc, argv);
  // Kernels loaded before any spins: a kernel loaded lazily beside a spinning one (the relay,
  // a persistent grid) may wait for it.
  setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  bool reconnect = reconnect_arg == "yes";
  bool cuda_ipc = cuda_ipc_arg == "yes";
  if (reconnect && style != "kernel") {
    std::fprintf(stderr, "--reconnect is for --style kernel\n");
    return 2;
  }
  if (style == "mapped-graph" && (blocks == 0 || stages == 0 || stages % 2 != 0)) {
    std::fprintf(stderr, "--blocks must be at least 1 and --stages even (the relay's phases)\n");
    return 2;
  }
  bool persistent = style == "persistent" || style == "mapped";
  if (persistent && (threads == 0 || threads % 32 != 0 || threads > 1024)) {
    std::fprintf(stderr, "--threads must be a multiple of 32, at most 1024\n");
    return 2;
  }
  if (persistent && (blocks == 0 || blocks > 1024)) {
    std::fprintf(stderr, "--blocks must be 1 to 1024 (and fit on the GPU at once)\n");
    return 2;
  }
  if (style == "graph" && (burst == 0 || stages == 0 || count % (uint64_t{burst} * stages) != 0)) {
    std::fprintf(stderr, "--count must be a multiple of --burst x --stages\n");
    return 2;
  }
  if (style == "graph-loop" && (burst == 0 || count % burst != 0 || count > UINT32_MAX)) {
    std::fprintf(stderr, "--count must be a multiple of --burst (and below 2^32)\n");
    return 2;
  }

  daqiri::RxOptions ro;
  ro.flow = flow;
  ro.ring_size = ring_size;
  ro.cuda_ipc = cuda_ipc;
  ro.block = block_arg == "yes";
  // The caller's device is ours to choose here: this program has no other CUDA state.
  std::optional<daqiri::example::GpuAttachment> attached;
  std::optional<daqiri::example::MappedAttachment> mapped;
  if (style.starts_with("mapped")) {
    cudaSetDevice(gpu);
    mapped = daqiri::example::attach_mapped_ring(socket, "daqiri-gpu-receive", ro);
    if (!mapped) return 1;
    std::printf("attached: host ring %llu mapped for GPU %d, %u slots; style %s\n",
                static_cast<unsigned long long>(mapped->stream->id()), gpu,
                mapped->ring->view().mask + 1, style.c_str());
  } else {
    attached = daqiri::example::attach_gpu_ring(socket, "daqiri-gpu-receive", ro);
    if (!attached) return 1;
    const daqiri::GpuRxRing& ring = *attached->ring;
    std::printf("attached: ring %llu on GPU %d, %u slots of %u bytes; style %s\n",
                static_cast<unsigned long long>(ring.id()), ring.device(), ring.info().size,
                ring.info().slot_size, style.c_str());
    cudaSetDevice(ring.device());
  }
  std::fflush(stdout);
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  Totals* totals = nullptr;
  cudaMallocManaged(reinterpret_cast<void**>(&totals), sizeof(Totals));
  std::memset(totals, 0, sizeof(Totals));

  auto start = std::chrono::steady_clock::now();
  auto deadline = start + std::chrono::seconds(timeout_s);
  uint64_t received = 0;
  if (mapped) {
    received = style == "mapped-graph"
                   ? run_mapped_graph(*mapped, totals, stream, count, deadline, blocks, stages)
                   : run_persistent(mapped->ring->view(), totals, stream, count, deadline, blocks,
                                    threads);
  } else {
    Run run{*attached->ring, totals,   stream,
            count,           deadline, reconnect ? attached->client.get() : nullptr};
    received = style == "persistent" ? run_persistent(attached->ring->view(), totals, stream, count,
                                                      deadline, blocks, threads)
               : style == "graph"    ? run_graph(run, burst, stages)
               : style == "graph-loop" ? run_graph_loop(run, burst)
               : style == "hds"        ? run_split(run)
                                       : run_kernel_per_burst(run);
  }
  int status = report(received, count, *totals, start);
  cudaFree(totals);
  cudaStreamDestroy(stream);
  return status;
}
