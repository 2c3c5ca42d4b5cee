#include "reorder/reorder_flow.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "dataplane/clock.hpp"

namespace daqiri::reorder {

Result<std::unique_ptr<ReorderFlow>> ReorderFlow::create(
    const core::Flow& flow, ReorderPlan plan, const std::vector<dataplane::RxAttachment*>& sources,
    uint32_t batch_bytes, uint32_t num_bufs, bool huge, uint32_t burst) {
  if (plan.packets_per_batch == 0 || batch_bytes < plan.packets_per_batch) {
    return fail(ErrorCode::kInvalidArgument,
                "reorder \"" + flow.name + "\": its buffers cannot hold a batch");
  }
  // The most input a packet brings that its slot holds once converted.
  uint64_t slot = batch_bytes / plan.packets_per_batch;
  if (plan.format && plan.format->converts()) {
    slot = slot * bits_of(plan.format->input) / bits_of(plan.format->output);
  }
  plan.max_payload = static_cast<uint32_t>(std::min<uint64_t>(slot, UINT32_MAX));
  auto pool = memory::BufferPool::create("reorder-" + flow.name,
                                         DAQIRI_BATCH_HEADER_BYTES + batch_bytes, num_bufs, huge);
  if (!pool) return std::unexpected(pool.error());
  std::vector<Source> s;
  s.reserve(sources.size());
  for (dataplane::RxAttachment* a : sources)
    s.push_back({a, a->ring(), 0});
  return std::unique_ptr<ReorderFlow>(
      new ReorderFlow(flow, plan, std::move(s), std::move(*pool), burst));
}

ReorderFlow::ReorderFlow(const core::Flow& flow, const ReorderPlan& plan,
                         std::vector<Source> sources, memory::BufferPool pool, uint32_t burst)
    : flow_(flow),
      plan_(plan),
      sources_(std::move(sources)),
      pool_(std::move(pool)),
      batcher_(plan_, *this),
      burst_(burst) {}

std::vector<int> ReorderFlow::fds() const {
  std::vector<int> out;
  out.reserve(sources_.size());
  for (const Source& s : sources_)
    out.push_back(s.attachment->eventfd());
  return out;
}

bool ReorderFlow::poll() {
  size_t active = fanout_.begin();
  // A client with blocking backpressure and no room for a batch holds the reorder, and so
  // its sources' rings, back.
  if (active > 0 && fanout_.must_wait(1)) return false;
  delivered_ = false;
  const uint64_t now_ns = dataplane::monotonic_ns();
  bool work = false;
  for (Source& s : sources_)
    work |= drain(s, now_ns);
  batcher_.expire(now_ns);
  if (delivered_) fanout_.publish();
  counters.on_loan.store(pool_.num_bufs() - pool_.available() - (batcher_.open() ? 1 : 0),
                         std::memory_order_relaxed);
  if (!work && !delivered_) return false;
  // The batcher's counts move only with packets placed or batches emitted: an idle poll has
  // nothing to publish.
  const ReorderBatcher::Counters& c = batcher_.counters();
  counters.late.store(c.late, std::memory_order_relaxed);
  counters.duplicates.store(c.duplicates, std::memory_order_relaxed);
  counters.short_frames.store(c.short_frames, std::memory_order_relaxed);
  counters.not_samples.store(c.not_samples, std::memory_order_relaxed);
  counters.timed_out.store(c.timed_out, std::memory_order_relaxed);
  return true;
}

bool ReorderFlow::drain(Source& s, uint64_t now_ns) {
  uint32_t n = std::min(s.ring.load_producer() - s.read, burst_);
  if (n == 0) return false;
  const std::vector<memory::BufferPool*>& pools = s.attachment->pools();
  for (uint32_t i = 0; i < n; ++i) {
    // Written by this daemon's own poller; still, nothing is read outside its pool.
    const daqiri_rx_desc d = *s.ring.slot<daqiri_rx_desc>(s.read + i);
    if (d.region >= pools.size() || d.offset > pools[d.region]->mapped_bytes() ||
        d.length > pools[d.region]->mapped_bytes() - d.offset) {
      continue;
    }
    stamp_ = d.timestamp_ns;
    batcher_.add({pools[d.region]->data() + d.offset, d.length}, now_ns);
  }
  s.read += n;
  s.ring.publish_consumer(s.read);
  s.ring.kick_producer(s.attachment->kick_fd());
  return true;
}

std::optional<ReorderOutput::Buffer> ReorderFlow::acquire() {
  uint32_t index = 0;
  if (pool_.alloc(&index, 1) == 0) {
    dataplane::bump(counters.no_buffer, 1);
    return std::nullopt;
  }
  batch_stamp_ = stamp_;
  std::byte* at = pool_.buffer(index);
  return Buffer{index,
                {at + DAQIRI_BATCH_HEADER_BYTES, pool_.buf_size() - DAQIRI_BATCH_HEADER_BYTES}};
}

void ReorderFlow::emit(const ReorderedBatch& b) {
  daqiri_batch_header h{};
  h.batch_id = b.batch_id;
  h.packets_per_batch = plan_.packets_per_batch;
  h.slot_bytes = b.payload_bytes;
  h.packets = b.packets;
  h.missing = b.missing;
  h.flags = b.timed_out ? DAQIRI_BATCH_TIMED_OUT : 0;
  std::memcpy(pool_.buffer(b.buffer), &h, sizeof h);
  daqiri_rx_desc d{};
  d.offset = pool_.offset(b.buffer);
  d.timestamp_ns = batch_stamp_;
  d.length = static_cast<uint32_t>(DAQIRI_BATCH_HEADER_BYTES + b.bytes);
  d.flow_id = flow_.id;
  d.flags = DAQIRI_DESC_BATCH;
  d.payload_offset = DAQIRI_BATCH_HEADER_BYTES;
  uint16_t refs = fanout_.deliver(d, b.buffer, &pool_);
  if (refs == 0) {
    dataplane::bump(fanout_.active() == 0 ? counters.no_attachment : counters.rings_full, 1);
  }
  pool_.lend(b.buffer, refs);
  dataplane::bump(counters.packets, 1);
  dataplane::bump(counters.bytes, d.length);
  delivered_ = true;
}

bool ReorderFlow::arm_wakeups() {
  bool quiet = RxFlowTask::arm_wakeups();
  for (Source& s : sources_) {
    s.ring.set_need_wakeup(true);
    quiet &= s.ring.load_producer_seq_cst() == s.read;
  }
  return quiet;
}

void ReorderFlow::disarm_wakeups() {
  RxFlowTask::disarm_wakeups();
  for (Source& s : sources_) {
    s.ring.set_need_wakeup(false);
    uint64_t v = 0;  // what woke the poller, if anything: left, it would wake every park
    [[maybe_unused]] auto r = ::read(s.attachment->eventfd(), &v, sizeof v);
  }
}

uint64_t ReorderFlow::wakeup_due_ns() const {
  if (!batcher_.open() || plan_.timeout_ns == 0) return kNoWakeupDue;
  return batcher_.opened_ns() + plan_.timeout_ns;
}

}  // namespace daqiri::reorder
