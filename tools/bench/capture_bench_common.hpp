// What the capture benchmarks (capture-bench, gpu-capture-bench) share: their command line,
// the plain sequential writer they compare against, timing and medians. Header-only.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace daqiri::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::exit(1);
}

// PROGRAM DIR [TOTAL_MB] [SIZES...]: the folder, bytes per run, frame sizes.
struct CaptureBenchArgs {
  std::string dir;
  uint64_t total = 0;
  std::vector<uint32_t> sizes;
};
inline std::optional<CaptureBenchArgs> parse_capture_bench_args(
    int argc, char** argv, std::vector<uint32_t> default_sizes) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [TOTAL_MB] [SIZES...]\n", argv[0]);
    return std::nullopt;
  }
  CaptureBenchArgs a{argv[1], (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 2048) << 20, {}};
  for (int i = 3; i < argc; ++i)
    a.sizes.push_back(uint32_t(std::strtoul(argv[i], nullptr, 10)));
  if (a.sizes.empty()) a.sizes = std::move(default_sizes);
  return a;
}

// GB/s of `bytes` written to `path` in blocks of `block_size` from `block` with write(2), fsync
// included; `fill(n)`, when given, runs before each block (the GPU peer copies into it there).
inline double plain_write_gbps(const std::string& path, uint64_t bytes, const void* block,
                               size_t block_size, const std::function<void(size_t)>& fill = {}) {
  auto t0 = Clock::now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) die("open " + path);
  for (uint64_t left = bytes; left > 0;) {
    size_t n = std::min<uint64_t>(left, block_size);
    if (fill) fill(n);
    if (::write(fd, block, n) != ssize_t(n)) die("write " + path);
    left -= n;
  }
  ::fsync(fd);
  ::close(fd);
  double s = seconds_since(t0);
  ::unlink(path.c_str());
  return double(bytes) / s / 1e9;
}

}  // namespace daqiri::bench
