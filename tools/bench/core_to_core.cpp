// core-to-core CPU_A CPU_B [ROUND_TRIPS]: how long one cache line takes to go from one CPU to
// another and back (two threads pinned to them take turns writing it). Every descriptor,
// producer index and consumer index a poller and its client exchange pays this; the DPDK
// benchmark prints it for its poller and client cores, since it is what separates hosts.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "pin_to_cpu.hpp"

namespace {

struct alignas(64) Line {
  std::atomic<uint64_t> turn{0};
};

// Waits for `turn` to reach `mine`, then hands it on; `first`, `first` + 2, ... below `end`.
void play(Line& line, uint64_t first, uint64_t end) {
  for (uint64_t mine = first; mine < end; mine += 2) {
    while (line.turn.load(std::memory_order_acquire) != mine) {
    }
    line.turn.store(mine + 1, std::memory_order_release);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: core-to-core CPU_A CPU_B [ROUND_TRIPS]\n");
    return 2;
  }
  int a = 0;
  int b = 0;
  uint64_t trips = 1000000;
  try {
    a = std::stoi(argv[1]);
    b = std::stoi(argv[2]);
    if (argc == 4) trips = std::stoull(argv[3]);
  } catch (const std::exception&) {
    std::fprintf(stderr, "core-to-core: CPUs and round trips are numbers\n");
    return 2;
  }
  if (!pin_to_cpu(a)) {
    std::fprintf(stderr, "core-to-core: cannot run on CPU %d\n", a);
    return 1;
  }
  Line line;
  std::atomic<int> other_state{0};  // 1: pinned and playing, 2: could not pin
  std::thread other([&] {
    if (!pin_to_cpu(b)) {
      other_state.store(2);
      return;
    }
    other_state.store(1);
    play(line, 1, 2 * trips);
  });
  while (other_state.load() == 0) {
  }
  if (other_state.load() == 2) {
    other.join();
    std::fprintf(stderr, "core-to-core: cannot run on CPU %d\n", b);
    return 1;
  }
  auto start = std::chrono::steady_clock::now();
  play(line, 0, 2 * trips);
  while (line.turn.load(std::memory_order_acquire) != 2 * trips) {
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  other.join();
  std::printf("cpu %d <-> cpu %d: %.1f ns a round trip\n", a, b,
              std::chrono::duration<double, std::nano>(elapsed).count() / double(trips));
  return 0;
}
