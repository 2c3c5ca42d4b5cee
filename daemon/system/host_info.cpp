#include "system/host_info.hpp"

#include <filesystem>
#include <fstream>

namespace daqiri::system {

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
