// The GPU tests that drive a copy engine without a daemon: poll it on the test's thread until
// its ring's producer index reaches a count.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

#include "gpu/gpu_rx_task.hpp"

namespace daqiri::test {

// Polls `task` until its client ring's producer is `produced`, for at most 10 s; returns the
// producer it saw last.
inline uint32_t drive_until_produced(gpu::GpuRxTask& task, uint32_t produced) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (task.control_ring().load_producer() != produced &&
         std::chrono::steady_clock::now() < deadline) {
    task.poll();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return task.control_ring().load_producer();
}

}  // namespace daqiri::test
