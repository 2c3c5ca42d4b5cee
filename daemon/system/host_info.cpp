#include "system/host_info.hpp"

#include <filesystem>
#include <fstream>

#ifdef DAQIRI_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace daqiri::system {

std::vector<GpuInfo> probe_gpus() {
  std::vector<GpuInfo> gpus;
#ifdef DAQIRI_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: report none
    return gpus;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    char bus[32] = {};
    cudaDeviceGetPCIBusId(bus, sizeof bus, i);
    gpus.push_back({static_cast<uint32_t>(i), prop.name, prop.totalGlobalMem, bus});
  }
#endif
  return gpus;
}

std::vector<HugepagePool> probe_hugepages() {
  std::vector<HugepagePool> pools;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/kernel/mm/hugepages", ec)) {
    // hugepages-2048kB
    std::string name = entry.path().filename().string();
    if (!name.starts_with("hugepages-") || !name.ends_with("kB")) continue;
    HugepagePool p;
    p.page_size = std::stoull(name.substr(10, name.size() - 12)) * 1024;
    std::ifstream(entry.path() / "nr_hugepages") >> p.total;
    std::ifstream(entry.path() / "free_hugepages") >> p.free;
    pools.push_back(p);
  }
  return pools;
}

}  // namespace daqiri::system
