#include "backends/xdp/xsk_rx_queue.hpp"

#include <sys/socket.h>

#include <algorithm>

#include "dataplane/receive_clock.hpp"

namespace daqiri::backends::xdp {

namespace {

// The kernel's preferred busy polling (Documentation/networking/napi.rst): the socket's NAPI
// instance is driven by this poller's receives instead of by interrupts, up to `budget` frames
// a call.
void prefer_busy_poll(int fd, uint32_t budget) {
  int on = 1;
  int usecs = 20;
  int frames = static_cast<int>(budget);
  setsockopt(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &on, sizeof on);
  setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &usecs, sizeof usecs);
  setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &frames, sizeof frames);
}

}  // namespace

memory::BufferPool& XdpRxFlow::pool() {
  return queue_.pool();
}

XskRxQueue::XskRxQueue(XskSocket& socket, const XskQueueSetup& setup)
    : socket_(socket),
      pool_(socket.rx_pool()),
      fill_(socket.fill()),
      rx_(socket.rx()),
      rx_base_(socket.rx_base()),
      ring_size_(setup.ring_size),
      batch_(std::min(setup.batch, kMaxBatch)),
      busy_poll_(setup.busy_poll),
      flows_(std::make_unique<const Flows>()) {
  if (setup.busy_poll) prefer_busy_poll(socket.fd(), batch_);
  refill();
}

void XskRxQueue::refill() {
  uint32_t want = std::min(ring_size_ - posted_, pool_.available());
  starved_ = posted_ + want < ring_size_;
  if (want == 0) return;
  uint32_t slot = 0;
  // The ring has room for every buffer not in the kernel's hands (posted_ counts those).
  if (xsk_ring_prod__reserve(&fill_, want, &slot) != want) return;
  const uint64_t buf_size = pool_.buf_size();
  uint32_t done = 0;
  for (auto run = pool_.oldest_free(want); !run.empty(); run = pool_.oldest_free(want - done)) {
    for (uint32_t b : run)
      *xsk_ring_prod__fill_addr(&fill_, slot++) = rx_base_ + b * buf_size;
    done += static_cast<uint32_t>(run.size());
    pool_.take(static_cast<uint32_t>(run.size()));
  }
  xsk_ring_prod__submit(&fill_, want);
  posted_ += want;
}

inline XdpRxFlow* XskRxQueue::steer(const Flows& flows, const core::PacketFields& fields) {
  for (XdpRxFlow* f : flows) {
    if (f->flow().match.matches(fields)) return f;
  }
  return nullptr;
}

void XskRxQueue::publish_on_loan(const Flows& flows) {
  const uint32_t on_loan = pool_.num_bufs() - pool_.available() - posted_;
  // Stores only on a change (or a new flow set): an idle busy poll would store every counter
  // every round.
  if (on_loan == published_.on_loan && posted_ == published_.posted && &flows == published_.flows) {
    return;
  }
  published_ = {on_loan, posted_, &flows};
  counters.on_loan.store(on_loan, std::memory_order_relaxed);
  counters.posted.store(posted_, std::memory_order_relaxed);
  for (XdpRxFlow* f : flows)
    f->counters.on_loan.store(on_loan, std::memory_order_relaxed);
}

bool XskRxQueue::poll() {
  const Flows& flows = flows_.load();
  // Drained with or without clients: its fd stays readable while frames wait.
  bool wait = false;
  for (XdpRxFlow* f : flows) {
    f->fanout().begin();  // takes back what its clients released
    wait |= f->fanout().must_wait(batch_);
  }
  waiting_ = wait;
  refill();
  publish_on_loan(flows);
  if (wait) return false;  // the socket's RX ring absorbs, then the kernel counts drops
  uint32_t first = 0;
  const uint32_t n = xsk_ring_cons__peek(&rx_, batch_, &first);
  if (n == 0) {
    // The kernel ran out of fill buffers and stopped: a receive call restarts it (need_wakeup,
    // Documentation/networking/af_xdp.rst). Under preferred busy polling the same call is what
    // runs the device's NAPI (napi.rst): the poller makes it whenever it finds the ring empty.
    const bool wakeup = xsk_ring_prod__needs_wakeup(&fill_);
    if (wakeup || busy_poll_) recvfrom(socket_.fd(), nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
    if (wakeup) dataplane::bump(counters.wakeups, 1);
    return false;
  }
  for (XdpRxFlow* f : flows)
    f->fanout().prepare(batch_);
  const uint64_t now = dataplane::ReceiveClock::now_ns();
  const uint64_t buf_size = pool_.buf_size();
  uint64_t bytes = 0;
  XdpRxFlow* counted = nullptr;
  uint64_t run_packets = 0, run_bytes = 0;
  dataplane::RxFanout::Run delivery;
  auto count_run = [&] {
    delivery.finish();
    if (counted == nullptr) return;
    dataplane::bump(counted->counters.packets, run_packets);
    dataplane::bump(counted->counters.bytes, run_bytes);
    run_packets = run_bytes = 0;
  };
  for (uint32_t i = 0; i < n; ++i) {
    const xdp_desc* x = xsk_ring_cons__rx_desc(&rx_, first + i);
    const uint64_t addr = xsk_umem__add_offset_to_addr(x->addr) - rx_base_;
    const auto index = static_cast<uint32_t>(addr / buf_size);
    const uint64_t within = addr - index * buf_size;
    const uint32_t length = x->len;
    bytes += length;
    const std::byte* frame = pool_.buffer(index) + within;
    core::PacketFields fields = core::PacketFields::parse(frame, length);
    XdpRxFlow* flow = steer(flows, fields);
    if (flow == nullptr) {  // its flow went between the filter and here
      dataplane::bump(counters.unmatched, 1);
      pool_.set_refs(index, 0);
      continue;
    }
    if (flow != counted) {
      count_run();
      counted = flow;
      delivery = dataplane::RxFanout::Run(flow->fanout(), &pool_, false);
    }
    ++run_packets;
    run_bytes += length;
    daqiri_rx_desc d{};
    d.offset = pool_.offset(index) + within;
    d.timestamp_ns = now;
    d.length = length;
    d.flow_id = flow->flow().id;
    d.payload_offset = fields.payload_offset;
    const uint16_t refs = delivery.deliver(d, index);
    if (refs == 0) {
      auto& fc = flow->counters;
      dataplane::bump(flow->fanout().active() == 0 ? fc.no_attachment : fc.rings_full, 1);
    }
    pool_.lend(index, refs);  // 0: free again
  }
  count_run();
  xsk_ring_cons__release(&rx_, n);
  posted_ -= n;
  dataplane::bump(counters.packets, n);
  dataplane::bump(counters.bytes, bytes);
  for (XdpRxFlow* f : flows)
    f->fanout().publish();
  refill();
  publish_on_loan(flows);
  return true;
}

bool XskRxQueue::arm_wakeups() {
  if (!waiting_) return true;
  bool quiet = true;
  for (XdpRxFlow* f : flows_.load())
    quiet &= f->fanout().arm_kicks();
  return quiet;
}

void XskRxQueue::disarm_wakeups() {
  for (XdpRxFlow* f : flows_.load())
    f->fanout().disarm_kicks();
}

dataplane::NicQueueStats XskRxQueue::stats(const std::string& name) const {
  dataplane::NicQueueStats s;
  s.name = name;
  s.rx = true;
  s.packets = counters.packets.load(std::memory_order_relaxed);
  s.bytes = counters.bytes.load(std::memory_order_relaxed);
  s.unmatched = counters.unmatched.load(std::memory_order_relaxed);
  s.on_loan = counters.on_loan.load(std::memory_order_relaxed);
  // Buffers neither lent nor posted: what the fill ring can still take.
  const uint32_t used = s.on_loan + counters.posted.load(std::memory_order_relaxed);
  s.mbufs_free = pool_.num_bufs() > used ? pool_.num_bufs() - used : 0;
  return s;
}

void XskRxQueue::add(XdpRxFlow* flow, const dataplane::Epoch& epoch) {
  dataplane::publish_added(flows_, flow, epoch);
}

dataplane::Grace XskRxQueue::remove(XdpRxFlow* flow, const dataplane::Epoch& epoch) {
  return dataplane::publish_removed(flows_, flow, epoch);
}

}  // namespace daqiri::backends::xdp
