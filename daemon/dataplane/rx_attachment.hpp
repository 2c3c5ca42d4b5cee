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
  // `pools`: the flow pools it is fed from, in region-table order (one for a flow attachment,
  // one per flow for a queue attachment). They must outlive it.
  static Result<std::unique_ptr<RxAttachment>> create(uint64_t id, uint32_t ring_size,
                                                      Backpressure backpressure,
                                                      std::vector<memory::BufferPool*> pools);
  static constexpr size_t kMaxRegions = DAQIRI_MAX_REGIONS;

  [[nodiscard]] uint64_t id() const { return id_; }
  [[nodiscard]] Backpressure backpressure() const { return backpressure_; }
  [[nodiscard]] memory::SharedMemory& rings() { return rings_; }
  // The ring itself, for a consumer inside the daemon (the GPU copy engine).
  [[nodiscard]] const abi::RingView& ring() const { return ring_; }
  [[nodiscard]] int eventfd() const { return eventfd_.get(); }
  AttachmentLifecycle lifecycle;
  AttachmentCounters counters;

  // ---- poller side ----
  [[nodiscard]] uint32_t free_slots() const { return ring_.size() - (prod_ - cons_); }
  bool stalled = false;  // block backpressure: its full ring holds the flow back now
  // Lends `buffer` of `pool` (one of this attachment's pools) under `desc`.
  void push(const daqiri_rx_desc& desc, uint32_t buffer, const memory::BufferPool* pool) {
    uint32_t region = 0;
    while (pools_[region] != pool)
      ++region;  // at most kMaxRegions compares
    auto* slot = ring_.slot<daqiri_rx_desc>(prod_);
    *slot = desc;
    slot->region = static_cast<uint16_t>(region);
    shadow_[prod_ & ring_.mask()] = (region << kRegionShift) | buffer;
    ++prod_;
  }
  [[nodiscard]] const std::vector<memory::BufferPool*>& pools() const { return pools_; }
  // Makes pushed descriptors visible and wakes a sleeping client.
  void publish();
  // Takes back what the client released. False (and `violated`) when the client's consumer
  // index is impossible: outside [our consumer, our producer].
  bool reclaim();
  // Returns every buffer still on loan and marks the ring detached; the poller's last act.
  void release_all();

 private:
  RxAttachment(uint64_t id, memory::SharedMemory rings, UniqueFd eventfd, abi::RingView ring,
               Backpressure backpressure, std::vector<memory::BufferPool*> pools);
  // A shadow entry is the region index above kRegionShift and the buffer index below.
  static constexpr uint32_t kRegionShift = 28;
  void unref(uint32_t entry) {
    pools_[entry >> kRegionShift]->unref(entry & ((1u << kRegionShift) - 1));
  }

  uint64_t id_;
  memory::SharedMemory rings_;
  UniqueFd eventfd_;
  abi::RingView ring_;
  Backpressure backpressure_;
  std::vector<memory::BufferPool*> pools_;
  std::vector<uint32_t> shadow_;  // region and buffer of each slot we produced
  uint32_t prod_ = 0;             // our producer index
  uint32_t published_ = 0;
  uint32_t cons_ = 0;  // the consumer index we have validated and reclaimed up to
};

}  // namespace daqiri::dataplane
