// Capture throughput against the disk's own: the same bytes written by capture::FileWriter
// (PCAP records: a copy per frame into chunks, a writer thread) and by a plain sequential
// writer (write(2) of 4 MiB blocks), to the same folder, each followed by fsync and measured
// to the end of it; three alternating rounds, medians. Prints one markdown row per frame size.
//   capture-bench DIR [TOTAL_MB] [SIZES...]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "daqiri/capture.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// GB/s of `frames` frames of `size` bytes through FileWriter (PCAP), fsync at close.
double writer_gbps(const std::string& path, uint64_t frames, uint32_t size) {
  std::vector<std::byte> frame(size, std::byte{0x5a});
  daqiri::capture::WriterOptions o;
  o.sync = daqiri::capture::Sync::kOnClose;
  auto t0 = Clock::now();
  auto w = daqiri::capture::FileWriter::open(path, o);
  if (!w) {
    std::fprintf(stderr, "%s\n", w.error().message.c_str());
    std::exit(1);
  }
  for (uint64_t i = 0; i < frames; ++i) {
    if (!(*w)->write(i, frame)) std::exit(1);
  }
  if (!(*w)->close()) std::exit(1);
  double s = seconds_since(t0);
  ::unlink(path.c_str());
  return double(frames) * (size + 16) / s / 1e9;
}

// GB/s of the same byte count written in 4 MiB blocks, fsync at the end.
double plain_gbps(const std::string& path, uint64_t bytes) {
  std::vector<std::byte> block(4 << 20, std::byte{0x5a});
  auto t0 = Clock::now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) std::exit(1);
  for (uint64_t left = bytes; left > 0;) {
    size_t n = left < block.size() ? size_t(left) : block.size();
    if (::write(fd, block.data(), n) != ssize_t(n)) std::exit(1);
    left -= n;
  }
  ::fsync(fd);
  ::close(fd);
  double s = seconds_since(t0);
  ::unlink(path.c_str());
  return double(bytes) / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: capture-bench DIR [TOTAL_MB] [SIZES...]\n");
    return 2;
  }
  std::string dir = argv[1];
  uint64_t total = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 2048) << 20;
  std::vector<uint32_t> sizes;
  for (int i = 3; i < argc; ++i)
    sizes.push_back(uint32_t(std::strtoul(argv[i], nullptr, 10)));
  if (sizes.empty()) sizes = {64, 512, 1500, 8000};
  std::printf(
      "| frame (B) | capture::FileWriter PCAP (GB/s) | plain write(2) 4 MiB (GB/s) | ratio |\n");
  std::printf("| ---: | ---: | ---: | ---: |\n");
  for (uint32_t size : sizes) {
    uint64_t frames = total / (size + 16);
    // Three alternating rounds each; the medians (the page cache's write-back makes single
    // runs wander).
    std::vector<double> ws, ps;
    for (int round = 0; round < 3; ++round) {
      ps.push_back(plain_gbps(dir + "/plain.bin", frames * (size + 16)));
      ws.push_back(writer_gbps(dir + "/capture.pcap", frames, size));
    }
    std::sort(ws.begin(), ws.end());
    std::sort(ps.begin(), ps.end());
    double w = ws[1], p = ps[1];
    std::printf("| %u | %.2f | %.2f | %.2fx |\n", size, w, p, w / p);
    std::fflush(stdout);
  }
  return 0;
}
