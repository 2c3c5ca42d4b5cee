#include "orchestrator/data_plane.hpp"

#include <algorithm>

#include "daqiri/ring.hpp"

namespace daqiri::orchestrator {
namespace {

std::unexpected<Error> not_admitted(const std::string& what, const Requester& who,
                                    const char* field) {
  return fail(ErrorCode::kPermissionDenied,
              what + " admits only the clients its clients list names, and " + who.user + " (uid " +
                  std::to_string(who.uid) + ") is not one",
              field);
}

// What the client asked for, else its queue's ring, at least the smallest an attachment takes:
// a queue of few large buffers (RDMA messages) may have a smaller ring than that.
uint32_t default_ring(const RxAttachOptions& options, const config::QueueConfig& queue) {
  return options.ring_size != 0 ? options.ring_size
                                : std::max(queue.ring_size, DataPlane::kMinRing);
}

}  // namespace

Result<uint64_t> DataPlane::create_rx(std::string_view flow, const RxAttachOptions& options,
                                      const ReserveMemory& reserve) {
  std::lock_guard lock(mutex_);
  auto it = flows_.find(flow);
  if (it == flows_.end()) {
    auto members = members_of(flow);
    if (!members.empty()) {
      const core::Flow& f = flows_.at(members.front()).flow->flow();
      std::string queues;
      for (const auto& q : f.rss_queues)
        queues += (queues.empty() ? "" : ", ") + q;
      return fail(ErrorCode::kFailedPrecondition,
                  "flow \"" + std::string(flow) + "\" spreads over RX queues " + queues + " of " +
                      f.interface +
                      " (RSS), each a ring of its own: attach to each queue (rx_queue)",
                  "flow");
    }
    return fail(ErrorCode::kNotFound, "no flow named \"" + std::string(flow) + "\"", "flow");
  }
  const RxQueue& queue = *it->second.queue;
  const backends::QueueHome& home = queue.home;
  if (auto ok = check_delivery(queue, flow, options); !ok) return std::unexpected(ok.error());
  uint32_t ring = default_ring(options, *home.queue);
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
  if (auto ok = add_gpu_ring(attachments_.at(*id), home, ring, options.cuda_ipc); !ok) {
    attachments_.erase(*id);
    return std::unexpected(ok.error());
  }
  return id;
}

Result<std::string> DataPlane::cuda_ipc_handle(uint64_t attachment_id) const {
  std::lock_guard lock(mutex_);
  auto it = attachments_.find(attachment_id);
  if (it == attachments_.end() || !it->second.gpu) {
    return fail(ErrorCode::kNotFound, "no GPU ring attached with cuda_ipc");
  }
  return it->second.gpu->ipc_handle();
}

Result<> DataPlane::check_delivery(const RxQueue& queue, std::string_view flow,
                                   const RxAttachOptions& options) const {
  const backends::QueueHome& home = queue.home;
  config::RegionKind kind = home.region->kind;
  auto refuse = [&](const std::string& why) -> Result<> {
    return fail(ErrorCode::kFailedPrecondition,
                "flow \"" + std::string(flow) + "\" is on queue " + home.key() + " (region \"" +
                    home.region->name + "\", " + config::to_string(kind) + "): " + why,
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
    if (queue.backend->traits(home).nic_splits) {
      return refuse(
          "the NIC splits its frames (headers beside GPU rings, the rest in the pool): only GPU "
          "rings take them");
    }
    return {};
  }
  if (!gpu_engine_) return refuse("this daqirid was built without CUDA");
  if (kind != config::RegionKind::kDevice && kind != config::RegionKind::kPinned) {
    return refuse("a GPU ring needs a device or pinned region");
  }
  return {};
}

Result<> DataPlane::add_gpu_ring(Attachment& a, const backends::QueueHome& home, uint32_t slots,
                                 bool cuda_ipc) {
  uint32_t header_size = home.headers ? home.headers->buf_size : 0;
  auto ring = gpu_engine_->create_ring(*a.rx, *home.region, slots, header_size, cuda_ipc,
                                       home.queue->busy_poll);
  if (!ring) return std::unexpected(ring.error());
  auto poller = gpu_poller((*ring)->gpu());
  if (!poller) return std::unexpected(poller.error());
  a.gpu = std::move(*ring);
  a.gpu_poller = *poller;
  return {};
}

Result<Poller*> DataPlane::gpu_poller(int ordinal) {
  auto poller = gpu_pollers_.find(ordinal);
  if (poller == gpu_pollers_.end()) {
    auto p = poller_for("gpu:" + std::to_string(ordinal), -1);
    if (!p) return std::unexpected(p.error());
    poller = gpu_pollers_.emplace(ordinal, *p).first;
  }
  return poller->second;
}

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
  if (names.size() > dataplane::RxAttachment::kMaxRegions) {
    return fail(ErrorCode::kResourceExhausted,
                "RX queue " + key + " carries " + std::to_string(names.size()) +
                    " flows; a queue attachment takes at most " +
                    std::to_string(dataplane::RxAttachment::kMaxRegions) +
                    ": attach to flows instead",
                "rx_queue");
  }
  if (options.gpu) {
    return fail(ErrorCode::kFailedPrecondition,
                "a GPU ring takes one flow: attach to a flow, not a queue", "gpu");
  }
  if (auto ok = check_delivery(home->second, names.front(), options); !ok) {
    return std::unexpected(ok.error());
  }
  uint32_t ring = default_ring(options, *home->second.home.queue);
  return create_rx_locked(std::move(names), "queue " + key, ring, options, reserve);
}

Result<uint64_t> DataPlane::create_rx_locked(std::vector<std::string> flows, std::string target,
                                             uint32_t ring, const RxAttachOptions& options,
                                             const ReserveMemory& reserve, MemoryCost extra) {
  std::vector<memory::BufferPool*> pools;
  uint64_t pool_bufs = 0;  // of the flows' own pools, each once
  for (const auto& name : flows) {
    auto& f = flows_.find(name)->second;
    if (!options.who.admitted_by(f.flow->flow().clients)) {
      return not_admitted("flow \"" + name + "\"", options.who, "flow");
    }
    const core::BlockPolicy& block = f.flow->flow().allow_block;
    if (options.backpressure == Backpressure::kBlock && !block.allows(options.who.user)) {
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
    if (size_t held = rx_attachments_of(name); held >= dataplane::kMaxAttachmentsPerFlow) {
      return fail(ErrorCode::kResourceExhausted,
                  "flow \"" + name + "\" already has " + std::to_string(held) +
                      " attachments, the most one flow takes (" +
                      std::to_string(dataplane::kMaxAttachmentsPerFlow) + ")");
    }
    // Flows of one DPDK queue share its pool: one region in the attachment's table.
    if (std::find(pools.begin(), pools.end(), &f.flow->pool()) == pools.end()) {
      pools.push_back(&f.flow->pool());
      pool_bufs += f.flow->pool().num_bufs();
    }
    if (memory::BufferPool* window = f.flow->remote_window()) pools.push_back(window);
  }
  if (ring < kMinRing || ring > (1u << 20) || (ring & (ring - 1)) != 0) {
    return fail(ErrorCode::kInvalidArgument,
                "ring_size must be a power of two from 64 to 1048576, got " + std::to_string(ring),
                "ring_size");
  }
  // The smallest ring whatever the pool: a reorder's few large buffers (batches) fill one.
  if (ring > pool_bufs && ring > kMinRing) {
    return fail(ErrorCode::kInvalidArgument,
                "ring_size " + std::to_string(ring) + " is more than the " +
                    std::to_string(pool_bufs) + " buffers its flows' pools hold",
                "ring_size");
  }
  extra.host += dataplane::RxAttachment::footprint(ring, options.compact);
  if (reserve) {
    if (auto ok = reserve(extra); !ok) return std::unexpected(ok.error());
  }
  uint64_t id = next_id_++;
  auto rx = dataplane::RxAttachment::create(id, ring, options.backpressure, std::move(pools),
                                            options.compact);
  if (!rx) return std::unexpected(rx.error());
  Attachment a;
  a.rx = std::move(*rx);
  a.flows = std::move(flows);
  a.target = std::move(target);
  attachments_.emplace(id, std::move(a));
  return id;
}

Result<> DataPlane::check_sending(const TxQueue& queue, const TxAttachOptions& options) const {
  const backends::QueueHome& home = queue.home;
  auto refuse = [&](const std::string& why) -> Result<> {
    return fail(ErrorCode::kFailedPrecondition, "TX queue " + home.key() + " " + why, "gpu");
  };
  if (queue.gpu_payloads && !options.gpu) {
    return refuse("sends from GPU memory (region \"" + queue.gpu_payloads->name +
                  "\"): attach with gpu");
  }
  if (options.gpu && !queue.gpu_payloads) {
    return refuse("sends from host memory (region \"" + home.region->name +
                  "\"): attach without gpu, or to a queue with a device region");
  }
  if (options.gpu && !gpu_engine_)
    return refuse("sends from GPU memory: this daqirid was built without CUDA");
  return {};
}

Result<uint64_t> DataPlane::create_tx(std::string_view interface, std::string_view queue,
                                      const TxAttachOptions& options,
                                      const ReserveMemory& reserve) {
  std::lock_guard lock(mutex_);
  TxQueue* tx = nullptr;
  for (auto& [key, q] : tx_queues_) {
    if (q.home.itf->name == interface && (queue.empty() || q.home.queue->name == queue)) {
      tx = &q;
      break;
    }
  }
  if (!tx) {
    return fail(ErrorCode::kNotFound,
                "no TX queue " + std::string(interface) + "/" +
                    (queue.empty() ? std::string("*") : std::string(queue)),
                "queue");
  }
  const backends::QueueHome& home = tx->home;
  if (!options.who.admitted_by(home.queue->clients)) {
    return not_admitted("TX queue " + home.key(), options.who, "queue");
  }
  // Claimed or not, as a flow's: each may be claimed later.
  if (size_t held = tx_attachments_of(tx); held >= home.queue->max_clients) {
    return fail(ErrorCode::kResourceExhausted, "TX queue " + home.key() + " already has " +
                                                   std::to_string(held) +
                                                   " attachments, its max_clients");
  }
  if (auto ok = check_sending(*tx, options); !ok) return std::unexpected(ok.error());
  const uint32_t ring = home.queue->ring_size;
  const uint32_t num_bufs = home.region->num_bufs;
  const uint32_t header_size = tx->gpu_headers ? tx->gpu_headers->buf_size : 0;
  if (reserve) {
    MemoryCost cost{dataplane::TxAttachment::footprint(header_size, num_bufs, ring), 0};
    if (!tx->gpu_payloads) {
      cost.host = dataplane::TxAttachment::footprint(home.region->buf_size, num_bufs, ring);
    } else {
      // The client's ring and header buffers, its GPU buffers, and staged, the frames the
      // queue sends.
      cost.gpu = uint64_t{tx->gpu_payloads->buf_size} * num_bufs;
      if (!tx->gpu_in_place()) {
        cost.host += dataplane::TxAttachment::footprint(home.region->buf_size, num_bufs, ring);
      }
    }
    if (auto ok = reserve(cost); !ok) return std::unexpected(ok.error());
  }
  uint64_t id = next_id_++;
  Attachment a;
  a.tx_queue = tx;
  if (!tx->gpu_payloads) {
    auto attachment = dataplane::TxAttachment::create(
        id, home.region->buf_size, num_bufs, ring, home.region->kind == config::RegionKind::kHuge,
        tx->task->rules(), options.client_kicks);
    if (!attachment) return std::unexpected(attachment.error());
    a.tx = std::move(*attachment);
    attachments_.emplace(id, std::move(a));
    return id;
  }
  // From GPU memory the client's own ring takes frames of header and GPU bytes. Staged, its
  // send times go through to the queue's attachment, which holds each frame till then.
  dataplane::TxRules rules = tx->task->rules();
  rules.max_length = header_size + tx->gpu_payloads->buf_size;
  if (!tx->gpu_in_place()) rules.nic_schedules = true;
  auto client = dataplane::TxAttachment::create(id, header_size, num_bufs, ring, false, rules,
                                                options.client_kicks);
  if (!client) return std::unexpected(client.error());
  auto buffers =
      gpu_engine_->tx_buffers(*tx->gpu_payloads, num_bufs, header_size, tx->gpu_in_place());
  if (!buffers) return std::unexpected(buffers.error());
  (*client)->send_from_gpu(std::move(*buffers));
  if (tx->gpu_in_place()) {
    a.tx = std::move(*client);  // the queue sends from it: headers copied, payloads in place
    attachments_.emplace(id, std::move(a));
    return id;
  }
  // Staged: the queue sends the gpu engine's copies, submitted as a client that kicks.
  auto frames = dataplane::TxAttachment::create(id, home.region->buf_size, num_bufs, ring, false,
                                                tx->task->rules(), true);
  if (!frames) return std::unexpected(frames.error());
  a.tx = std::move(*frames);
  auto copies =
      gpu_engine_->create_tx(std::move(*client), *a.tx, *tx->gpu_payloads, home.queue->busy_poll);
  if (!copies) return std::unexpected(copies.error());
  auto poller = gpu_poller((*copies)->gpu());
  if (!poller) return std::unexpected(poller.error());
  a.gpu = std::move(*copies);
  a.gpu_poller = *poller;
  attachments_.emplace(id, std::move(a));
  return id;
}

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

uint32_t DataPlane::lendable(const FlowEntry& f) const {
  const backends::QueueHome& home = f.queue->home;
  uint32_t bufs = f.flow->pool().num_bufs();
  uint32_t batch = home.queue->batch_size;
  uint32_t reserve = f.queue->backend->traits(home).posted_buffers;
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
    std::vector<std::pair<const memory::BufferPool*, const FlowEntry*>> out;
    for (const auto& name : a.flows) {
      const FlowEntry& f = flows_.at(name);
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
    if (a.gpu) a.gpu_poller->add_task(a.gpu.get(), {a.gpu->wake_fd()});
    if (add_rx(a)) return {};
    if (a.gpu) a.await(a.gpu_poller->remove_task(a.gpu.get(), {a.gpu->wake_fd()}));
    // Unreachable while prepare_activation's check and this run under one lock.
    return fail(ErrorCode::kResourceExhausted, "a flow of the attachment is full");
  }
  Poller& poller = *a.tx_queue->home.poller;
  // From GPU memory the queue's poller is kicked by the engine, its engine's by the client.
  poller.watch(a.tx->kick_fd(), a.gpu ? &a.gpu->counters.kicks : &a.tx->counters.kicks);
  Result<> ok = a.tx_queue->task->add(a.tx.get(), poller.epoch());
  if (!ok) {
    a.await(poller.unwatch(a.tx->kick_fd()));
    return ok;
  }
  if (a.gpu) {
    // The client kicks the copy task, which submits to the queue's poller in turn.
    a.gpu_poller->watch(a.gpu->kick_fd(), &a.tx->counters.kicks);  // one writer each
    a.gpu_poller->add_task(a.gpu.get(), {a.gpu->wake_fd()});
  }
  return ok;
}

Result<AttachmentShare> DataPlane::prepare_activation(uint64_t id, const Attachment& a) const {
  if (a.rx) {
    for (const auto& name : a.flows) {
      if (flows_.at(name).flow->fanout().full()) {
        return fail(ErrorCode::kResourceExhausted,
                    "flow \"" + name + "\" already delivers to " +
                        std::to_string(dataplane::kMaxAttachmentsPerFlow) +
                        " attachments, the most one flow takes");
      }
    }
  }
  return share_of(id, a);
}

Result<AttachmentShare> DataPlane::share_of(uint64_t id, const Attachment& a) const {
  if (a.gpu) return a.gpu->share(id);
  if (a.tx) return dataplane::share_tx(*a.tx, id);
  AttachmentShare share;
  share.id = id;
  share.rx = true;
  memory::SharedMemory& rings = a.rx->rings();
  auto rings_fd = rings.shared_fd();
  if (!rings_fd) return std::unexpected(rings_fd.error());
  share.rings_fd = std::move(*rings_fd);
  share.rings_size = rings.size();
  auto event = dataplane::dup_for_client(a.rx->eventfd(), "eventfd");
  if (!event) return std::unexpected(event.error());
  share.event_fd = std::move(*event);
  auto kick = dataplane::dup_for_client(a.rx->kick_fd(), "kick eventfd");
  if (!kick) return std::unexpected(kick.error());
  share.kick_fd = std::move(*kick);
  for (memory::BufferPool* pool : a.rx->pools()) {
    auto ro = pool->memory().read_only_fd();
    if (!ro) return std::unexpected(ro.error());
    share.regions.push_back(
        {std::move(*ro), pool->memory().size(), pool->buf_size(), pool->num_bufs(), false});
  }
  return share;
}

size_t DataPlane::rx_attachments_of(std::string_view flow) const {
  return static_cast<size_t>(
      std::count_if(attachments_.begin(), attachments_.end(), [&](const auto& e) {
        const Attachment& a = e.second;
        return a.rx && std::find(a.flows.begin(), a.flows.end(), flow) != a.flows.end();
      }));
}

size_t DataPlane::tx_attachments_of(const TxQueue* queue) const {
  return static_cast<size_t>(
      std::count_if(attachments_.begin(), attachments_.end(),
                    [&](const auto& e) { return e.second.tx_queue == queue; }));
}

std::vector<Poller*> DataPlane::rx_pollers(const Attachment& a) const {
  std::vector<Poller*> out;
  for (const auto& name : a.flows) {
    auto f = flows_.find(name);
    if (f == flows_.end()) continue;
    Poller* p = f->second.poller();
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
    if (f.flow->fanout().add(a.rx.get(), f.poller()->epoch())) {
      f.flow->clients_changed();
      continue;
    }
    remove_rx(a, i);
    return false;
  }
  return true;
}

void DataPlane::remove_rx(Attachment& a, size_t flows) {
  for (size_t i = 0; i < flows; ++i) {
    auto f = flows_.find(a.flows[i]);  // a parked attachment may outlive its flow
    if (f != flows_.end()) {
      a.await(f->second.flow->fanout().remove(a.rx.get(), f->second.poller()->epoch()));
      f->second.flow->clients_changed();
    }
  }
  for (Poller* p : rx_pollers(a))
    a.await(p->unwatch(a.rx->kick_fd()));
}

}  // namespace daqiri::orchestrator
