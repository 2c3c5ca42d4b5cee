#include "backends/dpdk/dpdk_rx_queue.hpp"

#include <rte_errno.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <span>
#include <string>

#include "core/packet_fields.hpp"
#include "core/rss_hash.hpp"
#include "dataplane/receive_clock.hpp"

namespace daqiri::backends::dpdk {

DpdkRxFlow::DpdkRxFlow(core::Flow flow, DpdkRxQueue& queue, std::unique_ptr<HardwareRule> rule)
    : flow_(std::move(flow)), queue_(queue), rule_(std::move(rule)) {}

DpdkRxFlow::DpdkRxFlow(core::Flow flow, DpdkRxQueue& queue, std::shared_ptr<RssGroup> group,
                       uint32_t index)
    : flow_(std::move(flow)), queue_(queue), rss_(std::move(group)), rss_index_(index) {}

void DpdkRxFlow::clients_changed() {
  if (!rss_) return;
  rss_->clients[rss_index_].store(static_cast<uint32_t>(fanout_.size()), std::memory_order_relaxed);
  for (dataplane::Poller* p : rss_->pollers)
    p->epoch().wake();
}

memory::BufferPool& DpdkRxFlow::pool() {
  return queue_.pool();
}

Result<std::unique_ptr<DpdkRxQueue>> DpdkRxQueue::create(const RxQueueSetup& s) {
  auto pool = s.device != nullptr
                  ? memory::BufferPool::over_device(*s.device, s.buf_size, s.num_bufs)
                  : memory::BufferPool::create(s.pool_name, s.buf_size, s.num_bufs, s.huge);
  if (!pool) return std::unexpected(pool.error());
  std::unique_ptr<DpdkRxQueue> q(
      new DpdkRxQueue(s.port, s.queue, std::move(*pool), std::min(s.batch, kMaxBatch), s.reach));
  auto ext = s.device != nullptr ? ExternalMemory::register_range(s.device->base, s.device->bytes,
                                                                  kGpuPageSize, s.dma_device)
                                 : ExternalMemory::register_memory(q->pool_.memory(), s.dma_device);
  if (!ext) return std::unexpected(ext.error());
  auto mp =
      ExternalMbufPool::create(s.pool_name, std::move(*ext), static_cast<uint16_t>(s.buf_size),
                               s.num_bufs, s.socket, !s.in_order);
  if (!mp) return std::unexpected(mp.error());
  q->mbufs_pool_ = std::move(*mp);
  q->timestamp_offset_ = s.timestamp_offset;
  q->timestamp_flag_ = s.timestamp_flag;
  q->base_ = q->pool_.data();
  if (auto ok = q->map_mbufs(); !ok) return std::unexpected(ok.error());
  if (s.split != 0) {
    std::string name = s.pool_name + "_hdr";
    q->header_pool_ =
        rte_pktmbuf_pool_create(name.c_str(), s.num_bufs, mempool_cache_size(s.num_bufs), 0,
                                static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + s.split), s.socket);
    if (q->header_pool_ == nullptr) {
      return fail(ErrorCode::kResourceExhausted, "header mbuf pool for the NIC's buffer split: " +
                                                     std::string(rte_strerror(rte_errno)) +
                                                     " (raise dpdk.memory_mb)");
    }
    q->split_ = s.split;
  }
  // Every buffer starts with DPDK, and goes back to its mempool when clients let it go.
  std::vector<uint32_t> all(s.num_bufs);
  q->pool_.alloc(all.data(), s.num_bufs);
  q->pool_.return_to(reinterpret_cast<void* const*>(q->mbuf_of_.data()), *q);
  return q;
}

DpdkRxQueue::DpdkRxQueue(uint16_t port, uint16_t queue, memory::BufferPool pool, uint32_t batch,
                         SoftwareReach reach)
    : port_(port),
      queue_(queue),
      reach_(reach),
      pool_(std::move(pool)),
      batch_(batch),
      flows_(std::make_unique<const Flows>()),
      mbuf_of_(pool_.num_bufs(), nullptr) {}

DpdkRxQueue::~DpdkRxQueue() {
  RssHandoff h{};
  while (inbox_.pop(&h, 1) == 1)  // its frames are of this queue's pool, which goes next
    rte_pktmbuf_free(h.mbuf);
  if (private_pool_ != nullptr) rte_mempool_free(private_pool_);
  if (header_pool_ != nullptr) rte_mempool_free(header_pool_);
}

rte_mempool* DpdkRxQueue::make_private_pool(uint32_t count, int socket) {
  std::string name = "rxp" + std::to_string(port_) + "_" + std::to_string(queue_);
  private_pool_ = rte_pktmbuf_pool_create(name.c_str(), count, mempool_cache_size(count), 0,
                                          static_cast<uint16_t>(pool_.buf_size()), socket);
  return private_pool_;
}

Result<void> DpdkRxQueue::map_mbufs() {
  // Each mbuf of an external-buffer pool keeps the buffer it was given at creation (pinned),
  // so the table is written once here and only read by the poller.
  rte_mempool_obj_iter(
      mempool(),
      [](rte_mempool*, void* queue, void* obj, unsigned) {
        auto* q = static_cast<DpdkRxQueue*>(queue);
        auto* m = static_cast<rte_mbuf*>(obj);
        uint32_t index = q->index_of(m);
        if (index < q->mbuf_of_.size()) q->mbuf_of_[index] = m;
      },
      this);
  if (std::find(mbuf_of_.begin(), mbuf_of_.end(), nullptr) != mbuf_of_.end()) {
    return fail(ErrorCode::kInternal,
                "mbuf pool " + std::string(mempool()->name) + ": a buffer without its mbuf");
  }
  return {};
}

// Straight back to the mempool, as rte_mbuf_raw_free does: a lent mbuf is one segment
// (keep_first_segment), its refcount 1 and its external buffer pinned, so the per-mbuf checks of
// rte_pktmbuf_free_bulk (three cache lines of each mbuf, cold by now) find nothing to do. The PMD
// resets the flags when it hands the mbuf out again.
void DpdkRxQueue::give_back(void* const* mbufs, uint32_t n) {
  rte_mempool_put_bulk(mempool(), mbufs, n);
  returned_ += n;
}

void DpdkRxQueue::count_returned(const Flows& flows) {
  if (returned_ == 0) return;
  counters.on_loan.store(counters.on_loan.load(std::memory_order_relaxed) - returned_,
                         std::memory_order_relaxed);
  returned_ = 0;
  publish_on_loan(flows);
}

void DpdkRxQueue::publish_on_loan(const Flows& flows) {
  uint32_t on_loan = counters.on_loan.load(std::memory_order_relaxed);
  for (DpdkRxFlow* f : flows)
    f->counters.on_loan.store(on_loan, std::memory_order_relaxed);
}

// A PMD that does not fill our pool's buffers (net_ring hands over the sender's mbufs):
// copy into one of ours so that clients still read only memory they map.
rte_mbuf* DpdkRxQueue::adopt(rte_mbuf* foreign) {
  rte_mbuf* m = rte_pktmbuf_alloc(mempool());
  if (m == nullptr) {
    dataplane::bump(counters.no_buffer, 1);
    rte_pktmbuf_free(foreign);
    return nullptr;
  }
  uint32_t room = rte_pktmbuf_tailroom(m);
  uint32_t len = std::min(rte_pktmbuf_pkt_len(foreign), room);
  auto* dst = rte_pktmbuf_mtod(m, std::byte*);
  const void* src = rte_pktmbuf_read(foreign, 0, len, dst);
  if (src != dst) std::memcpy(dst, src, len);
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = len;
  if (len < rte_pktmbuf_pkt_len(foreign)) dataplane::bump(counters.truncated, 1);
  rte_pktmbuf_free(foreign);
  dataplane::bump(counters.copied, 1);
  return m;
}

// A flow alone on the queue that takes every frame (a catch-all, or one the NIC steers where
// nothing else reaches) takes them without the poller reading them: the read was a cache miss a
// frame (the NIC's bytes), and a client that wants the payload reads the frame anyway and finds
// it there (DAQIRI_PAYLOAD_UNREAD).
DpdkRxFlow* DpdkRxQueue::takes_all(const Flows& flows) const {
  if (flows.size() != 1) return nullptr;
  DpdkRxFlow* f = flows.front();
  if (f->spreads_in_software()) return nullptr;  // it hashes every frame
  return takes_every_frame(f->flow().match.any, f->nic_steered(), reach_) ? f : nullptr;
}

inline DpdkRxFlow* DpdkRxQueue::steer(const Flows& flows, const rte_mbuf* first, bool readable,
                                      core::PacketFields& fields,
                                      std::optional<core::Decapsulation>& decap) {
  if (!readable) {
    fields.payload_offset = core::kPayloadOffsetUnread;
    if ((first->ol_flags & RTE_MBUF_F_RX_FDIR_ID) != 0) {
      for (DpdkRxFlow* f : flows) {
        if (f->marked() && f->flow().id == first->hash.fdir.hi) return f;
      }
      return nullptr;
    }
    return !flows.empty() && flows.back()->flow().match.any ? flows.back() : nullptr;
  }
  fields = core::PacketFields::parse(rte_pktmbuf_mtod(first, const std::byte*), first->data_len);
  // A frame the NIC stripped of its tag or tunnel (marked by a rule that decapsulates) is its
  // flow's as it is: decapsulated again, it would match nothing. Decapsulating flows lead the
  // list, so a queue without them looks at none.
  if ((first->ol_flags & RTE_MBUF_F_RX_FDIR_ID) != 0) {
    for (DpdkRxFlow* f : flows) {
      if (!f->flow().match.decap) break;
      if (f->nic_decapsulates() && f->flow().id == first->hash.fdir.hi &&
          f->flow().match.matches_inner(fields)) {
        return f;
      }
    }
  }
  for (DpdkRxFlow* f : flows) {
    const core::FlowMatch& match = f->flow().match;
    if (match.decap) [[unlikely]] {
      auto d = match.decap->decapsulate(rte_pktmbuf_mtod(first, const uint8_t*), first->data_len);
      if (d && match.matches_inner(d->inner)) {
        fields = d->inner;
        decap = *d;
        return f;
      }
      continue;
    }
    if (match.matches(fields)) return f;
  }
  return nullptr;
}

void DpdkRxQueue::keep_first_segment(rte_mbuf* m, uint16_t& flags) {
  if (m->next != nullptr) {
    rte_pktmbuf_free(m->next);
    m->next = nullptr;
    flags |= DAQIRI_DESC_TRUNCATED;
    dataplane::bump(counters.truncated, 1);
  }
  m->nb_segs = 1;
  m->pkt_len = m->data_len;
}

rte_mbuf* DpdkRxQueue::take_payload(rte_mbuf* h, uint16_t& flags) {
  rte_mbuf* p = h->next;
  h->next = nullptr;
  h->nb_segs = 1;
  h->pkt_len = h->data_len;
  if (p != nullptr) keep_first_segment(p, flags);  // longer than a payload buffer: what fits one
  return p;
}

template <bool kCompact>
void DpdkRxQueue::deliver_whole(DpdkRxFlow& flow, dataplane::RxAttachment& a, uint16_t n,
                                uint64_t now) {
  dataplane::RxAttachment::Run ring(a, &pool_);
  const uint32_t flow_id = flow.flow().id;
  // In locals: the ring's stores may alias the queue's members, so the compiler read them
  // again for every frame.
  const rte_mempool* const mp = mempool();
  const std::byte* const base = base_;
  uint32_t dropped = 0, full = 0, lost = 0;
  uint64_t full_bytes = 0;  // the pushed ones' are the ring's
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = rx_[i];
    uint16_t flags = 0;
    const uint64_t received = stamp(m, now, flags);  // before a copy replaces the mbuf
    if (m->pool != mp) [[unlikely]] {
      m = adopt(m);
      if (m == nullptr) {
        ++lost;
        continue;
      }
    } else if (m->nb_segs > 1) [[unlikely]] {
      keep_first_segment(m, flags);
    }
    daqiri_rx_desc d{};
    d.offset = offset_from(base, m);
    d.timestamp_ns = received;
    d.length = m->data_len;
    d.flow_id = flow_id;
    d.flags = flags;
    d.payload_offset = core::kPayloadOffsetUnread;
    // Lent to this client alone, with its one reference (pool_.alloc's): no count to store.
    if (!ring.push_alone<kCompact>(d, m)) [[unlikely]] {
      ++full;
      full_bytes += d.length;
      drop_[dropped++] = m;
    }
  }
  uint64_t bytes = ring.bytes() + full_bytes;
  uint32_t lent = n - lost - full;
  ring.finish();
  // As the general loop counts them: the flow's packets include those its full ring lost.
  dataplane::bump(flow.counters.packets, lent + full);
  dataplane::bump(flow.counters.bytes, bytes);
  if (full > 0) {
    dataplane::bump(flow.counters.rings_full, full);
    dataplane::bump(a.no_slot_counter(), full);
  }
  dataplane::bump(counters.on_loan, lent);
  if (dropped > 0) rte_pktmbuf_free_bulk(drop_.data(), dropped);
  dataplane::bump(counters.packets, n);
  dataplane::bump(counters.bytes, bytes);
}

bool DpdkRxQueue::poll_single(const Flows& flows, DpdkRxFlow& flow, dataplane::RxAttachment& a) {
  count_returned(flows);
  spinning_ = true;
  if (flow.fanout().must_wait(batch_)) return false;
  a.prepare(batch_);
  uint16_t n = rte_eth_rx_burst(port_, queue_, rx_.data(), static_cast<uint16_t>(batch_));
  if (n == 0) return false;
  deliver_alone(flows, flow, a, n);
  return true;
}

inline void DpdkRxQueue::deliver_alone(const Flows& flows, DpdkRxFlow& flow,
                                       dataplane::RxAttachment& a, uint16_t n) {
  // A compact descriptor carries no stamp: no clock read.
  if (a.compact()) {
    deliver_whole<true>(flow, a, n, 0);
  } else {
    deliver_whole<false>(flow, a, n, dataplane::ReceiveClock::now_ns());
  }
  flow.fanout().publish();
  publish_on_loan(flows);
}

bool DpdkRxQueue::poll() {
  const Flows& flows = flows_.load();
  // What clients released goes back to the mempool before the receive takes mbufs from it.
  // Taking it back after the receive instead would hide the wait for the consumer index behind
  // rte_eth_rx_burst, but leaves the receive short of mbufs when the cores talk slowly.
  // Decided once a poll: per frame, the loads behind it waited on the ring slots' stores.
  DpdkRxFlow* takes_all = this->takes_all(flows);
  // Its frames go whole to host memory (no NIC split, no GPU pool): deliver_whole() may take
  // them.
  const bool whole_frames = takes_all != nullptr && header_pool_ == nullptr && !frames_on_device();
  // The usual queue, a lone catch-all with one client, goes its own way: it needs none of the
  // loops over flows and attachments below, which show at small bursts.
  if (whole_frames) {
    if (dataplane::RxAttachment* a = takes_all->fanout().begin_single(batch_); a != nullptr) {
      return poll_single(flows, *takes_all, *a);
    }
  }
  return poll_general(flows, takes_all, whole_frames);
}

bool DpdkRxQueue::poll_general(const Flows& flows, DpdkRxFlow* takes_all, bool whole_frames) {
  const bool on_device = frames_on_device();
  size_t active = 0;
  bool wait = false;
  // A member of an RSS flow the daemon spreads is here: its inbox may hold frames, and while
  // any member of the flow has a client, this queue's frames may be that member's.
  bool rss = false;
  bool wanted = false;
  for (DpdkRxFlow* f : flows) {
    active += f->fanout().begin();
    wait |= f->fanout().must_wait(batch_);
    if (f->spreads_in_software()) [[unlikely]] {
      rss = true;
      wanted |= f->rss()->wanted();
    }
  }
  count_returned(flows);
  spinning_ = active > 0 || wanted;
  if (!spinning_ || wait) return false;
  for (DpdkRxFlow* f : flows)
    f->fanout().prepare(batch_);
  uint16_t n = rte_eth_rx_burst(port_, queue_, rx_.data(), static_cast<uint16_t>(batch_));
  const auto handed = rss ? static_cast<uint32_t>(inbox_.pop(handed_.data(), batch_)) : 0u;
  if (n == 0 && handed == 0) return false;
  dataplane::RxAttachment* whole = whole_frames ? takes_all->fanout().single() : nullptr;
  // One of several clients left (an inbox is never filled for a flow that takes all).
  if (whole != nullptr && whole->lends_objects() && handed == 0) {
    deliver_alone(flows, *takes_all, *whole, n);
    return true;
  }
  uint64_t now = dataplane::ReceiveClock::now_ns();
  uint32_t dropped = 0;
  uint64_t bytes = 0;
  uint32_t headers = 0;
  uint32_t lent = 0;
  // Flow counters are added up in registers while frames keep going to the same flow: a store
  // per counter per frame filled the store buffer behind the ring slots' stores.
  DpdkRxFlow* counted = nullptr;
  uint64_t run_packets = 0;
  uint64_t run_bytes = 0;
  dataplane::RxFanout::Run delivery;  // to `counted`
  auto count_run = [&] {
    delivery.finish();
    if (counted == nullptr) return;
    dataplane::bump(counted->counters.packets, run_packets);
    dataplane::bump(counted->counters.bytes, run_bytes);
    run_packets = run_bytes = 0;
  };
  // Lends `m` (or only `head`, split off by the NIC, when `m` is null) to `flow`'s clients.
  auto deliver = [&](DpdkRxFlow* flow, rte_mbuf* m, daqiri_rx_desc& d,
                     std::span<const std::byte> head) {
    uint32_t index = m != nullptr ? index_of(m) : dataplane::RxAttachment::kNoBuffer;
    if (flow != counted) {
      count_run();
      counted = flow;
      delivery = dataplane::RxFanout::Run(flow->fanout(), &pool_, header_pool_ != nullptr);
    }
    ++run_packets;
    run_bytes += d.length;
    uint16_t refs = delivery.deliver(d, index, head, m);
    if (refs == 0) {
      auto& fc = flow->counters;
      dataplane::bump(flow->fanout().active() == 0 ? fc.no_attachment : fc.rings_full, 1);
      if (m != nullptr) drop_[dropped++] = m;
      return;
    }
    if (m == nullptr) return;  // every byte went beside the rings: nothing on loan
    pool_.lend(index, refs);   // every buffer DPDK holds was handed out by pool_.alloc()
    ++lent;
  };
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = rx_[i];
    uint16_t flags = 0;
    const uint64_t received = stamp(m, now, flags);  // before a copy replaces the mbuf
    // The NIC split it: the header mbuf is read (and its bytes copied) here, then freed; the
    // payload's buffer is what clients borrow (none when the frame fit in the header).
    rte_mbuf* header = nullptr;
    if (header_pool_ != nullptr && m->pool == header_pool_) {
      header = heads_[headers++] = m;
      m = take_payload(header, flags);
      flags |= DAQIRI_DESC_SPLIT;
    }
    if (m != nullptr && !owned(m)) {
      if (on_device) {  // nothing the CPU could copy into GPU memory
        dataplane::bump(counters.no_buffer, 1);
        drop_[dropped++] = m;
        continue;
      }
      m = adopt(m);
      if (m == nullptr) continue;
    } else if (m != nullptr && m->nb_segs > 1) {
      // No scatter is configured, so this is a PMD's own choice: keep the first segment.
      keep_first_segment(m, flags);
    }
    core::PacketFields fields;
    const rte_mbuf* first = header != nullptr ? header : m;
    DpdkRxFlow* flow = takes_all;
    // A decapsulating flow's outer bytes: the frame delivered starts this far into `first`.
    // The mbuf itself is left as the PMD wrote it (a PMD may reuse its data offset).
    uint16_t strip = 0;
    if (flow != nullptr) {
      fields.payload_offset = core::kPayloadOffsetUnread;
    } else {
      std::optional<core::Decapsulation> decap;
      flow = steer(flows, first, header != nullptr || !on_device, fields, decap);
      if (decap) [[unlikely]] {
        core::apply(*decap, rte_pktmbuf_mtod(first, uint8_t*));
        strip = static_cast<uint16_t>(decap->strip);
      }
    }
    std::span<const std::byte> head;
    if (header != nullptr) {
      head = {rte_pktmbuf_mtod(header, const std::byte*) + strip, size_t{header->data_len} - strip};
    }
    const uint16_t m_strip = header != nullptr ? 0 : strip;
    uint32_t length =
        static_cast<uint32_t>(head.size()) + (m != nullptr ? m->data_len : 0) - m_strip;
    bytes += length + strip;
    if (flow == nullptr) {
      dataplane::bump(counters.unmatched, 1);
      if (m != nullptr) drop_[dropped++] = m;
      continue;
    }
    if (flow->spreads_in_software()) [[unlikely]] {
      // Never split nor in GPU memory (DpdkBackend::add_flow): `m` is the whole frame.
      const RssGroup& g = *flow->rss();
      const uint32_t target = g.table[core::rss_hash(fields) & g.mask];
      if (target != flow->rss_index()) {
        hand_off(*flow, target, m, strip, received, flags, fields.payload_offset);
        drop_[dropped++] = m;
        continue;
      }
    }
    daqiri_rx_desc d{};
    if (m != nullptr) d.offset = offset_of(m) + m_strip;
    d.timestamp_ns = received;
    d.length = length;
    d.flow_id = flow->flow().id;
    d.flags = flags;
    d.payload_offset = fields.payload_offset;
    deliver(flow, m, d, head);
  }
  // Frames other queues received for this queue's RSS members, in this queue's pool already.
  for (uint32_t i = 0; i < handed; ++i) {
    const RssHandoff& h = handed_[i];
    auto member = std::find_if(flows.begin(), flows.end(), [&h](const DpdkRxFlow* f) {
      return f->rss() != nullptr && f->rss()->serial == h.group;
    });
    if (member == flows.end()) {  // its flow was removed on the way
      dataplane::bump(counters.unmatched, 1);
      drop_[dropped++] = h.mbuf;
      continue;
    }
    daqiri_rx_desc d{};
    d.offset = offset_of(h.mbuf);
    d.timestamp_ns = h.received;
    d.length = h.mbuf->data_len;
    d.flow_id = (*member)->flow().id;
    d.flags = h.flags;
    d.payload_offset = h.payload_offset;
    deliver(*member, h.mbuf, d, {});
  }
  count_run();
  dataplane::bump(counters.on_loan, lent);
  if (dropped > 0) rte_pktmbuf_free_bulk(drop_.data(), dropped);
  if (headers > 0) rte_pktmbuf_free_bulk(heads_.data(), headers);
  dataplane::bump(counters.packets, n);
  dataplane::bump(counters.bytes, bytes);
  for (DpdkRxFlow* f : flows)
    f->fanout().publish();
  publish_on_loan(flows);
  return true;
}

void DpdkRxQueue::hand_off(DpdkRxFlow& from, uint32_t target, const rte_mbuf* m, uint16_t strip,
                           uint64_t received, uint16_t flags, uint16_t payload_offset) {
  DpdkRxQueue& to = *from.rss()->queues[target];
  rte_mbuf* copy = rte_pktmbuf_alloc(to.mempool());
  if (copy == nullptr) {
    dataplane::bump(from.counters.packets, 1);
    dataplane::bump(from.counters.no_buffer, 1);
    return;
  }
  uint32_t length = m->data_len - strip;
  if (length > rte_pktmbuf_tailroom(copy)) {
    length = rte_pktmbuf_tailroom(copy);
    flags |= DAQIRI_DESC_TRUNCATED;
    dataplane::bump(counters.truncated, 1);
  }
  std::memcpy(rte_pktmbuf_mtod(copy, std::byte*), rte_pktmbuf_mtod(m, const std::byte*) + strip,
              length);
  copy->data_len = static_cast<uint16_t>(length);
  copy->pkt_len = length;
  RssHandoff h{copy, received, from.rss()->serial, flags, payload_offset};
  if (!to.inbox_.push(h)) {
    rte_pktmbuf_free(copy);
    dataplane::bump(from.counters.packets, 1);
    dataplane::bump(from.counters.rings_full, 1);
  }
}

dataplane::NicQueueStats DpdkRxQueue::stats(const std::string& name) const {
  dataplane::NicQueueStats s;
  s.name = name;
  s.rx = true;
  s.packets = counters.packets.load(std::memory_order_relaxed);
  s.bytes = counters.bytes.load(std::memory_order_relaxed);
  s.unmatched = counters.unmatched.load(std::memory_order_relaxed);
  s.copied = counters.copied.load(std::memory_order_relaxed);
  s.no_buffer = counters.no_buffer.load(std::memory_order_relaxed);
  s.truncated = counters.truncated.load(std::memory_order_relaxed);
  s.on_loan = counters.on_loan.load(std::memory_order_relaxed);
  // Reads each lcore's cache length unsynchronised: exact once the queue is quiet.
  s.mbufs_free = rte_mempool_avail_count(mempool());
  return s;
}

void DpdkRxQueue::add(DpdkRxFlow* flow, const dataplane::Epoch& epoch) {
  auto next = std::make_unique<Flows>(flows_.load());
  next->push_back(flow);
  auto rank = [](const DpdkRxFlow* f) {
    const core::FlowMatch& m = f->flow().match;
    return m.decap ? 0 : m.any ? 2 : 1;
  };
  std::stable_sort(next->begin(), next->end(),
                   [&rank](const DpdkRxFlow* a, const DpdkRxFlow* b) { return rank(a) < rank(b); });
  flows_.replace(std::move(next), epoch);
}

dataplane::Grace DpdkRxQueue::remove(DpdkRxFlow* flow, const dataplane::Epoch& epoch) {
  return dataplane::publish_removed(flows_, flow, epoch);
}

}  // namespace daqiri::backends::dpdk
