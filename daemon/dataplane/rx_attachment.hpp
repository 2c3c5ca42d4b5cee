// One client's RX lease on a flow: its descriptor ring in shared memory, its eventfd, and the
// daemon's shadow of that ring — the ledger of every buffer on loan, which is the only record
// the daemon trusts. Created by control; used by the flow's poller only once installed.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "daqiri/abi.h"
#include "daqiri/ring.hpp"
#include "dataplane/attachment_state.hpp"
#include "memory/buffer_pool.hpp"

namespace daqiri::dataplane {

class RxAttachment {
 public:
  static Result<std::unique_ptr<RxAttachment>> create(uint64_t id, uint32_t ring_size,
                                                      Backpressure backpressure);

  [[nodiscard]] uint64_t id() const { return id_; }
  [[nodiscard]] Backpressure backpressure() const { return backpressure_; }
  [[nodiscard]] memory::SharedMemory& rings() { return rings_; }
  [[nodiscard]] int eventfd() const { return eventfd_.get(); }
  AttachmentLifecycle lifecycle;
  AttachmentCounters counters;

  // ---- poller side ----
  [[nodiscard]] uint32_t free_slots() const { return ring_.size() - (prod_ - cons_); }
  void push(const daqiri_rx_desc& desc, uint32_t buffer) {
    *ring_.slot<daqiri_rx_desc>(prod_) = desc;
    shadow_[prod_ & ring_.mask()] = buffer;
    ++prod_;
  }
  // Makes pushed descriptors visible and wakes a sleeping client.
  void publish();
  // Takes back what the client released. False (and `violated`) when the client's consumer
  // index is impossible: outside [our consumer, our producer].
  bool reclaim(memory::BufferPool& pool);
  // Returns every buffer still on loan and marks the ring detached; the poller's last act.
  void release_all(memory::BufferPool& pool);

 private:
  RxAttachment(uint64_t id, memory::SharedMemory rings, UniqueFd eventfd, abi::RingView ring,
               Backpressure backpressure);

  uint64_t id_;
  memory::SharedMemory rings_;
  UniqueFd eventfd_;
  abi::RingView ring_;
  Backpressure backpressure_;
  std::vector<uint32_t> shadow_;  // buffer of each slot we produced
  uint32_t prod_ = 0;             // our producer index
  uint32_t published_ = 0;
  uint32_t cons_ = 0;  // the consumer index we have validated and reclaimed up to
};

}  // namespace daqiri::dataplane
