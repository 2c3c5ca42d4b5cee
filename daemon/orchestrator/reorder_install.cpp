#include <spdlog/spdlog.h>

#include <algorithm>

#include "orchestrator/data_plane.hpp"
#include "reorder/reorder_flow.hpp"
#include "reorder/reorder_home.hpp"

namespace daqiri::orchestrator {
namespace {

// A client ring of a reorder: as many slots as it has batches, within the ring limits.
uint32_t reorder_ring(uint32_t num_bufs) {
  uint32_t ring = DataPlane::kMinRing;
  while (ring * 2 <= std::min<uint32_t>(num_bufs, 1024))
    ring *= 2;
  return ring;
}

}  // namespace

Result<> DataPlane::add_reorder(const config::ReorderConfig& r) {
  std::lock_guard lock(mutex_);
  const config::MemoryRegionConfig* out = config::find_region(config_, r.region);
  if (out == nullptr) return fail(ErrorCode::kNotFound, "no memory region \"" + r.region + "\"");
  if (!reorder_home_) {
    reorder_home_ = std::make_unique<reorder::ReorderHome>(backends::BackendContext{
        config_, [this](const std::string& name, int core) { return poller_for(name, core); },
        [](const config::MemoryRegionConfig&) -> Result<memory::DeviceMemory> {
          return fail(ErrorCode::kFailedPrecondition, "a reorder's pool is host memory");
        }});
  }
  // The daemon's own attachment on each source flow: it takes every frame, as a client would.
  std::vector<uint64_t> made;
  auto undo = [&] {
    for (uint64_t id : made)
      close_locked(id);
  };
  std::vector<dataplane::RxAttachment*> sources;
  const FlowEntry* first = nullptr;
  for (const auto& name : r.flows) {
    auto f = flows_.find(name);
    if (f == flows_.end()) {
      undo();
      return fail(ErrorCode::kNotFound, "flow \"" + name + "\" is not installed");
    }
    if (first == nullptr) first = &f->second;
    auto id = create_rx_locked({name}, "reorder " + r.name, f->second.queue->home.queue->ring_size,
                               RxAttachOptions{}, {});
    if (!id) {
      undo();
      return std::unexpected(id.error());
    }
    made.push_back(*id);
    Attachment& a = attachments_.at(*id);
    if (auto ok = install(a); !ok) {
      undo();
      return ok;
    }
    a.active = true;
    sources.push_back(a.rx.get());
  }
  if (first == nullptr) return fail(ErrorCode::kInvalidArgument, "a reorder reads flows");
  rebalance_shares();

  ReorderQueue& q = reorder_queues_.emplace_back();
  q.region = *out;
  q.region.buf_size = out->buf_size + DAQIRI_BATCH_HEADER_BYTES;
  q.queue.name = "reorder:" + r.name;
  q.queue.ring_size = reorder_ring(out->num_bufs);
  q.queue.batch_size = 1;
  q.queue.regions = {out->name};
  const backends::QueueHome& source_home = first->queue->home;
  backends::QueueHome home{source_home.poller, source_home.itf, &q.queue, &q.region, nullptr};
  core::Flow flow;
  flow.name = r.name;
  flow.interface = r.interface;
  flow.queue = q.queue.name;
  flow.origin = core::FlowOrigin::kConfig;
  flow.allow_block = first->flow->flow().allow_block;
  flow.clients = first->flow->flow().clients;  // every flow's (the validator sees to it)
  auto task = reorder::ReorderFlow::create(flow, r.plan, sources, out->buf_size, out->num_bufs,
                                           out->kind == config::RegionKind::kHuge,
                                           source_home.queue->batch_size);
  if (!task) {
    undo();
    reorder_queues_.pop_back();
    return std::unexpected(task.error());
  }
  home.poller->add_task(task->get(), (*task)->fds());
  auto& entry = rx_queues_[home.key()] = {home, reorder_home_.get()};
  flows_[r.name] = {std::move(*task), &entry};
  std::string names;
  for (const auto& name : r.flows) {
    reordered_[name] = r.name;
    names += (names.empty() ? "" : ", ") + name;
  }
  spdlog::info("reorder {}: batches of {} packets from {} on {}", r.name, r.plan.packets_per_batch,
               names, home.poller->name());
  return {};
}

}  // namespace daqiri::orchestrator
