// gpu-bench: the two sides of the GPU delivery benchmark (tools/bench/run-gpu runs them).
//   gpu-bench ring SOCKET FLOW SECONDS FRAME_BYTES
//       attaches a GPU ring to FLOW and hands every slot straight back (host-side release):
//       the rate at which daqirid's copy engine fills GPU memory. Prints
//       "ring packets N seconds S pps P GBps G".
//   gpu-bench memcpy BYTES CHUNK SECONDS
//       the peer: cudaMemcpyAsync host-to-device of CHUNK-byte pieces from a memfd mapping
//       registered with CUDA (the same kind of memory daqirid stages frames in), back to back
//       on one stream. Prints "memcpy bytes B seconds S GBps G".
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "daqiri/gpu_rx_ring.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int ring(const std::string& socket, const std::string& flow, double seconds, double frame) {
  daqiri::ClientOptions co;
  co.socket = socket;
  co.name = "gpu-bench";
  auto client = daqiri::Client::connect(co);
  if (!client) {
    std::fprintf(stderr, "connect: %s\n", client.error().message.c_str());
    return 1;
  }
  daqiri::RxOptions ro;
  ro.flow = flow;
  auto r = daqiri::GpuRxRing::attach(**client, ro);
  if (!r) {
    std::fprintf(stderr, "attach: %s\n", r.error().message.c_str());
    return 1;
  }
  uint32_t seen = 0;
  auto drain = [&](double secs) {
    uint64_t n = 0;
    auto start = Clock::now();
    while (seconds_since(start) < secs) {
      uint32_t p = (*r)->producer();
      if (p == seen) continue;
      (*r)->release(p);
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

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ring" && argc == 6) {
    return ring(argv[2], argv[3], std::strtod(argv[4], nullptr), std::strtod(argv[5], nullptr));
  }
  if (mode == "memcpy" && argc == 5) {
    return memcpy_peer(std::strtoull(argv[2], nullptr, 10), std::strtoull(argv[3], nullptr, 10),
                       std::strtod(argv[4], nullptr));
  }
  std::fprintf(stderr,
               "usage: gpu-bench ring SOCKET FLOW SECONDS FRAME_BYTES\n"
               "       gpu-bench memcpy BYTES CHUNK SECONDS\n");
  return 2;
}
