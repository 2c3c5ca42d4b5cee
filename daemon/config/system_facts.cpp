#include "config/system_facts.hpp"

#include <sched.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "build_info.hpp"

namespace daqiri::config {
namespace {

uint64_t read_number(const std::string& path) {
  std::ifstream in(path);
  uint64_t v = 0;
  in >> v;
  return in ? v : 0;
}

// Hugepage memory of daqirid's memfds ("daqiri:<name>") each process maps, from smaps: the
// size of each such mapping in hugepages (touched or not: the memfd holds its pages).
std::vector<std::string> find_hugepage_holders() {
  std::vector<std::string> holders;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream smaps(entry.path() / "smaps");
    std::string line;
    bool ours = false;
    uint64_t size_kib = 0, kib = 0;
    auto value = [&line] { return std::strtoull(line.c_str() + line.find(':') + 1, nullptr, 10); };
    while (std::getline(smaps, line)) {
      // A mapping's first line has its address range; its fields follow, "Name: value kB".
      if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
          line.find(':') > line.find(' ')) {
        ours = line.find("/memfd:daqiri:") != std::string::npos;
      } else if (ours && line.starts_with("Size:")) {
        size_kib = value();
      } else if (ours && line.starts_with("KernelPageSize:") && value() > 4) {
        kib += size_kib;
      }
    }
    if (kib == 0) continue;
    std::string comm;
    std::ifstream(entry.path() / "comm") >> comm;
    struct stat st {};
    std::string uid = ::stat(entry.path().c_str(), &st) == 0 ? std::to_string(st.st_uid) : "?";
    holders.push_back("pid " + pid + " (" + comm + ", uid " + uid +
                      "): " + std::to_string(kib / 1024) + " MiB");
  }
  return holders;
}

}  // namespace

SystemFacts SystemFacts::probe() {
  SystemFacts f;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) f.usable_cpus.insert(c);
    }
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  while (meminfo >> key >> value) {
    if (key == "Hugepagesize:") f.hugepage_size = value * 1024;
    meminfo.ignore(256, '\n');
  }
  std::string dir =
      "/sys/kernel/mm/hugepages/hugepages-" + std::to_string(f.hugepage_size / 1024) + "kB/";
  f.hugepages_free = read_number(dir + "free_hugepages");
  f.hugepages_total = read_number(dir + "nr_hugepages");
  f.hugepage_holders = &find_hugepage_holders;
  f.have_dpdk = build::kHaveDpdk;
  f.have_rdma = build::kHaveRdma;
  f.have_cuda = build::kHaveCuda;
  f.have_xdp = build::kHaveXdp;
  return f;
}

}  // namespace daqiri::config
