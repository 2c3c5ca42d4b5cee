#include "backends/socket/tcp_connections.hpp"

#include <unistd.h>

namespace daqiri::backends::socket {

TcpConnections::~TcpConnections() {
  // Every flow and queue is gone: what is still taken closes here.
  for (uint32_t s = 1; s < kSlots; ++s) {
    if ((state_[s].load(std::memory_order_acquire) & kTaken) != 0) ::close(fds_[s]);
  }
}

uint16_t TcpConnections::add(UniqueFd fd, bool open) {
  // Ids run on from the last one given out: a slot is reused only once the ids have gone
  // round, so a writer still naming a closed connection finds someone else's id in the slot.
  for (uint32_t tries = 0; tries < 2 * kSlots; ++tries) {
    auto stream = static_cast<uint16_t>(next_stream_.fetch_add(1, std::memory_order_relaxed));
    uint32_t slot = stream % kSlots;
    if (slot == 0) continue;
    uint32_t expected = 0;
    if (!state_[slot].compare_exchange_strong(expected, kTaken | stream,
                                              std::memory_order_acq_rel)) {
      continue;
    }
    fds_[slot] = fd.release();
    order_[slot].store(next_order_.fetch_add(1, std::memory_order_relaxed),
                       std::memory_order_relaxed);
    if (open) opened(stream);
    return stream;
  }
  return 0;
}

void TcpConnections::opened(uint16_t stream) {
  state_[stream % kSlots].fetch_or(kOpen, std::memory_order_release);
}

void TcpConnections::remove(uint16_t stream) {
  uint32_t slot = stream % kSlots;
  uint32_t was = state_[slot].fetch_or(kRemoved, std::memory_order_acq_rel);
  if ((was & kWriter) == 0) release(slot);
}

void TcpConnections::release(uint32_t slot) {
  ::close(fds_[slot]);
  fds_[slot] = -1;
  state_[slot].store(0, std::memory_order_release);
}

TcpConnections::Claim TcpConnections::claim(uint16_t& stream) {
  if (stream == 0) {
    uint64_t oldest = UINT64_MAX;
    for (uint32_t s = 1; s < kSlots; ++s) {
      uint32_t st = state_[s].load(std::memory_order_acquire);
      if ((st & (kOpen | kRemoved)) != kOpen) continue;
      uint64_t o = order_[s].load(std::memory_order_relaxed);
      if (o < oldest) {
        oldest = o;
        stream = static_cast<uint16_t>(st & kStreamMask);
      }
    }
    if (stream == 0) return Claim::kNone;
  }
  std::atomic<uint32_t>& st = state_[stream % kSlots];
  uint32_t now = st.load(std::memory_order_acquire);
  for (;;) {
    if ((now & kStreamMask) != stream || (now & (kOpen | kRemoved)) != kOpen) return Claim::kNone;
    if ((now & kWriter) != 0) return Claim::kBusy;
    if (st.compare_exchange_weak(now, now | kWriter, std::memory_order_acq_rel)) {
      return Claim::kClaimed;
    }
  }
}

void TcpConnections::let_go(uint16_t stream) {
  uint32_t slot = stream % kSlots;
  uint32_t was = state_[slot].fetch_and(~kWriter, std::memory_order_acq_rel);
  if ((was & kRemoved) != 0) release(slot);
}

uint32_t TcpConnections::open_count() const {
  uint32_t n = 0;
  for (uint32_t s = 1; s < kSlots; ++s) {
    uint32_t st = state_[s].load(std::memory_order_relaxed);
    n += (st & (kOpen | kRemoved)) == kOpen ? 1 : 0;
  }
  return n;
}

}  // namespace daqiri::backends::socket
