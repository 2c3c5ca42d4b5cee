#include "orchestrator/data_plane.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <thread>

#include "backends/registry.hpp"
#include "dataplane/process_barrier.hpp"

namespace daqiri::orchestrator {

Result<std::unique_ptr<DataPlane>> DataPlane::start(const config::Config& config) {
  std::unique_ptr<DataPlane> dp(new DataPlane(config));
  if (!dataplane::process_barrier_available()) {
    spdlog::warn(
        "membarrier(2) refused (a kernel before 4.14, or a seccomp filter): control "
        "threads wait for the pollers without fencing them (docs/architecture.md)");
  }
  if (auto ok = dp->open_backends(); !ok) return std::unexpected(ok.error());
  return dp;
}

Result<> DataPlane::open_backends() {
  gpu_engine_ = backends::make_gpu_engine();
  backends::BackendContext context{
      config_, [this](const std::string& name, int core) { return poller_for(name, core); },
      [this](const config::MemoryRegionConfig& region) -> Result<memory::DeviceMemory> {
        if (!gpu_engine_) {
          return fail(ErrorCode::kFailedPrecondition, "this daqirid was built without CUDA");
        }
        return gpu_engine_->device_memory(region);
      }};
  // Every backend first (DPDK's EAL before any poller: each poller thread registers with it),
  // then the queues, interface by interface.
  for (const auto& itf : config_.interfaces) {
    if (backends_.contains(itf.backend)) continue;
    auto b = backends::open_backend(itf.backend, context);
    if (!b) return std::unexpected(b.error());
    if (auto setup = (*b)->thread_setup()) {
      thread_setup_ = [before = std::move(thread_setup_), setup = std::move(setup)] {
        if (before) before();
        setup();
      };
    }
    backends_.emplace(itf.backend, std::move(*b));
  }
  for (const auto& itf : config_.interfaces) {
    if (auto ok = open_queues(itf, *backends_.at(itf.backend)); !ok) return ok;
  }
  return {};
}

Result<> DataPlane::open_queues(const config::InterfaceConfig& itf, backends::Backend& backend) {
  auto home_of = [&](const config::QueueConfig& q, bool rx) -> Result<backends::QueueHome> {
    // The pools take their geometry from the queue's one region, or with two (header-data
    // split: headers, then payloads in a device region) the second. Backends fill host memory:
    // a device region's frames are staged in host buffers of its geometry and copied into GPU
    // rings by the GPU engine, which splits them when the queue has a header region.
    const config::MemoryRegionConfig* region = config::find_region(config_, q.regions.back());
    const config::MemoryRegionConfig* headers =
        q.regions.size() == 2 ? config::find_region(config_, q.regions[0]) : nullptr;
    if (!rx && region->kind == config::RegionKind::kDevice && !region->gpudirect) {
      // Sent from GPU memory: the backend sends the gpu engine's copies, host buffers that
      // hold a whole frame (headers and payload) each. (From a gpudirect region the NIC reads
      // the client's payloads where they are.)
      config::MemoryRegionConfig& frames = gpu_tx_frames_.emplace_back(*region);
      frames.name = region->name + ".frames";
      frames.kind = config::RegionKind::kHost;
      frames.gpu = -1;
      frames.buf_size = region->buf_size + (headers ? headers->buf_size : 0);
      region = &frames;
    }
    auto poller = backend.queue_poller(itf, q, rx);
    if (!poller) return std::unexpected(poller.error());
    if (q.busy_poll) (*poller)->spin_always();
    return backends::QueueHome{*poller, &itf, &q, region,
                               rx || region->gpudirect ? headers : nullptr};
  };
  for (const auto& q : itf.rx_queues) {
    auto home = home_of(q, true);
    if (!home) return std::unexpected(home.error());
    if (auto ok = backend.open_rx_queue(*home); !ok) return ok;
    rx_queues_[home->key()] = {*home, &backend};
  }
  for (const auto& q : itf.tx_queues) {
    auto home = home_of(q, false);
    if (!home) return std::unexpected(home.error());
    auto task = backend.open_tx_queue(*home);
    if (!task) return std::unexpected(task.error());
    const config::MemoryRegionConfig* last = config::find_region(config_, q.regions.back());
    TxQueue& tx = tx_queues_[home->key()] = {*home, &backend, *task};
    if (last->kind == config::RegionKind::kDevice) {
      tx.gpu_payloads = last;
      if (q.regions.size() == 2) tx.gpu_headers = config::find_region(config_, q.regions[0]);
    }
  }
  return {};
}

DataPlane::~DataPlane() {
  // Pollers first: nothing may be polled while it is destroyed. Then what backends hold of
  // flows and attachments (RDMA queue pairs return buffers to them), the attachments, the
  // GPU engine's pins of flow pools, the flows (their NIC rules need the port open), then the
  // backends (DPDK ports unregister client TX memory, still mapped; a parked TX attachment's
  // frames are freed with its port), and the parked attachments last.
  stop_pollers();
  pollers_.clear();
  for (auto& [kind, b] : backends_)
    b->release_buffers();
  attachments_.clear();
  if (gpu_engine_) gpu_engine_->forget_pool(nullptr);
  flows_.clear();
  lingering_.clear();
  tx_queues_.clear();
  rx_queues_.clear();
  backends_.clear();
  parked_.clear();
}

Result<Poller*> DataPlane::poller_for(const std::string& name, int core) {
  if (core >= 0) {
    if (auto it = pinned_.find(core); it != pinned_.end()) return it->second;
  }
  auto p = Poller::start(core >= 0 ? "poll:core" + std::to_string(core) : "poll:" + name, core,
                         thread_setup_);
  if (!p) return std::unexpected(p.error());
  Poller* raw = p->get();
  pollers_.push_back(std::move(*p));
  if (core >= 0) pinned_[core] = raw;
  return raw;
}

std::vector<gpu::GpuInfo> DataPlane::gpus() const {
  return gpu_engine_ ? gpu_engine_->devices() : std::vector<gpu::GpuInfo>{};
}

void DataPlane::stop_pollers() {
  for (const auto& p : pollers_)
    p->request_stop();
  auto deadline = std::chrono::steady_clock::now() + kStopWait;
  for (const auto& p : pollers_) {
    while (!p->stopped() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (p->stopped()) continue;
    // Its thread cannot be joined, and nothing it may touch can be freed: leave it all to the
    // kernel, which frees whatever the process held, rather than hang the stop.
    spdlog::critical("poller {} did not stop within {} s: exiting without cleanup", p->name(),
                     std::chrono::duration_cast<std::chrono::seconds>(kStopWait).count());
    spdlog::shutdown();
    std::_Exit(kExitPollerStuck);
  }
}

std::vector<std::string> DataPlane::stalled_pollers(std::chrono::milliseconds limit) {
  std::lock_guard lock(mutex_);
  auto now = std::chrono::steady_clock::now();
  std::vector<std::string> out;
  for (const auto& p : pollers_) {
    uint64_t count = p->epoch().count();
    auto [it, fresh] = progress_.try_emplace(p.get(), Progress{count, now});
    if (fresh || it->second.count != count) {
      it->second = {count, now};
    } else if (now - it->second.since > limit) {
      out.push_back(p->name());
    }
  }
  return out;
}

std::vector<PollerStats> DataPlane::poller_stats() const {
  std::lock_guard lock(mutex_);
  std::vector<PollerStats> out;
  out.reserve(pollers_.size());
  for (const auto& p : pollers_)
    out.push_back({p->name(), p->busy_ratio(), p->wakeups()});
  return out;
}

size_t DataPlane::parked() const {
  std::lock_guard lock(mutex_);
  return parked_.size();
}

size_t DataPlane::lingering_flows() const {
  std::lock_guard lock(mutex_);
  return lingering_.size();
}

void DataPlane::reap_parked() {
  std::lock_guard lock(mutex_);
  reap_parked_locked();
}

std::vector<DataPlane::Violation> DataPlane::violated() const {
  std::lock_guard lock(mutex_);
  std::vector<Violation> out;
  for (const auto& [id, a] : attachments_) {
    const dataplane::AttachmentLifecycle& l = a.lifecycle();
    if (!l.violated.load(std::memory_order_acquire)) continue;
    out.push_back({id, l.engine_call.load(std::memory_order_relaxed),
                   l.engine_error.load(std::memory_order_relaxed)});
  }
  return out;
}

}  // namespace daqiri::orchestrator
