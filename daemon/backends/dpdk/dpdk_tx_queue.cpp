#include "backends/dpdk/dpdk_tx_queue.hpp"

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf_dyn.h>

#include <algorithm>
#include <cstring>

#include "dataplane/receive_clock.hpp"
#include "dataplane/tx_frame_policy.hpp"

namespace daqiri::backends::dpdk {
namespace {

// Checked: the bytes copied into the daemon's mbuf (the headers where the port chains the rest
// behind them, else the whole frame). Split (gpudirect): the host part. Raw: none.
uint32_t copy_length_of(const TxQueueSetup& s) {
  if (s.split_header != 0) return s.split_header;
  if (s.policy == config::TxPolicy::kRaw) return 0;
  return s.multi_segment ? uint32_t{dataplane::kCheckedHeaders} : s.max_frame;
}

// The most mbufs one frame takes: two where a checked or split frame's payload is chained, or
// where TX flows put headers in front of a raw frame; three for both.
uint32_t mbufs_per_frame_of(const TxQueueSetup& s) {
  if (s.split_header != 0) return s.flows.empty() ? 2 : 3;
  if (copy_length_of(s) != 0) return s.multi_segment ? 2 : 1;
  return s.flows.empty() ? 1 : 2;
}

// Room in each of the queue's own mbufs: a checked frame's copy, or a TX flow's headers (and,
// where the port cannot chain, the frame behind them).
uint32_t room_of(const TxQueueSetup& s) {
  uint32_t copy = copy_length_of(s);
  if (s.split_header != 0 && !s.flows.empty()) {
    return RTE_PKTMBUF_HEADROOM + std::max<uint32_t>(copy, core::Encap::kMaxHeaders);
  }
  if (copy != 0) return RTE_PKTMBUF_HEADROOM + copy;
  if (s.flows.empty()) return 0;
  return RTE_PKTMBUF_HEADROOM + core::Encap::kMaxHeaders + (s.multi_segment ? 0 : s.max_frame);
}

}  // namespace

Result<std::unique_ptr<DpdkTxQueue>> DpdkTxQueue::create(const TxQueueSetup& setup) {
  uint32_t batch = std::min(setup.batch, kMaxBatch);
  // Enough mbufs for a full NIC ring, a stash and some pending frames, of each frame's mbufs;
  // running dry is handled (see the header comment), so this is about throughput, not
  // correctness.
  uint32_t count = (setup.descriptors + 4 * batch + 512) * mbufs_per_frame_of(setup);
  uint32_t room = room_of(setup);
  rte_mempool* headers =
      rte_pktmbuf_pool_create(setup.pool_name.c_str(), count, mempool_cache_size(count), 0,
                              static_cast<uint16_t>(room), setup.socket);
  if (headers == nullptr) {
    return fail(ErrorCode::kResourceExhausted, "TX mbuf pool " + setup.pool_name + ": " +
                                                   rte_strerror(rte_errno) +
                                                   " (raise dpdk.memory_mb)");
  }
  TxQueueSetup s = setup;
  s.batch = batch;
  return std::unique_ptr<DpdkTxQueue>(new DpdkTxQueue(s, headers));
}

DpdkTxQueue::DpdkTxQueue(const TxQueueSetup& setup, rte_mempool* headers)
    : port_(setup.port),
      queue_(setup.queue),
      headers_(headers),
      batch_(setup.batch),
      max_frame_(setup.max_frame),
      dma_device_(setup.dma_device),
      policy_(setup.policy),
      source_ipv4_(setup.source_ipv4),
      mac_(setup.mac),
      copy_length_(copy_length_of(setup)),
      split_header_(setup.split_header),
      mbufs_per_frame_(mbufs_per_frame_of(setup)),
      multi_segment_(setup.multi_segment),
      flows_(setup.flows),
      pacer_(setup.pacing_mbps, setup.max_frame),
      send_times_(setup.send_times),
      bindings_() {}

DpdkTxQueue::~DpdkTxQueue() {
  if (stash_count_ > 0) rte_pktmbuf_free_bulk(stash_.data(), stash_count_);
  rte_mempool_free(headers_);
}

void DpdkTxQueue::on_freed(void* addr, void* opaque) {
  auto* b = static_cast<Binding*>(opaque);
  const std::byte* base = b->memory->base();
  auto index = static_cast<uint32_t>((static_cast<const std::byte*>(addr) - base) / b->stride);
  b->done.push(index);
}

bool DpdkTxQueue::complete(Binding& b) {
  uint32_t n = 0;
  uint32_t index = 0;
  while (n < kMaxBatch && b.done.pop(index)) {
    descs_[n] = {};
    descs_[n].buffer = index;
    ++n;
  }
  if (n == 0) return false;
  b.in_flight -= n;
  b.attachment->complete(descs_.data(), n);
  return true;
}

void DpdkTxQueue::flush_pending(Binding& b) {
  // Frames the PMD never took: freeing them runs on_freed, which completes their buffers.
  if (b.pending_count == 0) return;
  rte_pktmbuf_free_bulk(b.pending.data() + b.pending_first, b.pending_count);
  dataplane::bump(b.attachment->counters.send_errors, b.pending_count);
  b.pending_first = b.pending_count = 0;
}

void DpdkTxQueue::refill_stash() {
  if (rte_pktmbuf_alloc_bulk(headers_, stash_.data() + stash_count_, batch_ - stash_count_) == 0) {
    stash_count_ = batch_;
    return;
  }
  // Fewer than a batch left, and the bulk call takes all or nothing: take them one by one, so
  // that no header sits in the pool while frames wait for one.
  while (stash_count_ < batch_) {
    rte_mbuf* m = rte_pktmbuf_alloc(headers_);
    if (m == nullptr) break;
    stash_[stash_count_++] = m;
  }
  if (stash_count_ == 0) dataplane::bump(counters.no_header, 1);
  rte_eth_tx_done_cleanup(port_, queue_, 0);  // the PMD may hold headers it has sent
}

bool DpdkTxQueue::send(Binding& b) {
  dataplane::TxAttachment& a = *b.attachment;
  if (b.pending_count > 0) {
    uint16_t sent = rte_eth_tx_burst(port_, queue_, b.pending.data() + b.pending_first,
                                     static_cast<uint16_t>(b.pending_count));
    b.pending_first += sent;
    b.pending_count -= sent;
    dataplane::bump(a.counters.packets, sent);
    dataplane::bump(counters.packets, sent);
    if (b.pending_count > 0) return sent > 0;
    b.pending_first = 0;
  }
  if (pacer_.budget() == 0) return false;
  if (stash_count_ < batch_) refill_stash();
  // A checked frame may take two mbufs: headers, and the payload chained behind them.
  uint32_t n = a.take(descs_.data(), stash_count_ / mbufs_per_frame_, pacer_);
  if (n == 0) {
    // Nothing new: let a lazy PMD give back what it has sent, so clients get their buffers.
    if (b.in_flight > 0) rte_eth_tx_done_cleanup(port_, queue_, 0);
    return false;
  }
  uint32_t ready = 0;
  uint32_t done_now = 0;  // frames copied whole: their buffers are the client's again
  uint64_t now = 0;       // read at the first frame the NIC schedules
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const daqiri_tx_desc d = descs_[i];
    const core::TxFlow* flow = flows_.empty() ? nullptr : match_flow(b, d);
    if (d.length + (flow != nullptr ? flow->encap.overhead() : nic_overhead_) > max_frame_) {
      dataplane::bump(counters.oversize, 1);
      dataplane::bump(a.counters.send_errors, 1);
      a.complete(&d, 1, true);
      continue;
    }
    rte_mbuf* m = copy_length_ == 0 ? zero_copy(b, d) : copy_headers(b, d, done_now);
    if (m == nullptr) continue;
    if (flow != nullptr) m = encapsulate(*flow, m);
    if (send_time_offset_ >= 0 && (d.flags & DAQIRI_TX_AT) != 0) stamp(m, d, now);
    b.pending[ready++] = m;
    bytes += m->pkt_len;
  }
  if (done_now > 0) a.complete(descs_.data(), done_now);
  if (ready > 0 && burst_pacer_.pacing()) stamp_burst(b.pending[0], bytes, now);
  uint16_t sent = rte_eth_tx_burst(port_, queue_, b.pending.data(), static_cast<uint16_t>(ready));
  b.pending_first = sent;
  b.pending_count = ready - sent;
  dataplane::bump(a.counters.packets, sent);
  dataplane::bump(a.counters.bytes, bytes);
  dataplane::bump(counters.packets, sent);
  dataplane::bump(counters.bytes, bytes);
  return true;
}

uint64_t DpdkTxQueue::nic_ticks(uint64_t at_ns, uint64_t now) {
  if (send_clock_.stale(now)) {
    uint64_t ticks = 0;
    if (rte_eth_read_clock(port_, &ticks) == 0) send_clock_.sync(now, ticks);
  }
  return send_clock_.nic_ticks(at_ns);
}

void DpdkTxQueue::stamp(rte_mbuf* m, const daqiri_tx_desc& d, uint64_t& now) {
  if (now == 0) now = dataplane::ReceiveClock::now_ns();
  *RTE_MBUF_DYNFIELD(m, send_time_offset_, uint64_t*) =
      nic_ticks(daqiri_tx_desc_time(&d, now), now);
  m->ol_flags |= send_time_flag_;
}

void DpdkTxQueue::stamp_burst(rte_mbuf* first, uint64_t bytes, uint64_t& now) {
  if (now == 0) now = dataplane::ReceiveClock::now_ns();
  uint64_t at = nic_ticks(burst_pacer_.start(now, bytes), now);
  auto* field = RTE_MBUF_DYNFIELD(first, send_time_offset_, uint64_t*);
  if ((first->ol_flags & send_time_flag_) == 0 || *field < at) *field = at;
  first->ol_flags |= send_time_flag_;
}

void DpdkTxQueue::attach(Binding& b, const daqiri_tx_desc& d, rte_mbuf* m, uint16_t offset,
                         uint32_t length) {
  rte_mbuf_ext_shared_info* sh = &b.shinfo[d.buffer];
  sh->free_cb = &DpdkTxQueue::on_freed;
  sh->fcb_opaque = &b;
  rte_mbuf_ext_refcnt_set(sh, 1);
  std::byte* buf = b.memory->base() + uint64_t{d.buffer} * b.stride;
  rte_pktmbuf_attach_extbuf(m, buf, b.memory->iova(buf), static_cast<uint16_t>(b.stride), sh);
  m->data_off = offset;
  m->data_len = static_cast<uint16_t>(length);
  m->pkt_len = length;
  ++b.in_flight;
}

rte_mbuf* DpdkTxQueue::zero_copy(Binding& b, const daqiri_tx_desc& d) {
  rte_mbuf* m = stash_[--stash_count_];
  attach(b, d, m, 0, d.length);
  return m;
}

rte_mbuf* DpdkTxQueue::copy_headers(Binding& b, const daqiri_tx_desc& d, uint32_t& done_now) {
  dataplane::TxAttachment& a = *b.attachment;
  rte_mbuf* h = stash_[--stash_count_];
  auto* head = rte_pktmbuf_mtod(h, std::byte*);
  uint32_t copied = std::min(d.length, copy_length_);
  std::memcpy(head, a.buffer(d.buffer), copied);
  uint32_t wire = d.length;
  if (policy_ != config::TxPolicy::kRaw) {
    auto verdict = dataplane::check_tx_frame({head, copied}, d.length, source_ipv4_, policy_);
    if (verdict.refused != nullptr) {
      stash_[stash_count_++] = h;
      dataplane::bump(a.counters.refused, 1);
      a.complete(&d, 1, true);
      return nullptr;
    }
    std::memcpy(head + 6, mac_.addr_bytes, RTE_ETHER_ADDR_LEN);
    // What is sent ends with the IP packet: Ethernet padding the client wrote is not.
    wire = frame::kEthHeader + verdict.ip_length;
  }
  if (wire <= copied) {
    h->data_len = static_cast<uint16_t>(wire);
    h->pkt_len = wire;
    descs_[done_now++] = d;  // done_now <= the index of `d`: a slot already read
    return h;
  }
  // The rest: in the same buffer behind the copied bytes, or split, from its GPU buffer's start.
  rte_mbuf* payload = stash_[--stash_count_];
  attach(b, d, payload, static_cast<uint16_t>(copied - split_header_), wire - copied);
  h->data_len = static_cast<uint16_t>(copied);
  h->pkt_len = wire;
  h->next = payload;
  h->nb_segs = 2;
  return h;
}

const core::TxFlow* DpdkTxQueue::match_flow(const Binding& b, const daqiri_tx_desc& d) {
  // Once, into the daemon's memory: the match and a raw frame's new headers come from this copy.
  // (Split, the host buffer holds only the headers' part.)
  head_length_ =
      std::min({d.length, static_cast<uint32_t>(head_.size()), b.attachment->buf_size()});
  std::memcpy(head_.data(), b.attachment->buffer(d.buffer), head_length_);
  if (head_length_ < frame::kEthHeader) return nullptr;  // no Ethernet frame to put headers on
  auto fields =
      core::PacketFields::parse(reinterpret_cast<const std::byte*>(head_.data()), head_length_);
  for (const auto& f : flows_) {
    if (f.match.matches(fields)) return &f;
  }
  return nullptr;
}

rte_mbuf* DpdkTxQueue::encapsulate(const core::TxFlow& flow, rte_mbuf* m) {
  // A raw frame in the client's buffer: the headers in a mbuf of the queue's own in front.
  std::array<uint8_t, core::Encap::kMaxHeaders> headers{};
  uint32_t skip = 0;
  uint32_t length = flow.encap.write(head_.data(), head_length_, m->pkt_len, headers.data(), skip);
  rte_pktmbuf_adj(m, static_cast<uint16_t>(skip));
  rte_mbuf* h = stash_[--stash_count_];
  auto* out = rte_pktmbuf_mtod(h, uint8_t*);
  std::memcpy(out, headers.data(), length);
  if (!multi_segment_) {
    // One segment a frame: the frame copied behind its headers; the client's buffer is done
    // when `m` is freed (on_freed).
    const void* frame = rte_pktmbuf_read(m, 0, m->pkt_len, out + length);
    if (frame != out + length) std::memcpy(out + length, frame, m->pkt_len);  // one segment
    h->data_len = static_cast<uint16_t>(length + m->pkt_len);
    h->pkt_len = h->data_len;
    rte_pktmbuf_free(m);
    return h;
  }
  h->data_len = static_cast<uint16_t>(length);
  h->pkt_len = length + m->pkt_len;
  h->next = m;
  h->nb_segs = static_cast<uint16_t>(1 + m->nb_segs);
  return h;
}

bool DpdkTxQueue::arm_wakeups() {
  return dataplane::arm_wakeups(bindings_.load(), attachment_of);
}

void DpdkTxQueue::disarm_wakeups() {
  dataplane::disarm_wakeups(bindings_.load(), attachment_of);
}

bool DpdkTxQueue::needs_timed_wakeup() const {
  const Set& set = bindings_.load();
  return std::any_of(set.begin(), set.end(), [](const Binding* b) { return b->in_flight > 0; }) ||
         dataplane::has_client_without_kicks(set, attachment_of);
}

bool DpdkTxQueue::poll() {
  bool work = false;
  const Set& set = bindings_.load();
  pacer_.refill();
  size_t first = pacer_.first_served(set.size());
  for (size_t i = 0; i < set.size(); ++i) {
    Binding* b = set[dataplane::served(first, i, set.size())];
    dataplane::TxAttachment& a = *b->attachment;
    if (a.lifecycle.released.load(std::memory_order_relaxed)) continue;
    work |= complete(*b);
    bool stopping = a.lifecycle.closing.load(std::memory_order_acquire) ||
                    a.lifecycle.violated.load(std::memory_order_relaxed);
    if (!stopping) {
      work |= send(*b);
      continue;
    }
    flush_pending(*b);
    if (b->in_flight > 0) {
      rte_eth_tx_done_cleanup(port_, queue_, 0);
      complete(*b);
    }
    // Only once DPDK has let go of every buffer may the client's memory be unregistered.
    if (b->in_flight == 0 && a.lifecycle.closing.load(std::memory_order_acquire)) a.detach();
  }
  return work;
}

dataplane::NicQueueStats DpdkTxQueue::stats(const std::string& name) const {
  dataplane::NicQueueStats s;
  s.name = name;
  s.rx = false;
  s.packets = counters.packets.load(std::memory_order_relaxed);
  s.bytes = counters.bytes.load(std::memory_order_relaxed);
  s.no_header = counters.no_header.load(std::memory_order_relaxed);
  s.oversize = counters.oversize.load(std::memory_order_relaxed);
  return s;
}

Result<> DpdkTxQueue::add(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) {
  const dataplane::GpuTxBuffers* gpu = a->gpu_buffers();
  if ((gpu != nullptr) != (split_header_ != 0)) {
    return fail(ErrorCode::kInternal, gpu ? "GPU buffers on a queue that sends host memory"
                                          : "host buffers on a queue that sends GPU memory");
  }
  // Split, only the GPU buffers are chained (the headers are copied): the NIC reads them.
  auto ext = gpu ? ExternalMemory::register_range(gpu->memory.base, gpu->memory.bytes, kGpuPageSize,
                                                  dma_device_)
                 : ExternalMemory::register_memory(a->buffers(), dma_device_);
  if (!ext) return std::unexpected(ext.error());
  auto b = std::make_unique<Binding>(a->num_bufs());
  b->attachment = a;
  b->memory = std::move(*ext);
  b->stride = gpu ? gpu->info.slot_size : a->buf_size();
  bindings_.add(a, std::move(b), epoch);
  return {};
}

dataplane::Grace DpdkTxQueue::remove(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) {
  return bindings_.remove(a, epoch);
}

}  // namespace daqiri::backends::dpdk
