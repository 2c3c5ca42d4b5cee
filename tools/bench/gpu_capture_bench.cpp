// GPU capture throughput against its peers, in one run on one folder: a ring of frames laid out
// in GPU memory as daqirid lays out a GPU ring goes to a PCAP file through
// capture::GpuFileWriter by cuFile and by host staging; the peers are the same byte count
// moved with cudaMemcpy into pinned memory then write(2) in 4 MiB blocks (what an application
// would do by hand), and plain write(2) of host memory (the disk's own rate). Each run ends
// with fsync; alternating rounds, medians. One markdown row per frame size.
//   gpu-capture-bench DIR [TOTAL_MB] [SIZES...]
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "capture_bench_common.hpp"
#include "cuda_owned.hpp"
#include "daqiri/gpu_capture.hpp"

namespace {

using namespace daqiri::bench;
constexpr uint32_t kSlots = 8192;
constexpr size_t kBlock = 4 << 20;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    die(std::string("gpu-capture-bench: ") + what + ": " + cudaGetErrorString(e));
}

// A GPU ring of kSlots frames of `size` bytes, every slot produced.
struct Ring {
  daqiri::GpuRingView view{};
  DeviceMemory<uint8_t> memory;
  size_t frames = 0;  // bytes of frames after the descriptors

  explicit Ring(uint32_t size) {
    uint32_t slot = (size + 255) / 256 * 256;
    size_t descs = kSlots * sizeof(daqiri_rx_desc);
    // At least a 4 MiB block of frames: the cudaMemcpy peer copies blocks from here.
    frames = std::max(size_t{kSlots} * slot, kBlock);
    check(device_alloc(memory, descs + frames), "cudaMalloc of the ring");
    uint8_t* base = memory.get();
    std::vector<daqiri_rx_desc> d(kSlots);
    for (uint32_t i = 0; i < kSlots; ++i)
      d[i] = {descs + size_t{i} * slot, 1'700'000'000'000'000'000ull + i, size, 0, 0, 0, 42, 0};
    check(cudaMemcpy(base, d.data(), descs, cudaMemcpyHostToDevice), "descriptors");
    check(cudaMemset(base + descs, 0x5a, frames), "frames");
    view = {base,    nullptr,    reinterpret_cast<const daqiri_rx_desc*>(base),
            nullptr, kSlots - 1, slot};
  }
};

// GB/s of `frames` frames through GpuFileWriter (PCAP), fsync at close; empty when cuFile was
// asked for and is not usable here (the reason goes to stderr once).
std::optional<double> writer_gbps(const Ring& ring, const std::string& path, uint64_t frames,
                                  uint32_t size, bool cufile) {
  daqiri::capture::WriterOptions o;
  o.sync = daqiri::capture::Sync::kOnClose;
  o.chunk_bytes = 16 << 20;
  auto t0 = Clock::now();
  auto w = daqiri::capture::GpuFileWriter::open(path, ring.view, 0, o, {.use_cufile = cufile});
  if (!w) die(w.error().message);
  if (cufile && !(*w)->uses_cufile()) {
    static bool said = false;
    if (!said) std::fprintf(stderr, "no cuFile: %s\n", (*w)->data_path().c_str());
    said = true;
    ::unlink(path.c_str());
    return std::nullopt;
  }
  for (uint64_t done = 0; done < frames;) {
    auto n = static_cast<uint32_t>(std::min<uint64_t>(frames - done, kSlots));
    if (auto ok = (*w)->write(0, n); !ok) die(ok.error().message);
    done += n;
  }
  if (auto ok = (*w)->close(); !ok) die(ok.error().message);
  double s = seconds_since(t0);
  ::unlink(path.c_str());
  return double(frames) * (size + 16) / s / 1e9;
}

// GB/s of `bytes` written in 4 MiB blocks from pinned memory, each first copied there from GPU
// memory when `from_gpu`, fsync at the end.
double plain_gbps(const std::string& path, uint64_t bytes, const Ring& ring, bool from_gpu) {
  PinnedMemory<void> block;
  check(pinned_alloc(block, kBlock, cudaHostAllocDefault), "cudaHostAlloc");
  auto copy = [&](size_t n) {
    check(cudaMemcpy(block.get(), ring.memory.get(), n, cudaMemcpyDeviceToHost), "D2H");
  };
  return from_gpu ? plain_write_gbps(path, bytes, block.get(), kBlock, copy)
                  : plain_write_gbps(path, bytes, block.get(), kBlock);
}

}  // namespace

int main(int argc, char** argv) {
  auto args = parse_capture_bench_args(argc, argv, {64, 1500, 8000});
  if (!args) return 2;
  std::printf(
      "| frame (B) | cuFile GB/s | host staging GB/s | cudaMemcpy + write(2) GB/s | "
      "write(2) GB/s | cuFile / memcpy+write | staging / memcpy+write |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  std::string path = args->dir + "/gpu-capture-bench.pcap";
  for (uint32_t size : args->sizes) {
    Ring ring(size);
    uint64_t frames = args->total / (size + 16);
    uint64_t bytes = frames * (size + 16);
    std::vector<double> cu, st, mw, pw;
    for (int round = 0; round < 3; ++round) {
      if (auto g = writer_gbps(ring, path, frames, size, true)) cu.push_back(*g);
      st.push_back(*writer_gbps(ring, path, frames, size, false));
      mw.push_back(plain_gbps(path, bytes, ring, true));
      pw.push_back(plain_gbps(path, bytes, ring, false));
    }
    double c = cu.empty() ? 0 : median(cu), s = median(st), m = median(mw), p = median(pw);
    auto cell = [](double v) { return v > 0 ? std::to_string(v).substr(0, 4) : std::string("-"); };
    std::printf("| %u | %s | %.2f | %.2f | %.2f | %s | %.2fx |\n", size, cell(c).c_str(), s, m, p,
                c > 0 ? (cell(c / m) + "x").c_str() : "-", s / m);
  }
  return 0;
}
