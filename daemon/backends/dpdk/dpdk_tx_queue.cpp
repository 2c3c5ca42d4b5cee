#include "backends/dpdk/dpdk_tx_queue.hpp"

#include <rte_errno.h>
#include <rte_ethdev.h>

#include <algorithm>

namespace daqiri::backends::dpdk {

Result<std::unique_ptr<DpdkTxQueue>> DpdkTxQueue::create(uint16_t port, uint16_t queue,
                                                         const std::string& pool_name,
                                                         uint32_t descriptors, uint32_t batch,
                                                         uint32_t max_frame, int socket,
                                                         rte_device* dma_device) {
  batch = std::min(batch, kMaxBatch);
  // Enough headers for a full NIC ring, a stash and some pending frames; running dry is
  // handled (see the header comment), so this is about throughput, not correctness.
  uint32_t count = descriptors + 4 * batch + 512;
  rte_mempool* headers =
      rte_pktmbuf_pool_create(pool_name.c_str(), count, mempool_cache_size(count), 0, 0, socket);
  if (headers == nullptr) {
    return fail(
        ErrorCode::kResourceExhausted,
        "TX header pool " + pool_name + ": " + rte_strerror(rte_errno) + " (raise dpdk.memory_mb)");
  }
  return std::unique_ptr<DpdkTxQueue>(
      new DpdkTxQueue(port, queue, headers, batch, max_frame, dma_device));
}

DpdkTxQueue::DpdkTxQueue(uint16_t port, uint16_t queue, rte_mempool* headers, uint32_t batch,
                         uint32_t max_frame, rte_device* dma_device)
    : port_(port),
      queue_(queue),
      headers_(headers),
      batch_(batch),
      max_frame_(max_frame),
      dma_device_(dma_device),
      set_(std::make_unique<const Set>()) {}

DpdkTxQueue::~DpdkTxQueue() {
  if (stash_count_ > 0) rte_pktmbuf_free_bulk(stash_.data(), stash_count_);
  rte_mempool_free(headers_);
}

void DpdkTxQueue::on_freed(void* addr, void* opaque) {
  auto* b = static_cast<Binding*>(opaque);
  const std::byte* base = b->memory->base();
  auto index = static_cast<uint32_t>((static_cast<const std::byte*>(addr) - base) /
                                     b->attachment->buf_size());
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
  if (stash_count_ < batch_) refill_stash();
  uint32_t n = a.take(descs_.data(), stash_count_);
  if (n == 0) {
    // Nothing new: let a lazy PMD give back what it has sent, so clients get their buffers.
    if (b.in_flight > 0) rte_eth_tx_done_cleanup(port_, queue_, 0);
    return false;
  }
  const std::byte* base = b.memory->base();
  uint32_t ready = 0;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const daqiri_tx_desc& d = descs_[i];
    if (d.length > max_frame_) {
      dataplane::bump(counters.oversize, 1);
      dataplane::bump(a.counters.send_errors, 1);
      a.complete(&d, 1, true);
      continue;
    }
    rte_mbuf* m = stash_[--stash_count_];
    rte_mbuf_ext_shared_info* sh = &b.shinfo[d.buffer];
    sh->free_cb = &DpdkTxQueue::on_freed;
    sh->fcb_opaque = &b;
    rte_mbuf_ext_refcnt_set(sh, 1);
    auto* buf = const_cast<std::byte*>(base + uint64_t{d.buffer} * a.buf_size());
    rte_pktmbuf_attach_extbuf(m, buf, b.memory->iova(buf), static_cast<uint16_t>(a.buf_size()), sh);
    m->data_off = 0;
    m->data_len = static_cast<uint16_t>(d.length);
    m->pkt_len = d.length;
    b.pending[ready++] = m;
    bytes += d.length;
    ++b.in_flight;
  }
  uint16_t sent = rte_eth_tx_burst(port_, queue_, b.pending.data(), static_cast<uint16_t>(ready));
  b.pending_first = sent;
  b.pending_count = ready - sent;
  dataplane::bump(a.counters.packets, sent);
  dataplane::bump(a.counters.bytes, bytes);
  dataplane::bump(counters.packets, sent);
  dataplane::bump(counters.bytes, bytes);
  return true;
}

bool DpdkTxQueue::arm_wakeups() {
  return dataplane::arm_wakeups(set_.load(), attachment_of);
}

void DpdkTxQueue::disarm_wakeups() {
  dataplane::disarm_wakeups(set_.load(), attachment_of);
}

bool DpdkTxQueue::needs_timed_wakeup() const {
  const Set& set = set_.load();
  return std::any_of(set.begin(), set.end(), [](const Binding* b) { return b->in_flight > 0; }) ||
         dataplane::has_client_without_kicks(set, attachment_of);
}

bool DpdkTxQueue::poll() {
  bool work = false;
  for (Binding* b : set_.load()) {
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
  auto ext = ExternalMemory::register_memory(a->buffers(), dma_device_);
  if (!ext) return std::unexpected(ext.error());
  auto b = std::make_unique<Binding>(a->num_bufs());
  b->attachment = a;
  b->memory = std::move(*ext);
  auto next = std::make_unique<Set>(set_.load());
  next->push_back(b.get());
  bindings_.push_back(std::move(b));
  set_.replace(std::move(next), epoch);
  return {};
}

void DpdkTxQueue::remove(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) {
  auto next = std::make_unique<Set>(set_.load());
  next->erase(std::remove_if(next->begin(), next->end(),
                             [a](const Binding* b) { return b->attachment == a; }),
              next->end());
  set_.replace(std::move(next), epoch);  // waits until the poller no longer sees it
  std::erase_if(bindings_, [a](const auto& b) { return b->attachment == a; });
}

}  // namespace daqiri::backends::dpdk
