#include "dataplane/loan_ledger.hpp"

#include <algorithm>

namespace daqiri::dataplane {

LoanLedger::LoanLedger(uint32_t ring_size, std::vector<memory::BufferPool*> pools)
    : pools_(std::move(pools)), mask_(ring_size - 1), size_(ring_size), entries_(ring_size) {
  if (pools_.size() == 1 && pools_[0]->mode() == memory::BufferPool::Mode::kReturnedToOwner) {
    objects_.resize(ring_size);
  }
}

void LoanLedger::give_back(uint32_t to) {
  if (pools_.size() > 1) {
    for (; returned_ != to; ++returned_)
      unref(entries_[returned_ & mask_]);
    return;
  }
  // One pool: slots up to by_index_until_ go back by their buffer indices (or kNoBuffer, which
  // the pool skips), those lent alone after it as their objects, without a look at an index
  // or a count. Each in at most two runs of the ring.
  uint32_t by_index = to - returned_;
  if (lends_objects()) {
    by_index = std::min(by_index, by_index_until_ - returned_);
    if (by_index_until_ - returned_ <= to - returned_) by_index_until_ = to;
  }
  for (uint32_t end = returned_ + by_index; returned_ != end;) {
    uint32_t at = returned_ & mask_;
    uint32_t run = std::min(end - returned_, size_ - at);
    if (lends_objects()) {
      give_back_mixed(at, run);
    } else {
      pools_[0]->unref_many(entries_.data() + at, run);
    }
    returned_ += run;
  }
  while (returned_ != to) {
    uint32_t at = returned_ & mask_;
    uint32_t run = std::min(to - returned_, size_ - at);
    pools_[0]->return_objects(objects_.data() + at, run);
    returned_ += run;
  }
}

// Slots lent by index and alone, mixed (only around a change in the flow's clients): each
// stretch of one kind its own way.
void LoanLedger::give_back_mixed(uint32_t at, uint32_t n) {
  const uint32_t* e = entries_.data() + at;
  for (uint32_t i = 0; i < n;) {
    uint32_t j = i;
    while (j < n && e[j] != kAlone)
      ++j;
    if (j > i) pools_[0]->unref_many(e + i, j - i);
    uint32_t k = j;
    while (k < n && e[k] == kAlone)
      ++k;
    if (k > j) pools_[0]->return_objects(objects_.data() + at + j, k - j);
    i = k;
  }
}

}  // namespace daqiri::dataplane
