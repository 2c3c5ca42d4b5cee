// The daemon's own record of what one client's RX ring has on loan: for each slot from the
// oldest not yet given back to the newest lent, the buffer it lends (its pool and index, or,
// lent to this client alone, the pool owner's object for it), and the return of a released
// stretch to the pools. It is the only record the daemon trusts: the client's consumer index
// says how far it released, and give_back() returns exactly the buffers lent in that stretch,
// each once. Poller side only (no atomics, no locks, no allocation after construction).
//
// Invariants (tests/unit/dataplane/loan_ledger_test.cpp):
// - returned() <= lent(), and lent() - returned() <= the ring's size;
// - a slot lent by index names one of the ledger's pools (or kNoBuffer: nothing lent);
// - give_back(to) with returned() <= to <= lent() drops one reference of every buffer lent in
//   [returned(), to), objects straight back to their owner, and nothing else;
// - slots lent alone are kept apart from slots lent by index only from the first by-index
//   lend after them (mark_by_index), so that lending alone costs no ledger store.
#pragma once

#include <cstdint>
#include <vector>

#include "daqiri/abi.h"
#include "memory/buffer_pool.hpp"

namespace daqiri::dataplane {

class LoanLedger {
 public:
  // A ledger entry is the region index above kRegionShift and the buffer index below.
  static constexpr uint32_t kRegionShift = 28;
  // An entry that lends nothing (a frame the NIC split whose bytes all went to the header).
  static constexpr uint32_t kNoBuffer = (1u << kRegionShift) - 1;
  // The entry of a slot lent alone: its buffer is the object recorded for the slot.
  static constexpr uint32_t kAlone = UINT32_MAX;
  static constexpr size_t kMaxRegions = DAQIRI_MAX_REGIONS;
  static_assert((kAlone >> kRegionShift) >= kMaxRegions);

  // `pools`: the pools buffers come from, by region (at most kMaxRegions); they outlive it.
  LoanLedger(uint32_t ring_size, std::vector<memory::BufferPool*> pools);

  [[nodiscard]] const std::vector<memory::BufferPool*>& pools() const { return pools_; }
  // Whether slots may be lent alone, as objects: one pool, whose buffers go back to their
  // owner (BufferPool::Mode::kReturnedToOwner).
  [[nodiscard]] bool lends_objects() const { return !objects_.empty(); }
  [[nodiscard]] uint32_t returned() const { return returned_; }
  [[nodiscard]] static uint32_t entry(uint16_t region, uint32_t buffer) {
    return (uint32_t{region} << kRegionShift) | buffer;
  }

  // ---- lending, for a producer that keeps its index in registers (RxAttachment::Run) ----
  [[nodiscard]] uint32_t* entries() { return entries_.data(); }
  [[nodiscard]] void** objects() { return objects_.data(); }
  // Slots [run_start, run_end) were just lent, some of them by index: the slots lent alone
  // before the run since the last such call get their kAlone entry now.
  void mark_by_index(uint32_t run_start, uint32_t run_end) {
    for (uint32_t s = by_index_until_; s != run_start; ++s)
      entries_[s & mask_] = kAlone;
    by_index_until_ = run_end;
  }

  // Gives back slots [returned(), to): each buffer's reference, or object, to its pool.
  void give_back(uint32_t to);

 private:
  // give_back() of `n` slots from slot `at` (no wrap) of a ledger that lends_objects().
  void give_back_mixed(uint32_t at, uint32_t n);
  void unref(uint32_t e) {
    uint32_t buffer = e & kNoBuffer;
    if (buffer != kNoBuffer) pools_[e >> kRegionShift]->unref(buffer);
  }

  std::vector<memory::BufferPool*> pools_;
  uint32_t mask_;
  uint32_t size_;
  // Region and buffer of each slot lent by index; kAlone for one lent alone, written only
  // once a lend by index follows it (mark_by_index): slots in [by_index_until_, the producer)
  // have none.
  std::vector<uint32_t> entries_;
  // lends_objects(): the pool object of each slot lent alone. Slots before by_index_until_ may
  // have been lent by index, their buffers perhaps lent to other clients too: those go back
  // by reference count.
  std::vector<void*> objects_;
  uint32_t by_index_until_ = 0;
  uint32_t returned_ = 0;
};

}  // namespace daqiri::dataplane
