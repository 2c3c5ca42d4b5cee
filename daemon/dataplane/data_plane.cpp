#include "dataplane/data_plane.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "daqiri/frame.hpp"
#include "dataplane/process_barrier.hpp"

namespace daqiri::dataplane {
namespace {

// The region the queue's pools take their geometry from: its one region, or with two (header-
// data split: headers, then payloads in a device region) the second. The backends fill host
// memory: a device region's frames are staged in host buffers of its geometry and copied into
// GPU rings by the gpu engine, which splits them when the queue has a header region.
Result<const config::MemoryRegionConfig*> queue_region(const config::Config& c,
                                                       const config::InterfaceConfig& itf,
                                                       const config::QueueConfig& q, bool rx) {
  std::string key = itf.name + "/" + q.name;
  const config::MemoryRegionConfig* r = config::find_region(c, q.regions.back());
  if (rx || r->kind != config::RegionKind::kDevice) return r;
  return fail(ErrorCode::kFailedPrecondition,
              "TX queue " + key + ": region \"" + r->name +
                  "\" is device memory; TX takes host, huge or pinned regions");
}

}  // namespace

Result<std::unique_ptr<DataPlane>> DataPlane::start(const config::Config& config) {
  std::unique_ptr<DataPlane> dp(new DataPlane(config));
  const config::Config& c = dp->config_;
  if (!process_barrier_available()) {
    spdlog::warn(
        "membarrier(2) refused (a kernel before 4.14, or a seccomp filter): control "
        "threads wait for the pollers without fencing them (docs/architecture.md)");
  }
  bool need_dpdk = false;
  for (const auto& itf : c.interfaces) {
    need_dpdk |= itf.backend == config::Backend::kDpdk;
  }
  if (need_dpdk) {
#ifdef DAQIRI_HAVE_DPDK
    backends::dpdk::DpdkBackend::DevicePools device_pools;
    for (const auto& itf : c.interfaces) {
      for (const auto& q : itf.rx_queues) {
        const auto* r = config::find_region(c, q.regions.back());
        if (itf.backend != config::Backend::kDpdk || !r->gpudirect) continue;
        auto m = dp->gpudirect_memory(*r);
        if (!m) {
          return fail(m.error().code, "RX queue " + itf.name + "/" + q.name + ": region \"" +
                                          r->name + "\" is gpudirect: " + m.error().message);
        }
        device_pools.emplace(itf.name + "/" + q.name, std::move(*m));
      }
    }
    auto dpdk = backends::dpdk::DpdkBackend::start(c, device_pools);
    if (!dpdk) return std::unexpected(dpdk.error());
    dp->dpdk_ = std::move(*dpdk);
#else
    return fail(ErrorCode::kFailedPrecondition, "this daqirid was built without DPDK");
#endif
  }
  for (const auto& itf : c.interfaces) {
    bool dpdk = itf.backend == config::Backend::kDpdk;
    // RDMA: one task per interface does all its verbs work, on one poller.
    Poller* rdma_poller = nullptr;
    if (itf.backend == config::Backend::kRdma) {
      auto p = dp->start_rdma(itf);
      if (!p) return std::unexpected(p.error());
      rdma_poller = *p;
    }
    for (const auto& q : itf.rx_queues) {
      std::string key = itf.name + "/" + q.name;
      auto region = queue_region(c, itf, q, true);
      if (!region) return std::unexpected(region.error());
      auto poller = rdma_poller ? rdma_poller : dp->poller_for("rx:" + key, q.core);
      if (!poller) return std::unexpected(poller.error());
      if (q.busy_poll) (*poller)->spin_always();
      const config::MemoryRegionConfig* headers =
          q.regions.size() == 2 ? config::find_region(c, q.regions[0]) : nullptr;
      dp->rx_queues_[key] = {*poller, &itf, &q, *region, headers};
      // DPDK: the queue itself is the poll task; socket flows become tasks as they come.
      if (dpdk) (*poller)->add_task(dp->dpdk_task(itf, q, true), {});
    }
    for (const auto& q : itf.tx_queues) {
      std::string key = itf.name + "/" + q.name;
      auto region = queue_region(c, itf, q, false);
      if (!region) return std::unexpected(region.error());
      auto poller = rdma_poller ? rdma_poller : dp->poller_for("tx:" + key, q.core);
      if (!poller) return std::unexpected(poller.error());
      if (q.busy_poll) (*poller)->spin_always();
      auto home = std::make_unique<TxQueueHome>();
      home->poller = *poller;
      home->itf = &itf;
      home->queue = &q;
      home->region = *region;
      if (dpdk) {
        home->poller->add_task(dp->dpdk_task(itf, q, false), {});
      } else if (rdma_poller) {
#ifdef DAQIRI_HAVE_RDMA
        home->task = dp->rdma(itf.name);
#endif
      } else {
        auto task = backends::socket::SocketTxQueue::create(
            config::sending_ipv4(itf), q.batch_size, home->region->buf_size,
            q.tx_policy.value_or(config::TxPolicy::kChecked));
        if (!task) return std::unexpected(task.error());
        home->owned = std::move(*task);
        home->task = home->owned.get();
        home->poller->add_task(home->task, {});
      }
      dp->tx_queues_[key] = std::move(home);
    }
  }
  return dp;
}

Result<Poller*> DataPlane::start_rdma(const config::InterfaceConfig& itf) {
#ifdef DAQIRI_HAVE_RDMA
  const auto& queues = itf.rx_queues.empty() ? itf.tx_queues : itf.rx_queues;
  uint32_t batch = queues.empty() ? 64 : queues.front().batch_size;
  auto task = backends::rdma::RdmaInterface::create(itf, config::sending_ipv4(itf), batch);
  if (!task) return std::unexpected(task.error());
  auto poller = poller_for("rdma:" + itf.name, queues.empty() ? -1 : queues.front().core);
  if (!poller) return std::unexpected(poller.error());
  (*poller)->add_task(task->get(), (*task)->fds());
  rdma_[itf.name] = std::move(*task);
  return *poller;
#else
  return fail(ErrorCode::kFailedPrecondition,
              "interface \"" + itf.name + "\": this daqirid was built without rdma-core");
#endif
}

PollTask* DataPlane::dpdk_task(const config::InterfaceConfig& itf, const config::QueueConfig& q,
                               bool rx) const {
#ifdef DAQIRI_HAVE_DPDK
  return rx ? dpdk_->rx_task(itf.name, q.name) : dpdk_->tx_task(itf.name, q.name);
#else
  (void)itf, (void)q, (void)rx;
  return nullptr;  // unreachable: start() refuses dpdk interfaces without DPDK
#endif
}

Result<memory::DeviceMemory> DataPlane::gpudirect_memory(const config::MemoryRegionConfig& region) {
#ifdef DAQIRI_HAVE_CUDA
  auto gpu = gpu_of(region);
  if (!gpu) return std::unexpected(gpu.error());
  return gpu::DevicePoolMemory::create(**gpu, region.total_bytes());
#else
  (void)region;
  return fail(ErrorCode::kFailedPrecondition, "this daqirid was built without CUDA");
#endif
}

bool DataPlane::is_dpdk(const std::string& interface) const {
  for (const auto& itf : config_.interfaces) {
    if (itf.name == interface) return itf.backend == config::Backend::kDpdk;
  }
  return false;
}

DataPlane::~DataPlane() {
  // Pollers first: nothing may be polled while it is destroyed. Then flows (their NIC rules
  // need the port open), then the ports (they unregister client TX memory, still mapped).
  stop_pollers();
  pollers_.clear();
#ifdef DAQIRI_HAVE_RDMA
  rdma_.clear();  // queue pairs first: they return buffers to flows and TX attachments
#endif
  attachments_.clear();
#ifdef DAQIRI_HAVE_CUDA
  pinned_pools_.clear();  // before the pools they pin
#endif
  flows_.clear();
  lingering_.clear();
#ifdef DAQIRI_HAVE_DPDK
  dpdk_.reset();  // a parked TX attachment's frames are freed with its port
#endif
  parked_.clear();
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

Result<Poller*> DataPlane::poller_for(const std::string& name, int core) {
  if (core >= 0) {
    if (auto it = pinned_.find(core); it != pinned_.end()) return it->second;
  }
  void (*on_start)() = nullptr;
#ifdef DAQIRI_HAVE_DPDK
  if (dpdk_) on_start = &backends::dpdk::DpdkBackend::register_thread;
#endif
  auto p = Poller::start(core >= 0 ? "poll:core" + std::to_string(core) : "poll:" + name, core,
                         on_start);
  if (!p) return std::unexpected(p.error());
  Poller* raw = p->get();
  pollers_.push_back(std::move(*p));
  if (core >= 0) pinned_[core] = raw;
  return raw;
}

Result<> DataPlane::add_flow(const core::Flow& flow) {
  std::lock_guard lock(mutex_);
  auto home = rx_queues_.find(flow.interface + "/" + flow.queue);
  if (home == rx_queues_.end()) {
    return fail(ErrorCode::kNotFound, "no RX queue " + flow.interface + "/" + flow.queue);
  }
  const RxQueueHome& h = home->second;
  if (lingers(flow.name)) {
    return fail(ErrorCode::kAlreadyExists,
                "flow \"" + flow.name +
                    "\" is still being removed: its poller has not let go of it (see the log)");
  }
#ifdef DAQIRI_HAVE_DPDK
  if (dpdk_ && h.itf->backend == config::Backend::kDpdk) {
    auto f = dpdk_->add_flow(flow, h.poller->epoch());
    if (!f) return std::unexpected(f.error());
    flows_[flow.name] = {std::move(*f), h.poller};
    return {};
  }
#endif
  bool huge = h.region->kind == config::RegionKind::kHuge;
  memory::PageArena* arena = nullptr;
  if (h.region->share_pages) {
    arena = &arenas_.try_emplace(h.region->name, "region-" + h.region->name, huge).first->second;
  }
#ifdef DAQIRI_HAVE_RDMA
  if (auto* rdma = this->rdma(h.itf->name)) {
    std::optional<memory::DeviceMemory> device;
    if (h.region->gpudirect) {
      auto m = gpudirect_memory(*h.region);
      if (!m) {
        return fail(m.error().code, "flow \"" + flow.name + "\": region \"" + h.region->name +
                                        "\" is gpudirect: " + m.error().message);
      }
      device = std::move(*m);
    }
    auto f = rdma->add_flow(flow, *h.region, arena, h.poller->epoch(), device ? &*device : nullptr);
    if (!f) return std::unexpected(f.error());
    flows_[flow.name] = {std::move(*f), h.poller};
    return {};
  }
#endif
  if (flow.match.any) {
    return fail(ErrorCode::kFailedPrecondition,
                "match any (a queue's catch-all) needs a dpdk interface", "match");
  }
  std::unique_ptr<RxFlowTask> task;
  if (flow.match.is_tcp() || flow.connect) {
    auto t =
        backends::socket::TcpRxFlow::create(flow, config::sending_ipv4(*h.itf), h.region->buf_size,
                                            h.region->num_bufs, huge, arena, h.queue->batch_size);
    if (!t) return std::unexpected(t.error());
    task = std::move(*t);
  } else {
    auto t = backends::socket::SocketRxFlow::create(flow, config::sending_ipv4(*h.itf),
                                                    h.region->buf_size, h.region->num_bufs, huge,
                                                    arena, h.queue->batch_size);
    if (!t) return std::unexpected(t.error());
    task = std::move(*t);
  }
  h.poller->add_task(task.get(), task->fds());
  flows_[flow.name] = {std::move(task), h.poller};
  spdlog::debug("flow {} installed on {}", flow.name, h.poller->name());
  return {};
}

Result<> DataPlane::remove_flow(std::string_view name) {
  std::lock_guard lock(mutex_);
  auto it = flows_.find(name);
  if (it == flows_.end()) return fail(ErrorCode::kNotFound, "flow not installed");
  std::vector<uint64_t> ids;
  for (const auto& [id, a] : attachments_) {
    if (a.rx && std::find(a.flows.begin(), a.flows.end(), name) != a.flows.end()) {
      ids.push_back(id);
    }
  }
  for (uint64_t id : ids)
    close_locked(id);
  FlowEntry& e = it->second;
#ifdef DAQIRI_HAVE_RDMA
  if (auto* rdma = this->rdma(e.flow->flow().interface)) {
    rdma->close_flow(static_cast<backends::rdma::RdmaRxFlow*>(e.flow.get()), e.poller->epoch());
  }
#endif
  ReleaseWait wait({e.poller});
  while (!let_go(name, e) && !wait.over())
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  if (!let_go(name, e)) {
    spdlog::error(
        "flow {}: not let go within {} ms (its poller, {}, has not closed its connections, or "
        "copies into a GPU ring still read its buffers): it lingers, {} lingering now; daqirid "
        "reports NOT_SERVING until it is let go",
        name, kReleaseWait.count(), e.poller->name(), lingering_.size() + 1);
    lingering_.emplace_back(std::string(name), std::move(e));
    flows_.erase(it);
    return {};
  }
  finish_removal(name, e);
  flows_.erase(it);
  return {};
}

bool DataPlane::let_go(std::string_view name, [[maybe_unused]] const FlowEntry& e) {
#ifdef DAQIRI_HAVE_RDMA
  if (rdma(e.flow->flow().interface) != nullptr &&
      !static_cast<backends::rdma::RdmaRxFlow*>(e.flow.get())
           ->released.load(std::memory_order_acquire)) {
    return false;
  }
#endif
#ifdef DAQIRI_HAVE_CUDA
  for (Attachment& a : parked_) {
    if (a.gpu && !a.retired && std::find(a.flows.begin(), a.flows.end(), name) != a.flows.end() &&
        !hand_back_when_quiet(a)) {
      return false;
    }
  }
#else
  (void)name;
#endif
  return true;
}

void DataPlane::finish_removal(std::string_view name, FlowEntry& e) {
  Poller& poller = *e.poller;
#ifdef DAQIRI_HAVE_CUDA
  if (!is_dpdk(e.flow->flow().interface)) pinned_pools_.erase(&e.flow->pool());
#endif
  Grace g;
#ifdef DAQIRI_HAVE_DPDK
  if (dpdk_ && is_dpdk(e.flow->flow().interface))
    g = dpdk_->remove_flow(e.flow.get(), poller.epoch());
#endif
#ifdef DAQIRI_HAVE_RDMA
  if (auto* rdma = this->rdma(e.flow->flow().interface)) {
    g = rdma->remove_closed_flow(static_cast<backends::rdma::RdmaRxFlow*>(e.flow.get()),
                                 poller.epoch());
  }
#endif
  if (g.epoch == nullptr) g = poller.remove_task(e.flow.get(), e.flow->fds());
  dispose(g, std::move(e.flow));
  let_parked_go(name, poller, g);
}

void DataPlane::let_parked_go(std::string_view flow, Poller& poller, const Grace& removal) {
  // The poller can no longer reach these attachments through the flow once `removal` has
  // passed, and will not come to let them go through it.
  for (Attachment& a : parked_) {
    auto f = a.rx && !a.retired ? std::find(a.flows.begin(), a.flows.end(), flow) : a.flows.end();
    if (f == a.flows.end()) continue;
    a.await(poller.unwatch(a.rx->kick_fd()));
    a.await(removal);
    a.flows.erase(f);
    a.retired = a.flows.empty();
  }
}

bool DataPlane::lingers(std::string_view flow) const {
  return std::any_of(lingering_.begin(), lingering_.end(),
                     [flow](const auto& l) { return l.first == flow; });
}

void DataPlane::reap_lingering_locked() {
  for (auto l = lingering_.begin(); l != lingering_.end();) {
    if (!let_go(l->first, l->second)) {
      ++l;
      continue;
    }
    finish_removal(l->first, l->second);
    spdlog::info("flow {}: let go at last: removed", l->first);
    l = lingering_.erase(l);
  }
}

Result<uint64_t> DataPlane::create_rx(std::string_view flow, const RxAttachOptions& options,
                                      const ReserveMemory& reserve) {
  std::lock_guard lock(mutex_);
  auto it = flows_.find(flow);
  if (it == flows_.end()) {
    return fail(ErrorCode::kNotFound, "no flow named \"" + std::string(flow) + "\"", "flow");
  }
  const core::Flow& f = it->second.flow->flow();
  const RxQueueHome& home = rx_queues_.at(f.interface + "/" + f.queue);
  if (auto ok = check_delivery(home, flow, options); !ok) return std::unexpected(ok.error());
  uint32_t ring = options.ring_size;
  if (ring == 0) ring = home.queue->ring_size;
  std::string target = (options.gpu ? "gpu " : "") + std::string(flow);
  MemoryCost gpu_ring;
  if (options.gpu) {
    // DeviceRing: descriptors and slots on the GPU; GpuRxTask: the host control block and,
    // with header-data split, the header slots.
    uint32_t header_size = home.headers ? home.headers->buf_size : 0;
    gpu_ring.gpu = uint64_t{ring} * (home.region->buf_size + sizeof(daqiri_rx_desc)) + 4096;
    gpu_ring.host = abi::RingView::bytes_for(ring, 0) + uint64_t{ring} * header_size;
  }
  auto id =
      create_rx_locked({std::string(flow)}, std::move(target), ring, options, reserve, gpu_ring);
  if (!id || !options.gpu) return id;
#ifdef DAQIRI_HAVE_CUDA
  uint32_t header_size = home.headers ? home.headers->buf_size : 0;
  if (auto ok = add_gpu_engine(attachments_.at(*id), *home.region, ring, header_size,
                               options.cuda_ipc, home.queue->busy_poll);
      !ok) {
    attachments_.erase(*id);
    return std::unexpected(ok.error());
  }
#endif
  return id;
}

Result<std::string> DataPlane::cuda_ipc_handle(uint64_t attachment_id) const {
#ifdef DAQIRI_HAVE_CUDA
  std::lock_guard lock(mutex_);
  auto it = attachments_.find(attachment_id);
  if (it != attachments_.end() && it->second.gpu && it->second.gpu->ring().legacy_ipc()) {
    return it->second.gpu->ring().ipc_handle();
  }
#else
  (void)attachment_id;
#endif
  return fail(ErrorCode::kNotFound, "no GPU ring attached with cuda_ipc");
}

Result<> DataPlane::check_delivery(const RxQueueHome& home, std::string_view flow,
                                   const RxAttachOptions& options) const {
  config::RegionKind kind = home.region->kind;
  auto refuse = [&](const std::string& why) -> Result<> {
    return fail(ErrorCode::kFailedPrecondition,
                "flow \"" + std::string(flow) + "\" is on queue " + home.itf->name + "/" +
                    home.queue->name + " (region \"" + home.region->name + "\", " +
                    config::to_string(kind) + "): " + why,
                "gpu");
  };
  if (!options.gpu) {
    if (home.region->gpudirect) {
      return refuse(
          "the NIC writes its packets into GPU memory (gpudirect): attach with a GPU "
          "ring; host memory never holds them");
    }
    if (kind == config::RegionKind::kDevice && !options.staging_pool) {
      return refuse("its packets go to GPU memory; attach with a GPU ring");
    }
#ifdef DAQIRI_HAVE_DPDK
    if (dpdk_ && home.itf->backend == config::Backend::kDpdk &&
        dpdk_->nic_splits(home.itf->name, home.queue->name)) {
      return refuse(
          "the NIC splits its frames (headers beside GPU rings, the rest in the pool): only GPU "
          "rings take them");
    }
#endif
    return {};
  }
#ifndef DAQIRI_HAVE_CUDA
  return refuse("this daqirid was built without CUDA");
#else
  if (kind != config::RegionKind::kDevice && kind != config::RegionKind::kPinned) {
    return refuse("a GPU ring needs a device or pinned region");
  }
  return {};
#endif
}

#ifdef DAQIRI_HAVE_CUDA
Result<gpu::GpuDevice*> DataPlane::gpu_of(const config::MemoryRegionConfig& region) {
  int ordinal = region.gpu < 0 ? 0 : region.gpu;
  auto dev = gpus_.find(ordinal);
  if (dev == gpus_.end()) {
    auto opened = gpu::GpuDevice::open(ordinal);
    if (!opened) return std::unexpected(opened.error());
    dev = gpus_.emplace(ordinal, std::move(*opened)).first;
  }
  return dev->second.get();
}

Result<> DataPlane::add_gpu_engine(Attachment& a, const config::MemoryRegionConfig& region,
                                   uint32_t slots, uint32_t header_size, bool cuda_ipc,
                                   bool busy_poll) {
  auto dev = gpu_of(region);
  if (!dev) return std::unexpected(dev.error());
  if (auto ok = (*dev)->make_current(); !ok) return ok;
  int ordinal = (*dev)->ordinal();
  std::vector<uint64_t> addresses;
  for (memory::BufferPool* pool : a.rx->pools()) {
    if (pool->on_device()) {
      // GPUDirect: the NIC wrote it into GPU memory; the engine gathers device to device.
      addresses.push_back(reinterpret_cast<uintptr_t>(pool->data()));
      continue;
    }
    auto reg = pinned_pools_.find(pool);
    if (reg == pinned_pools_.end()) {
      auto r = gpu::HostRegistration::create(pool->memory().data(), pool->memory().size());
      if (!r) return std::unexpected(r.error());
      reg = pinned_pools_.emplace(pool, std::move(*r)).first;
    }
    addresses.push_back(reg->second.device_address());
  }
  auto task = gpu::GpuRxTask::create(**dev, *a.rx, std::move(addresses), slots, region.buf_size,
                                     region.gpu_copy.value_or(config::GpuCopy::kGather),
                                     header_size, cuda_ipc);
  if (!task) return std::unexpected(task.error());
  if (busy_poll) (*task)->spin_while_attached();
  auto poller = gpu_pollers_.find(ordinal);
  if (poller == gpu_pollers_.end()) {
    auto p = poller_for("gpu:" + std::to_string(ordinal), -1);
    if (!p) return std::unexpected(p.error());
    poller = gpu_pollers_.emplace(ordinal, *p).first;
  }
  a.gpu = std::move(*task);
  a.gpu_poller = poller->second;
  return {};
}
#endif

Result<uint64_t> DataPlane::create_rx_queue(std::string_view interface, std::string_view queue,
                                            const RxAttachOptions& options,
                                            const ReserveMemory& reserve) {
  std::lock_guard lock(mutex_);
  std::string key = std::string(interface) + "/" + std::string(queue);
  auto home = rx_queues_.find(key);
  if (home == rx_queues_.end()) return fail(ErrorCode::kNotFound, "no RX queue " + key, "rx_queue");
  std::vector<std::string> names;
  for (const auto& [name, f] : flows_) {
    if (f.flow->flow().interface == interface && f.flow->flow().queue == queue) {
      names.push_back(name);
    }
  }
  if (names.empty()) {
    return fail(ErrorCode::kFailedPrecondition, "RX queue " + key + " has no flows to deliver",
                "rx_queue");
  }
  if (names.size() > RxAttachment::kMaxRegions) {
    return fail(ErrorCode::kResourceExhausted,
                "RX queue " + key + " carries " + std::to_string(names.size()) +
                    " flows; a queue attachment takes at most " +
                    std::to_string(RxAttachment::kMaxRegions) + ": attach to flows instead",
                "rx_queue");
  }
  if (options.gpu) {
    return fail(ErrorCode::kFailedPrecondition,
                "a GPU ring takes one flow: attach to a flow, not a queue", "gpu");
  }
  if (auto ok = check_delivery(home->second, names.front(), options); !ok) {
    return std::unexpected(ok.error());
  }
  uint32_t ring = options.ring_size ? options.ring_size : home->second.queue->ring_size;
  return create_rx_locked(std::move(names), "queue " + key, ring, options, reserve);
}

Result<uint64_t> DataPlane::create_rx_locked(std::vector<std::string> flows, std::string target,
                                             uint32_t ring, const RxAttachOptions& options,
                                             const ReserveMemory& reserve, MemoryCost extra) {
  std::vector<memory::BufferPool*> pools;
  uint64_t pool_bufs = 0;  // of the flows' own pools, each once
  for (const auto& name : flows) {
    auto& f = flows_.find(name)->second;
    const core::BlockPolicy& block = f.flow->flow().allow_block;
    if (options.backpressure == Backpressure::kBlock && !block.allows(options.user)) {
      return fail(ErrorCode::kPermissionDenied,
                  "flow \"" + name + "\" lets " +
                      (block.nobody() ? std::string("no client")
                                      : "no client but those its allow_block names") +
                      " hold it back: attach without block (a full ring then drops for you "
                      "alone)",
                  "backpressure");
    }
    if (options.compact && f.flow->carries_connections()) {
      return fail(ErrorCode::kFailedPrecondition,
                  "flow \"" + name +
                      "\" delivers connections (TCP or RDMA), whose numbers compact descriptors "
                      "do not carry: attach without compact",
                  "compact");
    }
    // Claimed or not: each may be claimed later, and a flow delivers to so many at most.
    if (size_t held = rx_attachments_of(name); held >= kMaxAttachmentsPerFlow) {
      return fail(ErrorCode::kResourceExhausted, "flow \"" + name + "\" already has " +
                                                     std::to_string(held) +
                                                     " attachments, the most one flow takes (" +
                                                     std::to_string(kMaxAttachmentsPerFlow) + ")");
    }
    // Flows of one DPDK queue share its pool: one region in the attachment's table.
    if (std::find(pools.begin(), pools.end(), &f.flow->pool()) == pools.end()) {
      pools.push_back(&f.flow->pool());
      pool_bufs += f.flow->pool().num_bufs();
    }
    if (memory::BufferPool* window = f.flow->remote_window()) pools.push_back(window);
  }
  if (ring < 64 || ring > (1u << 20) || (ring & (ring - 1)) != 0) {
    return fail(ErrorCode::kInvalidArgument,
                "ring_size must be a power of two from 64 to 1048576, got " + std::to_string(ring),
                "ring_size");
  }
  if (ring > pool_bufs) {
    return fail(ErrorCode::kInvalidArgument,
                "ring_size " + std::to_string(ring) + " is more than the " +
                    std::to_string(pool_bufs) + " buffers its flows' pools hold",
                "ring_size");
  }
  extra.host += RxAttachment::footprint(ring, options.compact);
  if (reserve) {
    if (auto ok = reserve(extra); !ok) return std::unexpected(ok.error());
  }
  uint64_t id = next_id_++;
  auto rx = RxAttachment::create(id, ring, options.backpressure, std::move(pools), options.compact);
  if (!rx) return std::unexpected(rx.error());
  Attachment a;
  a.rx = std::move(*rx);
  a.flows = std::move(flows);
  a.target = std::move(target);
  attachments_.emplace(id, std::move(a));
  return id;
}

Result<uint64_t> DataPlane::create_tx(std::string_view interface, std::string_view queue,
                                      bool client_kicks, const ReserveMemory& reserve) {
  std::lock_guard lock(mutex_);
  TxQueueHome* home = nullptr;
  for (auto& [key, h] : tx_queues_) {
    if (h->itf->name == interface && (queue.empty() || h->queue->name == queue)) {
      home = h.get();
      break;
    }
  }
  if (!home) {
    return fail(ErrorCode::kNotFound,
                "no TX queue " + std::string(interface) + "/" +
                    (queue.empty() ? std::string("*") : std::string(queue)),
                "queue");
  }
  if (reserve) {
    MemoryCost cost{TxAttachment::footprint(home->region->buf_size, home->region->num_bufs,
                                            home->queue->ring_size),
                    0};
    if (auto ok = reserve(cost); !ok) return std::unexpected(ok.error());
  }
  uint64_t id = next_id_++;
  // DPDK queues take Ethernet/IPv4/UDP frames, as socket queues do.
  TxRules rules = home->task ? home->task->rules() : TxRules{frame::kUdpHeaders, false};
  auto tx = TxAttachment::create(
      id, home->region->buf_size, home->region->num_bufs, home->queue->ring_size,
      home->region->kind == config::RegionKind::kHuge, rules, client_kicks);
  if (!tx) return std::unexpected(tx.error());
  Attachment a;
  a.tx = std::move(*tx);
  a.tx_home = home;
  attachments_.emplace(id, std::move(a));
  return id;
}

namespace {

// A duplicate of one of the daemon's eventfds for the client, or the reason there is none.
Result<UniqueFd> dup_for_client(int fd, const char* what) {
  UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!copy) return fail_errno(std::string("dup ") + what);
  return copy;
}

}  // namespace

Result<AttachmentShare> DataPlane::activate(uint64_t id) {
  std::lock_guard lock(mutex_);
  auto it = attachments_.find(id);
  if (it == attachments_.end()) return fail(ErrorCode::kNotFound, "attachment is gone");
  Attachment& a = it->second;
  // Everything that can fail comes first, into `share`: nothing is visible to a poller until
  // all of it succeeded, and a failure leaves the attachment as it was (closed as unclaimed).
  auto share = a.active ? share_of(id, a) : prepare_activation(id, a);
  if (!share || a.active) return share;
  if (auto ok = install(a); !ok) return std::unexpected(ok.error());
  a.active = true;
  if (a.rx) rebalance_shares();
  return share;
}

uint32_t DataPlane::lendable(FlowEntry& f) const {
  const core::Flow& flow = f.flow->flow();
  const RxQueueHome& home = rx_queues_.at(flow.interface + "/" + flow.queue);
  uint32_t bufs = f.flow->pool().num_bufs();
  uint32_t batch = home.queue->batch_size;
  // The kernel socket backend takes buffers only to receive into them; a NIC (DPDK) or an
  // RDMA interface keeps a ring of them posted, and a poll takes a burst more.
  uint32_t reserve =
      home.itf->backend == config::Backend::kSocket ? 0 : home.queue->ring_size + batch;
  return bufs > reserve + batch ? bufs - reserve : batch;
}

void DataPlane::rebalance_shares() {
  // Per pool: what clients may hold of it between them, and how many claimed attachments
  // draw on it. Each gets an equal part, the smallest over its pools; a lone one gets all.
  struct PoolUse {
    uint32_t lendable = 0;
    uint32_t users = 0;
  };
  std::map<const memory::BufferPool*, PoolUse> use;
  auto pools_of = [&](const Attachment& a) {
    std::vector<std::pair<const memory::BufferPool*, FlowEntry*>> out;
    for (const auto& name : a.flows) {
      FlowEntry& f = flows_.at(name);
      const memory::BufferPool* p = &f.flow->pool();
      if (std::none_of(out.begin(), out.end(), [&](const auto& e) { return e.first == p; })) {
        out.emplace_back(p, &f);
      }
    }
    return out;
  };
  for (const auto& [id, a] : attachments_) {
    if (!a.rx || !a.active) continue;
    for (auto [pool, f] : pools_of(a)) {
      PoolUse& u = use[pool];
      u.lendable = lendable(*f);
      ++u.users;
    }
  }
  for (auto& [id, a] : attachments_) {
    if (!a.rx || !a.active) continue;
    uint32_t share = UINT32_MAX;
    for (auto [pool, f] : pools_of(a)) {
      const PoolUse& u = use.at(pool);
      share = std::min(share, std::max(1u, u.lendable / u.users));
    }
    a.rx->set_share(share);
  }
}

Result<> DataPlane::install(Attachment& a) {
  if (a.rx) {
#ifdef DAQIRI_HAVE_CUDA
    if (a.gpu) a.gpu_poller->add_task(a.gpu.get(), {a.gpu->wake_fd()});
#endif
    if (add_rx(a)) return {};
#ifdef DAQIRI_HAVE_CUDA
    if (a.gpu) a.await(a.gpu_poller->remove_task(a.gpu.get(), {a.gpu->wake_fd()}));
#endif
    // Unreachable while prepare_activation's check and this run under one lock.
    return fail(ErrorCode::kResourceExhausted, "a flow of the attachment is full");
  }
  Poller& poller = *a.tx_home->poller;
  poller.watch(a.tx->kick_fd(), &a.tx->counters.kicks);
  Result<> ok;
  if (a.tx_home->task) {
    ok = a.tx_home->task->add(a.tx.get(), poller.epoch());
  } else {
#ifdef DAQIRI_HAVE_DPDK
    ok = dpdk_->add_tx(a.tx_home->itf->name, a.tx_home->queue->name, a.tx.get(), poller.epoch());
#endif
  }
  if (!ok) a.await(poller.unwatch(a.tx->kick_fd()));
  return ok;
}

Result<AttachmentShare> DataPlane::prepare_activation(uint64_t id, const Attachment& a) const {
  if (a.rx) {
    for (const auto& name : a.flows) {
      if (flows_.at(name).flow->fanout().full()) {
        return fail(ErrorCode::kResourceExhausted, "flow \"" + name + "\" already delivers to " +
                                                       std::to_string(kMaxAttachmentsPerFlow) +
                                                       " attachments, the most one flow takes");
      }
    }
  }
  return share_of(id, a);
}

Result<AttachmentShare> DataPlane::share_of(uint64_t id, const Attachment& a) const {
  AttachmentShare share;
  share.id = id;
  share.rx = a.rx != nullptr;
  memory::SharedMemory& rings = a.rx ? a.rx->rings() : a.tx->rings();
  auto rings_fd = rings.shared_fd();
  if (!rings_fd) return std::unexpected(rings_fd.error());
  share.rings_fd = std::move(*rings_fd);
  share.rings_size = rings.size();
#ifdef DAQIRI_HAVE_CUDA
  if (a.gpu) {
    auto ctl = a.gpu->control().shared_fd();
    if (!ctl) return std::unexpected(ctl.error());
    share.rings_fd = std::move(*ctl);
    share.rings_size = a.gpu->control().size();
    auto event = dup_for_client(a.gpu->client_eventfd(), "eventfd");
    if (!event) return std::unexpected(event.error());
    share.event_fd = std::move(*event);
    if (a.gpu->ring().legacy_ipc()) {
      share.gpu_ipc = true;
    } else {
      auto vmm = a.gpu->ring().export_fd();
      if (!vmm) return std::unexpected(vmm.error());
      share.gpu_fd = std::move(*vmm);
    }
    if (const memory::SharedMemory* h = a.gpu->headers()) {
      // Header-data split: the header slots, read-only, as the attachment's one region.
      auto ro = h->read_only_fd();
      if (!ro) return std::unexpected(ro.error());
      uint32_t slots = a.gpu->ring().info().size;
      share.regions.push_back(
          {std::move(*ro), h->size(), a.gpu->ring().info().header_size, slots, false});
    }
    share.gpu = a.gpu->ring().info();
    return share;
  }
#endif
  const int event_fd = a.rx ? a.rx->eventfd() : a.tx->eventfd();
  const int kick_fd = a.rx ? a.rx->kick_fd() : a.tx->kick_fd();
  auto event = dup_for_client(event_fd, "eventfd");
  if (!event) return std::unexpected(event.error());
  share.event_fd = std::move(*event);
  auto kick = dup_for_client(kick_fd, "kick eventfd");
  if (!kick) return std::unexpected(kick.error());
  share.kick_fd = std::move(*kick);
  if (a.rx) {
    for (memory::BufferPool* pool : a.rx->pools()) {
      auto ro = pool->memory().read_only_fd();
      if (!ro) return std::unexpected(ro.error());
      share.regions.push_back(
          {std::move(*ro), pool->memory().size(), pool->buf_size(), pool->num_bufs(), false});
    }
    return share;
  }
  share.completion_offset = a.tx->completion_offset();
  auto buf_fd = a.tx->buffers().shared_fd();
  if (!buf_fd) return std::unexpected(buf_fd.error());
  share.regions.push_back(
      {std::move(*buf_fd), a.tx->buffers().size(), a.tx->buf_size(), a.tx->num_bufs(), true});
  return share;
}

size_t DataPlane::rx_attachments_of(std::string_view flow) const {
  return static_cast<size_t>(
      std::count_if(attachments_.begin(), attachments_.end(), [&](const auto& e) {
        const Attachment& a = e.second;
        return a.rx && std::find(a.flows.begin(), a.flows.end(), flow) != a.flows.end();
      }));
}

std::vector<Poller*> DataPlane::rx_pollers(const Attachment& a) const {
  std::vector<Poller*> out;
  for (const auto& name : a.flows) {
    auto f = flows_.find(name);
    if (f == flows_.end()) continue;
    Poller* p = f->second.poller;
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

bool DataPlane::add_rx(Attachment& a) {
  // The kick wakes the pollers of its flows (one for a flow, or a queue's flows).
  for (Poller* p : rx_pollers(a))
    p->watch(a.rx->kick_fd(), &a.rx->counters.kicks);
  for (size_t i = 0; i < a.flows.size(); ++i) {
    FlowEntry& f = flows_.at(a.flows[i]);
    if (f.flow->fanout().add(a.rx.get(), f.poller->epoch())) continue;
    remove_rx(a, i);
    return false;
  }
  return true;
}

void DataPlane::remove_rx(Attachment& a, size_t flows) {
  for (size_t i = 0; i < flows; ++i) {
    auto f = flows_.find(a.flows[i]);  // a parked attachment may outlive its flow
    if (f != flows_.end()) {
      a.await(f->second.flow->fanout().remove(a.rx.get(), f->second.poller->epoch()));
    }
  }
  for (Poller* p : rx_pollers(a))
    a.await(p->unwatch(a.rx->kick_fd()));
}

DataPlane::ReleaseWait::ReleaseWait(const std::vector<Poller*>& pollers)
    : deadline_(std::chrono::steady_clock::now() + kReleaseWait) {
  for (Poller* p : pollers)
    counts_.emplace_back(&p->epoch(), p->epoch().count());
}

bool DataPlane::ReleaseWait::over() {
  if (std::any_of(counts_.begin(), counts_.end(), [](const auto& c) { return c.first->stuck(); })) {
    return true;
  }
  if (std::chrono::steady_clock::now() <= deadline_) return false;
  for (const auto& [epoch, then] : counts_)
    epoch->mark_stuck_if_still(then);
  return true;
}

void DataPlane::close(uint64_t id) {
  std::unique_lock lock(mutex_);
  reap_parked_locked();
  auto it = attachments_.find(id);
  if (it == attachments_.end() || it->second.closing) return;  // gone, or another closes it
  if (erased_unclaimed(it)) return;
  begin_close(id, it->second);
  ReleaseWait wait(pollers_of(it->second));
  // The wait is outside the lock, a look under it at a time: stats, scrapes and other clients'
  // calls go on meanwhile, and a flow removal that finishes this close first is seen.
  for (;;) {
    hand_back_when_quiet(it->second);
    bool released = it->second.lifecycle().released.load(std::memory_order_acquire);
    if (released || wait.over()) {
      finish_close(it, released);
      return;
    }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    lock.lock();
    it = attachments_.find(id);
    if (it == attachments_.end()) return;
  }
}

void DataPlane::close_locked(uint64_t id) {
  auto it = attachments_.find(id);
  if (it == attachments_.end() || erased_unclaimed(it)) return;
  if (!it->second.closing) begin_close(id, it->second);
  const AttachmentLifecycle& life = it->second.lifecycle();
  ReleaseWait wait(pollers_of(it->second));
  bool released = false;
  while (!(hand_back_when_quiet(it->second) &&
           (released = life.released.load(std::memory_order_acquire))) &&
         !wait.over()) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  finish_close(it, released);
}

bool DataPlane::erased_unclaimed(std::map<uint64_t, Attachment>::iterator it) {
  if (it->second.active) return false;
  drop(it, "its activation was undone");  // no poller saw it, unless one stuck in an undo
  return true;
}

void DataPlane::drop(std::map<uint64_t, Attachment>::iterator it, const char* why) {
  Attachment& a = it->second;
  if (!a.unseen()) {
    std::string pollers;
    for (const Grace& g : a.awaiting) {
      for (const auto& p : pollers_) {
        if (&p->epoch() == g.epoch) pollers += (pollers.empty() ? "" : ", ") + p->name();
      }
    }
    spdlog::error(
        "attachment {} ({}): {}, but its poller ({}) has not come round within {} ms: parked, {} "
        "parked now; daqirid reports NOT_SERVING until it does",
        it->first, target_of(a), why, pollers, Epoch::kGraceWait.count(), parked_.size() + 1);
    parked_.push_back(std::move(a));
  }
  attachments_.erase(it);
}

void DataPlane::begin_close(uint64_t id, Attachment& a) {
  a.closing = true;
#ifdef DAQIRI_HAVE_CUDA
  if (a.gpu) {
    a.gpu_removal = a.gpu_poller->remove_task(a.gpu.get(), {a.gpu->wake_fd()});
    a.await(a.gpu_removal);
    const gpu::GpuCopyCounters& c = a.gpu->counters;
    spdlog::info("gpu ring of attachment {} closed: {} frames, {} of them in {} copy-engine runs",
                 id, c.packets.load(), c.dma_frames.load(), c.dma_copies.load());
  }
#else
  (void)id;
#endif
  hand_back_when_quiet(a);
}

bool DataPlane::hand_back_when_quiet(Attachment& a) {
  AttachmentLifecycle& life = a.lifecycle();
  if (life.closing.load(std::memory_order_relaxed)) return true;
#ifdef DAQIRI_HAVE_CUDA
  // The engine first: no copy may still read a buffer the RX poller is about to take back,
  // and its poller, once past the removal, launches no more.
  if (a.gpu && (!a.gpu_removal.reached() || !a.gpu->quiesced())) return false;
#endif
  life.closing.store(true, std::memory_order_release);
  // The poller returns every buffer and lets go; woken, a sleeping one need not finish its
  // park (up to 1 ms) first.
  for (Poller* p : pollers_of(a))
    p->epoch().wake();
  return true;
}

std::vector<Poller*> DataPlane::pollers_of(const Attachment& a) const {
  std::vector<Poller*> pollers = a.rx ? rx_pollers(a) : std::vector<Poller*>{a.tx_home->poller};
#ifdef DAQIRI_HAVE_CUDA
  if (a.gpu) pollers.push_back(a.gpu_poller);
#endif
  return pollers;
}

void DataPlane::finish_close(std::map<uint64_t, Attachment>::iterator it, bool released) {
  Attachment& a = it->second;
  if (!released) {
    // Its poller still has it (a NIC that never completes its TX, a poller that does not
    // come round): freeing it now would be a use after free. It stays, out of the table,
    // until its poller lets go (reap_parked_locked), and the daemon reports itself unhealthy.
    std::string pollers;
    for (Poller* p : pollers_of(a))
      pollers += (pollers.empty() ? "" : ", ") + p->name();
    spdlog::error(
        "attachment {} ({}) was not let go by its poller ({}) within {} ms: parked, {} parked "
        "now; daqirid reports NOT_SERVING until it is let go",
        it->first, target_of(a), pollers, kReleaseWait.count(), parked_.size() + 1);
    parked_.push_back(std::move(a));
    attachments_.erase(it);
    return;
  }
  retire(a);
  bool rx = a.rx != nullptr;
  drop(it, "let go by its poller and taken out of its sets");
  if (rx) rebalance_shares();
}

void DataPlane::retire(Attachment& a) {
  a.retired = true;
  if (a.rx) {
    remove_rx(a, a.flows.size());
    return;
  }
  a.await(a.tx_home->poller->unwatch(a.tx->kick_fd()));
  if (a.tx_home->task) {
    a.await(a.tx_home->task->remove(a.tx.get(), a.tx_home->poller->epoch()));
  } else {
#ifdef DAQIRI_HAVE_DPDK
    a.await(dpdk_->remove_tx(a.tx_home->itf->name, a.tx_home->queue->name, a.tx.get(),
                             a.tx_home->poller->epoch()));
#endif
  }
}

void DataPlane::reap_parked_locked() {
  // Lingering flows first: their removal decides when their parked attachments may go.
  reap_lingering_locked();
  for (const auto& p : pollers_)
    p->epoch().reap();
  bool any = false;
  for (Attachment& a : parked_) {
    if (a.retired || !hand_back_when_quiet(a) ||
        !a.lifecycle().released.load(std::memory_order_acquire)) {
      continue;
    }
    // Still in a lingering flow's published set: it goes with the flow's removal.
    if (a.rx && std::any_of(a.flows.begin(), a.flows.end(),
                            [this](const std::string& f) { return lingers(f); })) {
      continue;
    }
    retire(a);
    any = true;
  }
  auto freed = std::partition(parked_.begin(), parked_.end(),
                              [](const Attachment& a) { return !a.retired || !a.unseen(); });
  for (auto p = freed; p != parked_.end(); ++p)
    spdlog::info("a parked attachment ({}) was let go by its pollers at last: freed",
                 target_of(*p));
  any |= freed != parked_.end();
  parked_.erase(freed, parked_.end());
  if (any) rebalance_shares();
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

std::vector<uint64_t> DataPlane::violated() const {
  std::lock_guard lock(mutex_);
  std::vector<uint64_t> out;
  for (const auto& [id, a] : attachments_) {
    if (a.lifecycle().violated.load(std::memory_order_acquire)) out.push_back(id);
  }
  return out;
}

std::vector<FlowStats> DataPlane::flow_stats() const {
  std::lock_guard lock(mutex_);
  std::vector<FlowStats> out;
  for (const auto& [name, f] : flows_) {
    const auto& c = f.flow->counters;
    FlowStats s;
    s.name = name;
    s.interface = f.flow->flow().interface;
    s.queue = f.flow->flow().queue;
    s.packets = c.packets.load(std::memory_order_relaxed);
    s.bytes = c.bytes.load(std::memory_order_relaxed);
    s.no_attachment = c.no_attachment.load(std::memory_order_relaxed);
    s.rings_full = c.rings_full.load(std::memory_order_relaxed);
    s.filtered = c.filtered.load(std::memory_order_relaxed);
    s.truncated = c.truncated.load(std::memory_order_relaxed);
    s.kernel_drops = f.flow->kernel_drops();
    s.no_buffer = c.no_buffer.load(std::memory_order_relaxed);
    s.overflow = c.overflow.load(std::memory_order_relaxed);
    s.buffers_total = f.flow->pool().num_bufs();
    s.buffers_on_loan = c.on_loan.load(std::memory_order_relaxed);
    s.connections = c.connections.load(std::memory_order_relaxed);
    s.attachments = f.flow->fanout().size();
    s.steering = f.flow->steering();
    out.push_back(s);
  }
  return out;
}

std::string DataPlane::target_of(const Attachment& a) {
  return a.rx ? a.target : a.tx_home->itf->name + "/" + a.tx_home->queue->name;
}

std::string DataPlane::target(uint64_t id) const {
  std::lock_guard lock(mutex_);
  auto it = attachments_.find(id);
  return it == attachments_.end() ? std::string() : target_of(it->second);
}

std::vector<AttachmentStats> DataPlane::attachment_stats() const {
  std::lock_guard lock(mutex_);
  std::vector<AttachmentStats> out;
  for (const auto& [id, a] : attachments_) {
    const AttachmentCounters& c = a.counters();
    AttachmentStats s;
    s.id = id;
    s.rx = a.rx != nullptr;
    s.target = target_of(a);
    if (!a.rx) {
      s.interface = a.tx_home->itf->name;
      s.queue = a.tx_home->queue->name;
    }
    s.packets = c.packets.load(std::memory_order_relaxed);
    s.bytes = c.bytes.load(std::memory_order_relaxed);
    s.dropped_ring_full = c.dropped_ring_full.load(std::memory_order_relaxed);
    s.dropped_no_buffer = c.dropped_no_buffer.load(std::memory_order_relaxed);
    s.bad_index = c.bad_index.load(std::memory_order_relaxed);
    s.bad_descriptor = c.bad_descriptor.load(std::memory_order_relaxed);
    s.send_errors = c.send_errors.load(std::memory_order_relaxed);
    s.refused = c.refused.load(std::memory_order_relaxed);
    s.dropped_over_share = c.dropped_over_share.load(std::memory_order_relaxed);
    if (a.rx) s.share = std::min(a.rx->share(), a.rx->ring().size());
    s.on_loan = c.on_loan.load(std::memory_order_relaxed);
    s.stalls = c.stalls.load(std::memory_order_relaxed);
    s.kicks = c.kicks.load(std::memory_order_relaxed);
    s.violated = a.lifecycle().violated.load(std::memory_order_relaxed);
    s.claimed = a.active;
    const abi::RingView* ring = a.rx ? &a.rx->ring() : &a.tx->tx_ring();
#ifdef DAQIRI_HAVE_CUDA
    if (a.gpu) {
      s.gpu = true;
      s.gpu_packets = a.gpu->counters.packets.load(std::memory_order_relaxed);
      s.gpu_bytes = a.gpu->counters.bytes.load(std::memory_order_relaxed);
      s.gpu_copy_latency = a.gpu->counters.latency.snapshot();
      ring = &a.gpu->control_ring();
    }
#endif
    // Client-written indices: a scribbling client shows as a full ring, never more.
    s.ring_size = ring->size();
    s.ring_used = std::min(ring->load_producer() - ring->load_consumer(), ring->size());
    out.push_back(s);
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

std::optional<Steering> DataPlane::steering(std::string_view flow) const {
  std::lock_guard lock(mutex_);
  auto it = flows_.find(flow);
  if (it == flows_.end()) return std::nullopt;
  return it->second.flow->steering();
}

std::vector<NicStats> DataPlane::nic_stats() const {
  std::vector<NicStats> out;
#ifdef DAQIRI_HAVE_DPDK
  if (dpdk_) out = dpdk_->nic_stats();
#endif
#ifdef DAQIRI_HAVE_RDMA
  for (const auto& [name, itf] : rdma_)
    out.push_back(itf->stats());
#endif
  return out;
}

std::string DataPlane::interface_state(const std::string& interface) const {
#ifdef DAQIRI_HAVE_DPDK
  if (dpdk_ && is_dpdk(interface)) return dpdk_->link_state(interface);
#endif
#ifdef DAQIRI_HAVE_RDMA
  if (auto* rdma = this->rdma(interface)) return rdma->state();
#endif
  (void)interface;
  return "configured";
}

std::optional<config::RegionKind> DataPlane::rx_region_kind(uint64_t id) const {
  std::lock_guard lock(mutex_);
  auto a = attachments_.find(id);
  if (a == attachments_.end() || !a->second.rx || a->second.flows.empty()) return std::nullopt;
  auto f = flows_.find(a->second.flows.front());
  if (f == flows_.end()) return std::nullopt;
  const core::Flow& flow = f->second.flow->flow();
  auto home = rx_queues_.find(flow.interface + "/" + flow.queue);
  if (home == rx_queues_.end()) return std::nullopt;
  return home->second.region->kind;
}

std::string DataPlane::delivery(const std::string& interface, const std::string& queue) const {
#ifdef DAQIRI_HAVE_DPDK
  if (dpdk_ && is_dpdk(interface)) return dpdk_->delivery(interface, queue);
#endif
#ifdef DAQIRI_HAVE_RDMA
  if (rdma(interface)) {
    auto home = rx_queues_.find(interface + "/" + queue);
    bool gpudirect = home != rx_queues_.end() && home->second.region->gpudirect;
    return gpudirect ? "zero-copy into GPU memory (RDMA, dma-buf)" : "zero-copy (RDMA)";
  }
#endif
  (void)queue;
  (void)interface;
  return "socket";
}

}  // namespace daqiri::dataplane
