// Facts about the host for GetInfo: hugepage pools of every size. (GPUs: the GPU engine.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace daqiri::system {

struct HugepagePool {
  uint64_t page_size = 0;
  uint64_t total = 0;
  uint64_t free = 0;
};

std::vector<HugepagePool> probe_hugepages();

}  // namespace daqiri::system
