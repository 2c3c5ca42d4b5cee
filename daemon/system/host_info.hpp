// Facts about the host for GetInfo: GPUs (CUDA builds) and hugepage pools of every size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace daqiri::system {

struct GpuInfo {
  uint32_t index = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  std::string pci_bus_id;
};

struct HugepagePool {
  uint64_t page_size = 0;
  uint64_t total = 0;
  uint64_t free = 0;
};

// Empty without CUDA or without a GPU (cudaErrorNoDevice / InsufficientDriver).
std::vector<GpuInfo> probe_gpus();
std::vector<HugepagePool> probe_hugepages();

}  // namespace daqiri::system
