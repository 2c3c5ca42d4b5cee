#include "orchestrator/data_plane.hpp"

#include <algorithm>
#include <iterator>
#include <map>

namespace daqiri::orchestrator {

std::vector<FlowStats> DataPlane::flow_stats() const {
  std::lock_guard lock(mutex_);
  std::vector<FlowStats> out;
  // An RSS flow's members (one a queue, each key NAME@QUEUE) add up to one row, on its first
  // queue: the flow is what a client names and a dashboard follows.
  std::map<std::string_view, size_t> rows;
  for (const auto& [key, f] : flows_) {
    const core::Flow& flow = f.flow->flow();
    auto [row, fresh] = rows.try_emplace(flow.name, out.size());
    if (fresh) {
      FlowStats s;
      s.name = flow.name;
      s.interface = flow.interface;
      s.queue = flow.rss_queues.empty() ? flow.queue : flow.rss_queues.front();
      s.steering = f.flow->steering();
      s.reorder = f.flow->reorders();
      out.push_back(s);
    }
    FlowStats& s = out[row->second];
    const auto& c = f.flow->counters;
    s.packets += c.packets.load(std::memory_order_relaxed);
    s.bytes += c.bytes.load(std::memory_order_relaxed);
    s.no_attachment += c.no_attachment.load(std::memory_order_relaxed);
    s.rings_full += c.rings_full.load(std::memory_order_relaxed);
    s.filtered += c.filtered.load(std::memory_order_relaxed);
    s.truncated += c.truncated.load(std::memory_order_relaxed);
    s.kernel_drops += f.flow->kernel_drops();
    s.no_buffer += c.no_buffer.load(std::memory_order_relaxed);
    s.overflow += c.overflow.load(std::memory_order_relaxed);
    s.buffers_total += f.flow->pool().num_bufs();
    s.buffers_on_loan += c.on_loan.load(std::memory_order_relaxed);
    s.attachments += f.flow->fanout().size();
    s.connections += c.connections.load(std::memory_order_relaxed);
    s.late += c.late.load(std::memory_order_relaxed);
    s.duplicates += c.duplicates.load(std::memory_order_relaxed);
    s.short_frames += c.short_frames.load(std::memory_order_relaxed);
    s.not_samples += c.not_samples.load(std::memory_order_relaxed);
    s.timed_out += c.timed_out.load(std::memory_order_relaxed);
  }
  return out;
}

std::string DataPlane::target_of(const Attachment& a) {
  return a.rx ? a.target : a.tx_queue->home.key();
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
    const dataplane::AttachmentCounters& c = a.counters();
    AttachmentStats s;
    s.id = id;
    s.rx = a.rx != nullptr;
    s.target = target_of(a);
    if (!a.rx) {
      s.interface = a.tx_queue->home.itf->name;
      s.queue = a.tx_queue->home.queue->name;
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
    s.gpu = a.tx && a.tx->gpu_buffers() != nullptr;  // in place, the NIC reads them: no copies
    if (a.gpu) {
      s.gpu = true;
      s.gpu_packets = a.gpu->counters.packets.load(std::memory_order_relaxed);
      s.gpu_bytes = a.gpu->counters.bytes.load(std::memory_order_relaxed);
      s.gpu_copy_latency = a.gpu->counters.latency.snapshot();
      ring = &a.gpu->control_ring();
    }
    // Client-written indices: a scribbling client shows as a full ring, never more.
    s.ring_size = ring->size();
    s.ring_used = std::min(ring->load_producer() - ring->load_consumer(), ring->size());
    out.push_back(s);
  }
  return out;
}

std::optional<Steering> DataPlane::steering(std::string_view flow) const {
  std::lock_guard lock(mutex_);
  auto keys = members_of(flow);
  if (keys.empty()) return std::nullopt;
  return flows_.at(keys.front()).flow->steering();
}

std::vector<dataplane::NicStats> DataPlane::nic_stats() const {
  std::vector<dataplane::NicStats> out;
  for (const auto& [kind, b] : backends_) {
    auto nics = b->nic_stats();
    out.insert(out.end(), std::make_move_iterator(nics.begin()),
               std::make_move_iterator(nics.end()));
  }
  return out;
}

std::string DataPlane::interface_state(const std::string& interface) const {
  for (const auto& itf : config_.interfaces) {
    if (itf.name == interface) return backends_.at(itf.backend)->link_state(itf);
  }
  return "configured";
}

std::optional<config::RegionKind> DataPlane::rx_region_kind(uint64_t id) const {
  std::lock_guard lock(mutex_);
  auto a = attachments_.find(id);
  if (a == attachments_.end() || !a->second.rx || a->second.flows.empty()) return std::nullopt;
  auto f = flows_.find(a->second.flows.front());
  if (f == flows_.end()) return std::nullopt;
  return f->second.queue->home.region->kind;
}

std::string DataPlane::delivery(const std::string& interface, const std::string& queue) const {
  // rx_queues_ is fixed once start() returns: no lock needed to read it.
  auto it = rx_queues_.find(interface + "/" + queue);
  return it == rx_queues_.end() ? "" : it->second.backend->delivery(it->second.home);
}

}  // namespace daqiri::orchestrator
