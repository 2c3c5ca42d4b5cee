// daqiri-gpu-reorder: a flow's packets placed into frames on the GPU by sequence number
// (daqiri::GpuReorder), int16 samples converted to fp32 on the way, each frame checked.
// The packets carry daqiri-gen's 24-byte header (the sequence number at byte 8) and then
// SAMPLES int16 samples, sample j of sequence s being ((s * 7 + j * 13) % 4096) - 2048
// (the GPU tests send them shuffled, with gaps and duplicates). --convert int16-fp16 makes the
// frames fp16 instead.
//   daqiri-gpu-reorder --socket PATH --flow NAME --packets-per-frame 64 --samples 256
//   attached: ring 3 on GPU 0
//   frames 64: 4032 placed, 64 missing, 40 duplicates, 0 late, 0 ahead, 0 short, 0 wrong
// It stops when nothing arrived for --idle seconds after the first packet (or at --timeout),
// then flushes the open frames. Exit status 0 when every placed sample is right and every
// missing packet's samples read zero.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "daqiri/gpu_reorder.hpp"
#include "gpu_attach.hpp"

namespace {

float reorder_sample(uint64_t sequence, uint32_t j) {
  return static_cast<float>(static_cast<int>((sequence * 7 + uint64_t{j} * 13) % 4096) - 2048);
}

struct Tally {
  uint64_t frames = 0, missing = 0, wrong = 0;
};

// Checks a final frame against what its packets carried; missing packets must read zero.
bool check(const daqiri::Frame& f, const daqiri::ReorderOptions& o, uint32_t samples, Tally& t) {
  bool half = o.convert == daqiri::ReorderOptions::Convert::kInt16ToFp16;
  uint64_t n = uint64_t{o.packets_per_frame} * samples;
  std::vector<float> host(n);
  std::vector<__half> halves(half ? n : 0);
  void* to = half ? static_cast<void*>(halves.data()) : static_cast<void*>(host.data());
  if (cudaMemcpy(to, f.data, n * (half ? sizeof(__half) : sizeof(float)), cudaMemcpyDeviceToHost) !=
      cudaSuccess) {
    return false;
  }
  for (uint64_t i = 0; i < halves.size(); ++i)
    host[i] = __half2float(halves[i]);
  for (uint32_t k = 0; k < o.packets_per_frame; ++k) {
    bool got = (f.received_bits[k / 64] >> (k % 64)) & 1;
    uint64_t seq = o.first_sequence + f.index * o.packets_per_frame + k;
    for (uint32_t j = 0; j < samples; ++j) {
      float want = got ? reorder_sample(seq, j) : 0.0f;
      t.wrong += host[uint64_t{k} * samples + j] != want;
    }
  }
  ++t.frames;
  t.missing += f.missing;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket = "/run/daqiri/daqiri.sock", flow;
  uint32_t per_frame = 64, samples = 256, frames = 8;
  double idle = 1.0, timeout = 60;
  std::string convert = "int16-fp32";
  CLI::App app{"daqiri-gpu-reorder: a flow's packets placed into frames on the GPU"};
  app.add_option("--socket", socket, "daqirid's control socket")->capture_default_str();
  app.add_option("--flow", flow, "the flow to attach to")->required();
  app.add_option("--packets-per-frame", per_frame, "packets per frame")->capture_default_str();
  app.add_option("--samples", samples, "int16 samples per packet")->capture_default_str();
  app.add_option("--frames", frames, "frames in flight")->capture_default_str();
  app.add_option("--convert", convert, "sample conversion")
      ->check(CLI::IsMember({"int16-fp32", "int16-fp16"}))
      ->capture_default_str();
  app.add_option("--idle", idle, "stop after this many seconds without a packet")
      ->capture_default_str();
  app.add_option("--timeout", timeout, "stop after this many seconds in all")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  daqiri::RxOptions ro;
  ro.flow = flow;
  auto attached = daqiri::example::attach_gpu_ring(socket, "gpu-reorder", ro);
  if (!attached) return 1;
  daqiri::GpuRxRing* ring = attached->ring.get();
  daqiri::ReorderOptions o;
  o.data_bytes = samples * 2;
  o.packets_per_frame = per_frame;
  o.frames = frames;
  o.convert = convert == "int16-fp16" ? daqiri::ReorderOptions::Convert::kInt16ToFp16
                                      : daqiri::ReorderOptions::Convert::kInt16ToFp32;
  auto reorder = daqiri::GpuReorder::create(o, ring->device());
  if (!reorder) {
    std::fprintf(stderr, "reorder: %s\n", reorder.error().message.c_str());
    return 1;
  }
  std::printf("attached: ring %llu on GPU %d\n", static_cast<unsigned long long>(ring->id()),
              ring->device());
  std::fflush(stdout);
  cudaSetDevice(ring->device());
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);

  Tally t;
  auto settle = [&](const daqiri::Result<std::vector<daqiri::Frame>>& ready) {
    if (!ready) {
      std::fprintf(stderr, "reorder: %s\n", ready.error().message.c_str());
      std::exit(1);
    }
    for (const daqiri::Frame& f : *ready) {
      if (!check(f, o, samples, t)) {
        std::fprintf(stderr, "frame %llu: cannot read it back: %s\n",
                     static_cast<unsigned long long>(f.index),
                     cudaGetErrorString(cudaGetLastError()));
        std::exit(1);
      }
      if (auto ok = (*reorder)->release(f.index, stream); !ok) {
        std::fprintf(stderr, "release: %s\n", ok.error().message.c_str());
        std::exit(1);
      }
    }
  };
  using clock = std::chrono::steady_clock;
  auto end = clock::now() +
             std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout));
  clock::time_point last{};
  uint32_t seen = 0;
  while (clock::now() < end) {
    if (last != clock::time_point{} && clock::now() - last > std::chrono::duration<double>(idle)) {
      break;
    }
    auto p = ring->wait(seen, std::chrono::milliseconds(100));
    if (!p) {
      std::fprintf(stderr, "wait: %s\n", p.error().message.c_str());
      break;
    }
    if (*p == seen) continue;
    last = clock::now();
    if (cudaError_t e = (*reorder)->place(ring->view(), seen, *p - seen, stream);
        e != cudaSuccess || cudaStreamSynchronize(stream) != cudaSuccess) {
      std::fprintf(stderr, "place: %s\n", cudaGetErrorString(e));
      return 1;
    }
    ring->release(*p);
    seen = *p;
    settle((*reorder)->ready());
  }
  cudaStreamSynchronize(stream);
  settle((*reorder)->flush());
  auto c = (*reorder)->counters();
  if (!c) {
    std::fprintf(stderr, "counters: %s\n", c.error().message.c_str());
    return 1;
  }
  std::printf(
      "frames %llu: %llu placed, %llu missing, %llu duplicates, %llu late, %llu ahead, %llu "
      "short, %llu wrong\n",
      static_cast<unsigned long long>(t.frames), static_cast<unsigned long long>(c->placed),
      static_cast<unsigned long long>(t.missing), static_cast<unsigned long long>(c->duplicates),
      static_cast<unsigned long long>(c->late), static_cast<unsigned long long>(c->ahead),
      static_cast<unsigned long long>(c->short_), static_cast<unsigned long long>(t.wrong));
  cudaStreamDestroy(stream);
  return t.wrong == 0 && t.frames > 0 ? 0 : 1;
}
