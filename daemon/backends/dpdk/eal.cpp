#include "backends/dpdk/eal.hpp"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <sched.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string_view>

#include "backends/dpdk/eal_arguments.hpp"

namespace daqiri::backends::dpdk {
namespace {

std::atomic<bool> g_started{false};

// DPDK's log, line by line, into ours.
ssize_t log_write(void* /*cookie*/, const char* data, size_t size) {
  std::string_view text(data, size);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.remove_suffix(1);
  if (!text.empty()) spdlog::info("dpdk: {}", text);
  return static_cast<ssize_t>(size);
}

std::filesystem::path runtime_dir(const std::string& prefix) {
  const char* base = "/var/run/dpdk";
  if (::geteuid() != 0) {
    if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"))
      return std::filesystem::path(xdg) / "dpdk" / prefix;
    base = "/tmp/dpdk";
  }
  return std::filesystem::path(base) / prefix;
}

void remove_runtime_dir(const std::string& prefix) {
  std::error_code ec;
  std::filesystem::remove_all(runtime_dir(prefix), ec);
}

}  // namespace

Result<std::unique_ptr<Eal>> Eal::start(const config::Config& c) {
  if (g_started.exchange(true)) {
    return fail(ErrorCode::kFailedPrecondition, "the DPDK EAL starts once per process");
  }
  std::string prefix = file_prefix_for(c.daemon.socket_path);
  // The prefix comes from the socket path, whose InstanceLock this daemon holds: a folder there
  // was left by a daemon on the same socket that was killed or crashed.
  if (std::error_code ec; std::filesystem::exists(runtime_dir(prefix), ec)) {
    spdlog::warn("dpdk: removing {}, left by a daqirid on this socket that did not stop cleanly",
                 runtime_dir(prefix).string());
    remove_runtime_dir(prefix);
  }
  std::vector<std::string> args = eal_arguments(c, prefix);
  std::string line;
  for (const auto& a : args)
    line += (line.empty() ? "" : " ") + a;
  spdlog::info("dpdk: starting EAL: {}", line);

  static cookie_io_functions_t io{nullptr, &log_write, nullptr, nullptr};
  if (FILE* f = ::fopencookie(nullptr, "w", io)) {
    std::setvbuf(f, nullptr, _IOLBF, 0);
    rte_openlog_stream(f);
  }
  // rte_eal_init pins the calling thread to the main lcore; every thread the daemon starts
  // later would inherit that. Keep the daemon's own affinity.
  cpu_set_t saved;
  CPU_ZERO(&saved);
  bool have_saved = sched_getaffinity(0, sizeof saved, &saved) == 0;
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = rte_eal_init(static_cast<int>(args.size()), argv.data());
  if (have_saved) sched_setaffinity(0, sizeof saved, &saved);
  if (rc < 0) {
    int err = rte_errno;
    remove_runtime_dir(prefix);
    return fail(ErrorCode::kFailedPrecondition,
                std::string("DPDK EAL initialisation failed: ") + rte_strerror(err) +
                    " (the dpdk: lines above say why; EAL arguments: " + line + ")");
  }
  if (rte_eal_iova_mode() != RTE_IOVA_VA) {
    rte_eal_cleanup();
    remove_runtime_dir(prefix);
    return fail(ErrorCode::kFailedPrecondition,
                "DPDK runs in IOVA-as-PA mode; daqirid registers client-shared memory by virtual "
                "address and needs IOVA as VA (vfio-pci with an IOMMU, or mlx5)");
  }
  return std::unique_ptr<Eal>(new Eal(prefix));
}

Eal::~Eal() {
  rte_eal_cleanup();
  remove_runtime_dir(prefix_);
  spdlog::info("dpdk: EAL cleaned up");
}

void Eal::register_thread() {
  if (rte_lcore_id() == LCORE_ID_ANY && rte_thread_register() != 0) {
    spdlog::warn("dpdk: no lcore id for this poller ({}); mempool caches are off for it",
                 rte_strerror(rte_errno));
  }
}

}  // namespace daqiri::backends::dpdk
