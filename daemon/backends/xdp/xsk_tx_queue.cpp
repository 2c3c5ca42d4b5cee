#include "backends/xdp/xsk_tx_queue.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "dataplane/tx_frame_policy.hpp"

namespace daqiri::backends::xdp {

XskTxQueue::XskTxQueue(XskSocket& socket, const XskTxSetup& setup)
    : socket_(socket),
      tx_(socket.tx()),
      completion_(socket.completion()),
      batch_(std::min(setup.batch, kMaxBatch)),
      policy_(setup.policy),
      source_ipv4_(setup.source_ipv4),
      mac_(setup.mac),
      pacer_(setup.pacing_mbps, setup.max_frame),
      send_times_(setup.send_times) {
  free_.reserve(socket.tx_chunks());
  for (uint32_t i = socket.tx_chunks(); i > 0; --i)
    free_.push_back(i - 1);
}

bool XskTxQueue::poll() {
  bool work = reap();
  work |= dataplane::serve_copying(attachments(), pacer_,
                                   [this](dataplane::TxAttachment& a) { return drain(a); });
  // What the last kick left in the TX ring (copy mode sends a few dozen a call).
  if (in_flight_ > 0) {
    kick();
    work = true;
  }
  return work;
}

bool XskTxQueue::reap() {
  uint32_t first = 0;
  const uint32_t n = xsk_ring_cons__peek(&completion_, XSK_RING_CONS__DEFAULT_NUM_DESCS, &first);
  if (n == 0) return false;
  const uint32_t chunk = socket_.chunk_size();
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t addr = *xsk_ring_cons__comp_addr(&completion_, first + i);
    free_.push_back(static_cast<uint32_t>(addr / chunk));
  }
  xsk_ring_cons__release(&completion_, n);
  in_flight_ -= n;
  return true;
}

void XskTxQueue::kick() {
  // The kernel's way (Documentation/networking/af_xdp.rst): in copy mode it sends inside this
  // call, in zero-copy mode the call wakes the driver. A busy or full device says EAGAIN or
  // EBUSY: the frames stay in the ring for the next poll's kick.
  if (!xsk_ring_prod__needs_wakeup(&tx_)) return;
  sendto(socket_.fd(), nullptr, 0, MSG_DONTWAIT, nullptr, 0);
  dataplane::bump(counters.kicks, 1);
}

bool XskTxQueue::drain(dataplane::TxAttachment& a) {
  if (pacer_.budget() == 0 || free_.empty()) return false;
  const uint32_t n =
      a.take(descs_.data(), std::min(batch_, static_cast<uint32_t>(free_.size())), pacer_);
  if (n == 0) return false;
  // Frames the policy refuses are completed first, as failed; the rest keep their order.
  uint32_t m = 0;
  uint32_t refused = 0;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const daqiri_tx_desc& d = descs_[i];
    // take() checked d.length against the TX region's buf_size, which fits a chunk.
    const uint32_t chunk = free_[free_.size() - 1 - m];
    std::byte* copy = socket_.tx_chunk(chunk);
    std::memcpy(copy, a.buffer(d.buffer), d.length);
    auto verdict = dataplane::check_tx_frame({copy, d.length}, d.length, source_ipv4_, policy_);
    if (verdict.refused != nullptr) {
      descs_[refused++] = d;  // i >= refused: a slot already read
      continue;
    }
    if (policy_ == config::TxPolicy::kChecked) std::memcpy(copy + 6, mac_.data(), mac_.size());
    pending_[m] = d;
    chunks_[m] = chunk;
    bytes += d.length;
    ++m;
  }
  if (refused > 0) {
    dataplane::bump(a.counters.refused, refused);
    a.complete(descs_.data(), refused, true);
  }
  if (m == 0) return true;
  // The ring has room for every chunk: it holds as many entries as there are chunks.
  uint32_t slot = 0;
  xsk_ring_prod__reserve(&tx_, m, &slot);
  for (uint32_t i = 0; i < m; ++i) {
    xdp_desc* x = xsk_ring_prod__tx_desc(&tx_, slot + i);
    x->addr = socket_.tx_address(chunks_[i]);
    x->len = pending_[i].length;
    x->options = 0;
  }
  xsk_ring_prod__submit(&tx_, m);
  free_.resize(free_.size() - m);
  in_flight_ += m;
  kick();
  dataplane::bump(a.counters.packets, m);
  dataplane::bump(a.counters.bytes, bytes);
  dataplane::bump(counters.packets, m);
  dataplane::bump(counters.bytes, bytes);
  a.complete(pending_.data(), m);  // the frames are the chunks' now
  return true;
}

dataplane::NicQueueStats XskTxQueue::stats(const std::string& name) const {
  dataplane::NicQueueStats s;
  s.name = name;
  s.rx = false;
  s.packets = counters.packets.load(std::memory_order_relaxed);
  s.bytes = counters.bytes.load(std::memory_order_relaxed);
  return s;
}

}  // namespace daqiri::backends::xdp
