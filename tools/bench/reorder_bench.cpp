// reorder-bench: daqiri::GpuReorder's throughput on one GPU, without the daemon: a ring of
// packets built in GPU memory (daqiri-gen's header, then int16 samples; sequences shuffled two
// frames at a time), placed burst by burst into frames with int16 -> fp32 conversion, each
// burst followed by ready()/release() as a consumer would. The peer, in the same run: one
// cudaMemcpy (device to device) of the same sample bytes per burst.
//   reorder-bench [PACKETS_PER_FRAME] [SAMPLE_BYTES] [BURST] [BURSTS]
//   reorder   burst 256: 2.1 Mpps, 4.3 GB/s of samples in, 8.6 GB/s written (fp32)
//   memcpy    burst 256: ...                      ratio ...
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_owned.hpp"
#include "daqiri/gpu_reorder.hpp"
#include "daqiri/test_pattern.hpp"

namespace {

using namespace daqiri::bench;
constexpr uint32_t kSlots = 4096;
constexpr uint32_t kSlotSize = 16384;
constexpr uint32_t kHeaders = 42;  // Ethernet, IPv4, UDP: the payload starts after them

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

uint32_t arg(int argc, char** argv, int i, uint32_t fallback) {
  return argc > i ? static_cast<uint32_t>(std::strtoul(argv[i], nullptr, 10)) : fallback;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t per_frame = arg(argc, argv, 1, 64);
  uint32_t sample_bytes = arg(argc, argv, 2, 1024);
  uint32_t burst = arg(argc, argv, 3, 256);
  uint32_t bursts = arg(argc, argv, 4, 2000);
  uint32_t length = kHeaders + daqiri::pattern::kHeaderSize + sample_bytes;
  if (per_frame == 0 || burst == 0 || burst > kSlots || length > kSlotSize || kSlots % burst != 0 ||
      sample_bytes % 2 != 0) {
    std::fprintf(stderr,
                 "usage: reorder-bench [PACKETS_PER_FRAME] [SAMPLE_BYTES<=%u, even] "
                 "[BURST dividing %u] [BURSTS]\n",
                 kSlotSize - kHeaders - 24, kSlots);
    return 2;
  }

  // The ring: kSlots packets whose sequences are shuffled two frames at a time.
  std::vector<uint64_t> seq(kSlots);
  std::iota(seq.begin(), seq.end(), 0);
  std::mt19937 rng(7);
  for (uint32_t b = 0; b < kSlots; b += 2 * per_frame) {
    auto end = seq.begin() + std::min<uint32_t>(kSlots, b + 2 * per_frame);
    std::shuffle(seq.begin() + b, end, rng);
  }
  std::vector<uint8_t> slots(uint64_t{kSlots} * kSlotSize, 0);
  std::vector<daqiri_rx_desc> descs(kSlots);
  for (uint32_t i = 0; i < kSlots; ++i) {
    daqiri::pattern::Header h{daqiri::pattern::kMagic, 1, seq[i], length - kHeaders, 0};
    std::memcpy(slots.data() + uint64_t{i} * kSlotSize + kHeaders, &h, sizeof h);
    descs[i].offset = uint64_t{i} * kSlotSize;
    descs[i].length = length;
    descs[i].payload_offset = kHeaders;
  }
  DeviceMemory<uint8_t> d_slots;
  DeviceMemory<daqiri_rx_desc> d_descs;
  check(device_alloc(d_slots, slots.size()), "cudaMalloc");
  check(device_alloc(d_descs, sizeof(daqiri_rx_desc) * kSlots), "cudaMalloc");
  check(cudaMemcpy(d_slots.get(), slots.data(), slots.size(), cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(d_descs.get(), descs.data(), sizeof(daqiri_rx_desc) * kSlots,
                   cudaMemcpyHostToDevice),
        "copy");
  daqiri::GpuRingView view{d_slots.get(), nullptr, d_descs.get(), nullptr, kSlots - 1, kSlotSize};

  daqiri::ReorderOptions o;
  o.data_bytes = sample_bytes;
  o.packets_per_frame = per_frame;
  o.frames = std::max<uint32_t>(8, 4 * ((burst + per_frame - 1) / per_frame));
  o.lag_frames = 2;
  o.convert = daqiri::ReorderOptions::Convert::kInt16ToFp32;
  auto reorder = daqiri::GpuReorder::create(o, 0);
  if (!reorder) {
    std::fprintf(stderr, "reorder: %s\n", reorder.error().message.c_str());
    return 1;
  }
  Stream owned_stream;
  check(make_stream(owned_stream), "stream");
  cudaStream_t stream = owned_stream.get();

  // The ring is replayed: ring counter c holds sequence seq[c % kSlots] + kSlots * (c / kSlots).
  // Its descriptors do not change, so every lap reuses the same sequences: a new GpuReorder per
  // lap keeps them in order.
  uint64_t packets = 0;
  auto start = std::chrono::steady_clock::now();
  uint32_t laps_bursts = kSlots / burst;
  for (uint32_t b = 0; b < bursts; ++b) {
    if (b % laps_bursts == 0 && b != 0) {
      check(cudaStreamSynchronize(stream), "sync");
      auto fl = (*reorder)->flush();
      for (const auto& f : *fl)
        (void)(*reorder)->release(f.index, stream);
      reorder = daqiri::GpuReorder::create(o, 0);
    }
    uint32_t first = (b % laps_bursts) * burst;
    check((*reorder)->place(view, first, burst, stream), "place");
    check(cudaStreamSynchronize(stream), "sync");
    auto ready = (*reorder)->ready();
    if (!ready) return 1;
    for (const auto& f : *ready)
      (void)(*reorder)->release(f.index, stream);
    packets += burst;
  }
  check(cudaStreamSynchronize(stream), "sync");
  double reorder_s = seconds_since(start);
  auto c = (*reorder)->counters();

  // The peer: the same sample bytes per burst, one contiguous cudaMemcpy, synchronised.
  DeviceMemory<float> d_out;
  uint64_t burst_bytes = uint64_t{burst} * sample_bytes;
  check(device_alloc(d_out, burst_bytes), "cudaMalloc");
  start = std::chrono::steady_clock::now();
  for (uint32_t b = 0; b < bursts; ++b) {
    uint32_t first = (b % laps_bursts) * burst;
    check(cudaMemcpyAsync(d_out.get(), d_slots.get() + uint64_t{first} * kSlotSize, burst_bytes,
                          cudaMemcpyDeviceToDevice, stream),
          "memcpy");
    check(cudaStreamSynchronize(stream), "sync");
  }
  double memcpy_s = seconds_since(start);

  double in_bytes = double(packets) * sample_bytes;
  std::printf(
      "reorder  M %u, %u sample bytes, burst %u: %.2f Mpps, %.2f GB/s of samples in, %.2f GB/s "
      "written (fp32) (%llu placed in the last lap)\n",
      per_frame, sample_bytes, burst, packets / reorder_s / 1e6, in_bytes / reorder_s / 1e9,
      2 * in_bytes / reorder_s / 1e9, c ? static_cast<unsigned long long>(c->placed) : 0ull);
  std::printf("memcpy   same bytes per burst: %.2f GB/s; reorder / memcpy %.2fx\n",
              in_bytes / memcpy_s / 1e9, memcpy_s / reorder_s);
  return 0;
}
