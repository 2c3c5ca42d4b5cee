// Capture throughput against the disk's own: the same bytes written by capture::FileWriter
// (PCAP records: a copy per frame into chunks, a writer thread) and by a plain sequential
// writer (write(2) of 4 MiB blocks), to the same folder, each followed by fsync and measured
// to the end of it; three alternating rounds, medians. Prints one markdown row per frame size.
//   capture-bench DIR [TOTAL_MB] [SIZES...]
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "capture_bench_common.hpp"
#include "daqiri/capture.hpp"

namespace {

using namespace daqiri::bench;

// GB/s of `frames` frames of `size` bytes through FileWriter (PCAP), fsync at close.
double writer_gbps(const std::string& path, uint64_t frames, uint32_t size) {
  std::vector<std::byte> frame(size, std::byte{0x5a});
  daqiri::capture::WriterOptions o;
  o.sync = daqiri::capture::Sync::kOnClose;
  auto t0 = Clock::now();
  auto w = daqiri::capture::FileWriter::open(path, o);
  if (!w) die(w.error().message);
  for (uint64_t i = 0; i < frames; ++i) {
    if (auto ok = (*w)->write(i, frame); !ok) die(ok.error().message);
  }
  if (auto ok = (*w)->close(); !ok) die(ok.error().message);
  double s = seconds_since(t0);
  ::unlink(path.c_str());
  return double(frames) * (size + 16) / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = parse_capture_bench_args(argc, argv, {64, 512, 1500, 8000});
  if (!args) return 2;
  const std::string& dir = args->dir;
  std::vector<std::byte> block(4 << 20, std::byte{0x5a});
  std::printf(
      "| frame (B) | capture::FileWriter PCAP (GB/s) | plain write(2) 4 MiB (GB/s) | ratio |\n");
  std::printf("| ---: | ---: | ---: | ---: |\n");
  for (uint32_t size : args->sizes) {
    uint64_t frames = args->total / (size + 16);
    // Three alternating rounds each; the medians (the page cache's write-back makes single
    // runs wander).
    std::vector<double> ws, ps;
    for (int round = 0; round < 3; ++round) {
      ps.push_back(
          plain_write_gbps(dir + "/plain.bin", frames * (size + 16), block.data(), block.size()));
      ws.push_back(writer_gbps(dir + "/capture.pcap", frames, size));
    }
    double w = median(ws), p = median(ps);
    std::printf("| %u | %.2f | %.2f | %.2fx |\n", size, w, p, w / p);
    std::fflush(stdout);
  }
  return 0;
}
