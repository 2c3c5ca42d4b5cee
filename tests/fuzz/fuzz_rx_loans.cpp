// The RX loan ledger against a hostile client: buffers of one pool delivered to two
// attachments (alone or to both, by reference count), published, and taken back as each
// client's consumer index says, any value it likes, or all at once when it goes. A model beside
// it counts who holds each buffer; after every step the pool must agree: no buffer returned
// twice or lost, an impossible index refused (and nothing taken back for it), every buffer home
// once the clients are gone.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "daqiri/ring.hpp"
#include "dataplane/rx_attachment.hpp"
#include "memory/buffer_pool.hpp"

namespace {

using daqiri::dataplane::Backpressure;
using daqiri::dataplane::RxAttachment;
using daqiri::memory::BufferPool;

constexpr uint32_t kBufs = 64;
constexpr uint32_t kRing = 16;

// One attachment and what the model says it holds: buffers in ring order from its consumer
// index, the first `published` of them visible to its client.
struct Holder {
  std::unique_ptr<RxAttachment> at;
  daqiri::abi::RingView ring;  // the client's view
  std::deque<uint32_t> held;
  uint32_t cons = 0;
  uint32_t published = 0;
};

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  [[nodiscard]] bool empty() const { return at_ >= size_; }
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  uint32_t word() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v = v << 8 | byte();
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

void check(bool ok) {
  if (!ok) __builtin_trap();
}

Holder attach(uint64_t id, BufferPool& pool) {
  auto at = RxAttachment::create(id, kRing, Backpressure::kDropNew, {&pool});
  check(at.has_value());
  auto ring = daqiri::abi::RingView::open((*at)->rings().data(), (*at)->rings().size(),
                                          DAQIRI_RING_RX, sizeof(daqiri_rx_desc));
  check(ring.has_value());
  return Holder{std::move(*at), *ring, {}, 0, 0};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto pool = BufferPool::create("fuzz", 256, kBufs, false);
  check(pool.has_value());
  std::vector<uint16_t> refs(kBufs, 0);  // the model: readers of each buffer
  uint64_t next_id = 1;
  Holder h[2] = {attach(next_id++, *pool), attach(next_id++, *pool)};
  auto drop = [&](Holder& x, uint32_t n) {  // the model's side of a release
    for (uint32_t i = 0; i < n; ++i) {
      check(refs[x.held.front()] > 0);
      --refs[x.held.front()];
      x.held.pop_front();
    }
    x.cons += n;
    x.published -= std::min(n, x.published);
  };
  auto agree = [&] {
    uint32_t free = 0;
    for (uint32_t b = 0; b < kBufs; ++b) {
      if (refs[b] == 0) {
        ++free;
      } else {
        check(pool->refs(b) == refs[b]);
      }
    }
    check(pool->available() == free);
  };
  Input in(data, size);
  while (!in.empty()) {
    uint8_t op = in.byte();
    Holder& x = h[op & 1];
    switch ((op >> 1) % 4) {
      case 0: {  // frames arrive: to one attachment, the other, or both
        uint32_t want = in.byte() % 8 + 1;
        uint32_t bufs[8];
        uint32_t got = pool->alloc(bufs, want);
        uint8_t to = in.byte() % 3 + 1;  // 1: the first, 2: the second, 3: both
        for (uint32_t i = 0; i < got; ++i) {
          uint16_t readers = 0;
          for (int k = 0; k < 2; ++k) {
            if ((to >> k & 1) == 0 || h[k].at->free_slots() == 0) continue;
            daqiri_rx_desc d{};
            d.offset = pool->offset(bufs[i]);
            d.length = 64;
            h[k].at->push(d, bufs[i], &*pool);
            h[k].held.push_back(bufs[i]);
            ++readers;
          }
          pool->lend(bufs[i], readers);
          refs[bufs[i]] = readers;
        }
        break;
      }
      case 1:
        x.at->publish();
        x.published = static_cast<uint32_t>(x.held.size());
        break;
      case 2: {  // the client says how far it has read: near, or anything at all
        uint8_t how = in.byte();
        uint32_t c = (how & 0x80) != 0 ? in.word() : x.cons + (how & 0x1f);
        x.ring.publish_consumer(c);
        bool valid = c - x.cons <= x.published;
        check(x.at->reclaim() == valid);
        if (valid) {
          drop(x, c - x.cons);
        } else {  // cut off: the daemon lets go of all it lent the client
          check(x.at->lifecycle.violated.load());
          x.at->release_all();
          drop(x, static_cast<uint32_t>(x.held.size()));
          x = attach(next_id++, *pool);
        }
        break;
      }
      default:  // the client goes
        x.at->release_all();
        drop(x, static_cast<uint32_t>(x.held.size()));
        x = attach(next_id++, *pool);
        break;
    }
    agree();
  }
  for (Holder& x : h) {
    x.at->release_all();
    drop(x, static_cast<uint32_t>(x.held.size()));
  }
  agree();
  check(pool->available() == kBufs);
  return 0;
}
