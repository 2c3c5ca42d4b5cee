#include "backends/socket/tcp_tx_queue.hpp"

#include <sys/socket.h>

#include <cerrno>

#include "backends/socket/poller_syscalls.hpp"

namespace daqiri::backends::socket {

std::unique_ptr<TcpTxQueue> TcpTxQueue::create(TcpConnections* connections, uint32_t batch,
                                               uint32_t max_message, uint32_t pacing_mbps) {
  return std::unique_ptr<TcpTxQueue>(new TcpTxQueue(connections, std::min(batch, kMaxBatch),
                                                    dataplane::TxPacer(pacing_mbps, max_message)));
}

TcpTxQueue::TcpTxQueue(TcpConnections* connections, uint32_t batch, dataplane::TxPacer pacer)
    : connections_(connections), batch_(batch), pacer_(pacer) {}

bool TcpTxQueue::poll() {
  bool work = false;
  const Set& set = bindings_.load();
  pacer_.refill();
  size_t first = pacer_.first_served(set.size());
  for (size_t i = 0; i < set.size(); ++i) {
    Binding& b = *set[dataplane::served(first, i, set.size())];
    dataplane::TxAttachment& a = *b.attachment;
    if (a.lifecycle.released.load(std::memory_order_relaxed)) continue;
    if (a.lifecycle.closing.load(std::memory_order_acquire)) {
      let_go(b);
      a.detach();  // what it submitted is its own memory, going with it
      continue;
    }
    if (a.lifecycle.violated.load(std::memory_order_relaxed)) continue;
    work |= drain(b);
  }
  return work;
}

bool TcpTxQueue::drain(Binding& b) {
  if (b.head == b.count) {
    if (pacer_.budget() == 0) return false;
    b.head = 0;
    b.count = b.attachment->take(b.backlog.data(), batch_, pacer_);
    if (b.count == 0) return false;
  }
  bool work = false;
  while (b.head < b.count) {
    // A run: the messages from here on that name the same connection, written in one call.
    uint16_t named = static_cast<uint16_t>(b.backlog[b.head].flags >> DAQIRI_TX_CONNECTION_SHIFT);
    uint32_t end = b.head + 1;
    while (end < b.count && (b.backlog[end].flags >> DAQIRI_TX_CONNECTION_SHIFT) == named)
      ++end;
    uint16_t stream = b.held;
    if (stream == 0) {
      stream = named;
      TcpConnections::Claim c = connections_->claim(stream);
      if (c == TcpConnections::Claim::kBusy) break;  // another writer's message: later
      if (c == TcpConnections::Claim::kNone) {
        dataplane::bump(b.attachment->counters.refused, end - b.head);
        finish(b, end - b.head, true);
        work = true;
        continue;
      }
    }
    work |= write_run(b, stream, end);
    if (b.head < end && b.written > 0) {  // the socket is full mid-message: keep the claim
      b.held = stream;
      break;
    }
    b.held = 0;
    connections_->let_go(stream);
    if (b.head < end) break;  // full at a message's start: the rest waits
  }
  return work;
}

bool TcpTxQueue::write_run(Binding& b, uint16_t stream, uint32_t end) {
  dataplane::TxAttachment& a = *b.attachment;
  if (connections_->ended(stream)) {  // the flow closed it while we held it
    dataplane::bump(a.counters.send_errors, end - b.head);
    b.written = 0;
    finish(b, end - b.head, true);
    return true;
  }
  uint32_t n = end - b.head;
  for (uint32_t i = 0; i < n; ++i) {
    const daqiri_tx_desc& d = b.backlog[b.head + i];
    // take() checked the buffer index and 0 < length <= buf_size.
    auto* base = const_cast<std::byte*>(a.buffer(d.buffer));
    iov_[i] = {base, d.length};
  }
  iov_[0].iov_base = static_cast<std::byte*>(iov_[0].iov_base) + b.written;
  iov_[0].iov_len -= b.written;
  msghdr msg{};
  msg.msg_iov = iov_.data();
  msg.msg_iovlen = n;
  ssize_t sent = sendmsg_now(connections_->fd(stream), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
    // The connection failed (reset, or the peer went): these messages never will go; its
    // flow sees the same and ends it.
    dataplane::bump(a.counters.send_errors, n);
    b.written = 0;
    finish(b, n, true);
    return true;
  }
  auto left = static_cast<uint64_t>(sent) + b.written;
  uint32_t whole = 0;
  uint64_t bytes = 0;
  while (whole < n && left >= b.backlog[b.head + whole].length) {
    left -= b.backlog[b.head + whole].length;
    bytes += b.backlog[b.head + whole].length;
    ++whole;
  }
  b.written = static_cast<uint32_t>(left);
  dataplane::bump(a.counters.packets, whole);
  dataplane::bump(a.counters.bytes, bytes);
  finish(b, whole, false);
  return true;
}

void TcpTxQueue::finish(Binding& b, uint32_t n, bool failed) {
  b.attachment->complete(b.backlog.data() + b.head, n, failed);
  b.head += n;
}

void TcpTxQueue::let_go(Binding& b) {
  if (b.held != 0) {
    if (b.written > 0) ::shutdown(connections_->fd(b.held), SHUT_RDWR);
    connections_->let_go(b.held);
  }
  b.held = 0;
  b.written = 0;
  b.head = b.count = 0;
}

bool TcpTxQueue::arm_wakeups() {
  return dataplane::arm_wakeups(bindings_.load(), attachment_of);
}

void TcpTxQueue::disarm_wakeups() {
  dataplane::disarm_wakeups(bindings_.load(), attachment_of);
}

bool TcpTxQueue::needs_timed_wakeup() const {
  const Set& set = bindings_.load();
  return dataplane::has_client_without_kicks(set, attachment_of) ||
         std::any_of(set.begin(), set.end(), [](const Binding* b) { return b->head < b->count; });
}

Result<> TcpTxQueue::add(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) {
  auto b = std::make_unique<Binding>();
  b->attachment = a;
  bindings_.add(a, std::move(b), epoch);
  return {};
}

dataplane::Grace TcpTxQueue::remove(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) {
  return bindings_.remove(a, epoch);
}

}  // namespace daqiri::backends::socket
