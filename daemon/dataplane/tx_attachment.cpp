#include "dataplane/tx_attachment.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <bit>

#include "daqiri/frame.hpp"
#include "dataplane/receive_clock.hpp"

namespace daqiri::dataplane {
namespace {
// A descriptor's connection, as TCP and RDMA queues read it from `flags`.
constexpr uint32_t kConnectionBits = 0xffffu << DAQIRI_TX_CONNECTION_SHIFT;
}  // namespace

Result<std::unique_ptr<TxAttachment>> TxAttachment::create(uint64_t id, uint32_t buf_size,
                                                           uint32_t num_bufs, uint32_t ring_size,
                                                           bool huge, TxRules rules,
                                                           bool client_kicks) {
  // The completion ring holds every buffer at once: it can never overflow.
  uint32_t completion_size = std::bit_ceil(num_bufs);
  size_t tx_bytes = abi::RingView::bytes_for(ring_size, sizeof(daqiri_tx_desc));
  size_t comp_bytes = abi::RingView::bytes_for(completion_size, sizeof(uint32_t));
  auto rings =
      memory::SharedMemory::create("tx-rings-" + std::to_string(id), tx_bytes + comp_bytes, false);
  if (!rings) return std::unexpected(rings.error());
  Result<memory::SharedMemory> buffers;
  if (buf_size != 0) {
    buffers = memory::SharedMemory::create("tx-buffers-" + std::to_string(id),
                                           uint64_t{buf_size} * num_bufs, huge);
    if (!buffers) return std::unexpected(buffers.error());
    if (auto ok = buffers->seal_size(); !ok) return std::unexpected(ok.error());
  }
  if (auto ok = rings->seal_size(); !ok) return std::unexpected(ok.error());
  UniqueFd efd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  UniqueFd kick(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!efd || !kick) return fail_errno("eventfd");
  auto tx = abi::RingView::create(rings->data(), DAQIRI_RING_TX, ring_size, sizeof(daqiri_tx_desc));
  auto comp = abi::RingView::create(rings->data() + tx_bytes, DAQIRI_RING_COMPLETION,
                                    completion_size, sizeof(uint32_t));
  return std::unique_ptr<TxAttachment>(
      new TxAttachment(id, std::move(*rings), std::move(*buffers), std::move(efd), std::move(kick),
                       tx, comp, tx_bytes, buf_size, num_bufs, rules, client_kicks));
}

TxAttachment::TxAttachment(uint64_t id, memory::SharedMemory rings, memory::SharedMemory buffers,
                           UniqueFd eventfd, UniqueFd kick, abi::RingView tx,
                           abi::RingView completion, size_t completion_offset, uint32_t buf_size,
                           uint32_t num_bufs, TxRules rules, bool client_kicks)
    : id_(id),
      rings_(std::move(rings)),
      buffers_(std::move(buffers)),
      eventfd_(std::move(eventfd)),
      kick_(std::move(kick)),
      tx_(tx),
      completion_(completion),
      completion_offset_(completion_offset),
      buf_size_(buf_size),
      num_bufs_(num_bufs),
      rules_(rules),
      client_kicks_(client_kicks),
      with_daemon_(num_bufs, 0) {}

uint32_t TxAttachment::take(daqiri_tx_desc* out, uint32_t max, TxPacer& pacer) {
  uint32_t p = tx_.load_producer();
  uint32_t pending = p - tx_cons_;
  if (pending > tx_.size()) {
    bump(counters.bad_index, 1);
    lifecycle.violated.store(true, std::memory_order_release);
    return 0;
  }
  uint32_t n = pending < max ? pending : max;
  uint32_t taken = 0;
  uint64_t spent = 0;
  const uint64_t budget = pacer.budget();
  uint64_t now = 0;  // read at the first frame with a send time
  for (; taken < n && spent < budget; ++taken) {
    daqiri_tx_desc d = *tx_.slot<daqiri_tx_desc>(tx_cons_);  // read once: the client may change it
    if (!valid(d)) {
      bump(counters.bad_descriptor, 1);
      lifecycle.violated.store(true, std::memory_order_release);
      break;
    }
    if ((d.flags & DAQIRI_TX_AT) != 0 && rules_.send_times && !rules_.nic_schedules) {
      if (now == 0) now = ReceiveClock::now_ns();
      if (daqiri_tx_desc_time(&d, now) > now) break;
    }
    with_daemon_[d.buffer] = 1;
    out[taken] = d;
    spent += d.length;
    ++tx_cons_;
  }
  if (taken > 0) tx_.publish_consumer(tx_cons_);
  pacer.spend(spent);
  return taken;
}

bool TxAttachment::valid(const daqiri_tx_desc& d) const {
  if (d.buffer >= num_bufs_ || with_daemon_[d.buffer] != 0) return false;
  if (d.length < rules_.min_length ||
      d.length > (rules_.max_length != 0 ? rules_.max_length : buf_size_)) {
    return false;
  }
  if (rules_.connections) {
    return (d.flags & ~kConnectionBits) == 0 && d.remote == 0;
  }
  if (!rules_.rdma_ops) {
    // A send time, or nothing.
    if (rules_.send_times && (d.flags & DAQIRI_TX_AT) != 0) {
      return (d.flags & ((1u << DAQIRI_TX_TIME_SHIFT) - 1)) == DAQIRI_TX_AT;
    }
    return d.flags == 0 && d.remote == 0;
  }
  // The connection and the slot are the backend's to check: they name the peer's state.
  uint32_t op = d.flags & DAQIRI_TX_OP_MASK;
  return op < DAQIRI_TX_RDMA_OPS && (d.flags & ~(DAQIRI_TX_OP_MASK | kConnectionBits)) == 0;
}

void TxAttachment::complete(const daqiri_tx_desc* done, uint32_t n, bool failed) {
  if (n == 0) return;
  uint32_t flag = failed ? DAQIRI_COMPLETION_FAILED : 0;
  for (uint32_t i = 0; i < n; ++i) {
    with_daemon_[done[i].buffer] = 0;
    *completion_.slot<uint32_t>(comp_prod_++) = done[i].buffer | flag;
  }
  completion_.publish_producer(comp_prod_);
  completion_.wake_consumer(eventfd_.get());
}

void TxAttachment::detach() {
  tx_.set_state(DAQIRI_RING_DETACHED);
  completion_.set_state(DAQIRI_RING_DETACHED);
  uint64_t one = 1;
  [[maybe_unused]] auto w = ::write(eventfd_.get(), &one, sizeof one);
  lifecycle.released.store(true, std::memory_order_release);
}

}  // namespace daqiri::dataplane
