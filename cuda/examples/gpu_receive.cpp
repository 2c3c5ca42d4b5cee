// daqiri-gpu-receive: a flow's packets straight into GPU memory, checked by a CUDA kernel per
// burst (the "kernel per burst" consumer style). It verifies daqiri-gen's payload pattern on
// the GPU and prints what it saw:
//   daqiri-gpu-receive --socket /run/daqiri/daqiri.sock --flow stream0 --count 1000
//   attached: ring 7 on GPU 0, 1024 slots of 2048 bytes
//   received 1000 packets: 1000 intact, 0 corrupt, payload bytes 1000000, byte sum ..., sequence
//   sum ...
// Exit status 0 when --count packets arrived and every one was intact.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "daqiri/gpu_rx_ring.hpp"
#include "pattern_check.hpp"

using daqiri::example::Totals;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: daqiri-gpu-receive --socket PATH --flow NAME --count N [--ring SLOTS] "
               "[--timeout SECONDS]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket, flow;
  uint64_t count = 0;
  uint32_t ring_size = 0;
  int timeout_s = 30;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--socket")
      socket = v;
    else if (k == "--flow")
      flow = v;
    else if (k == "--count")
      count = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--ring")
      ring_size = static_cast<uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
    else if (k == "--timeout")
      timeout_s = static_cast<int>(std::strtol(v.c_str(), nullptr, 10));
    else
      return usage();
  }
  if (flow.empty() || count == 0) return usage();

  daqiri::ClientOptions co;
  co.socket = socket;
  co.name = "daqiri-gpu-receive";
  auto client = daqiri::Client::connect(co);
  if (!client) {
    std::fprintf(stderr, "connect: %s\n", client.error().message.c_str());
    return 1;
  }
  daqiri::RxOptions ro;
  ro.flow = flow;
  ro.ring_size = ring_size;
  auto ring = daqiri::GpuRxRing::attach(**client, ro);
  if (!ring) {
    std::fprintf(stderr, "attach: %s\n", ring.error().message.c_str());
    return 1;
  }
  const daqiri_gpu_ring_info& info = (*ring)->info();
  std::printf("attached: ring %llu on GPU %d, %u slots of %u bytes\n",
              static_cast<unsigned long long>((*ring)->id()), (*ring)->device(), info.size,
              info.slot_size);
  std::fflush(stdout);

  // The caller's device is ours to choose here: this program has no other CUDA state.
  cudaSetDevice((*ring)->device());
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  Totals* totals = nullptr;
  cudaMallocManaged(reinterpret_cast<void**>(&totals), sizeof(Totals));
  std::memset(totals, 0, sizeof(Totals));

  uint32_t seen = 0;
  uint64_t received = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (received < count && std::chrono::steady_clock::now() < deadline) {
    auto p = (*ring)->wait(seen, std::chrono::milliseconds(100));
    if (!p) {
      std::fprintf(stderr, "wait: %s\n", p.error().message.c_str());
      break;
    }
    uint32_t n = *p - seen;
    if (n == 0) continue;
    cudaError_t e = daqiri::example::launch_check((*ring)->view(), seen, n, totals, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) {
      std::fprintf(stderr, "kernel: %s\n", cudaGetErrorString(e));
      return 1;
    }
    (*ring)->release(*p);
    seen = *p;
    received += n;
  }
  std::printf(
      "received %llu packets: %llu intact, %llu corrupt, payload bytes %llu, byte sum %llu, "
      "sequence sum %llu\n",
      static_cast<unsigned long long>(received), totals->intact, totals->corrupt,
      totals->payload_bytes, totals->byte_sum, totals->sequence_sum);
  bool ok = received == count && totals->intact == count && totals->corrupt == 0;
  cudaFree(totals);
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}
