#include "orchestrator/data_plane.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

namespace daqiri::orchestrator {

DataPlane::ReleaseWait::ReleaseWait(const std::vector<Poller*>& pollers)
    : deadline_(std::chrono::steady_clock::now() + kReleaseWait) {
  for (Poller* p : pollers)
    counts_.emplace_back(&p->epoch(), p->epoch().count());
}

bool DataPlane::ReleaseWait::over() {
  if (std::any_of(counts_.begin(), counts_.end(), [](const auto& c) { return c.first->stuck(); })) {
    return true;
  }
  if (std::chrono::steady_clock::now() <= deadline_) return false;
  for (const auto& [epoch, then] : counts_)
    epoch->mark_stuck_if_still(then);
  return true;
}

void DataPlane::close(uint64_t id) {
  std::unique_lock lock(mutex_);
  reap_parked_locked();
  auto it = attachments_.find(id);
  if (it == attachments_.end() || it->second.closing) return;  // gone, or another closes it
  if (erased_unclaimed(it)) return;
  begin_close(id, it->second);
  ReleaseWait wait(pollers_of(it->second));
  // The wait is outside the lock, a look under it at a time: stats, scrapes and other clients'
  // calls go on meanwhile, and a flow removal that finishes this close first is seen.
  for (;;) {
    hand_back_when_quiet(it->second);
    bool released = it->second.lifecycle().released.load(std::memory_order_acquire);
    if (released || wait.over()) {
      finish_close(it, released);
      return;
    }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    lock.lock();
    it = attachments_.find(id);
    if (it == attachments_.end()) return;
  }
}

void DataPlane::close_locked(uint64_t id) {
  auto it = attachments_.find(id);
  if (it == attachments_.end() || erased_unclaimed(it)) return;
  if (!it->second.closing) begin_close(id, it->second);
  const dataplane::AttachmentLifecycle& life = it->second.lifecycle();
  ReleaseWait wait(pollers_of(it->second));
  bool released = false;
  while (!(hand_back_when_quiet(it->second) &&
           (released = life.released.load(std::memory_order_acquire))) &&
         !wait.over()) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  finish_close(it, released);
}

bool DataPlane::erased_unclaimed(std::map<uint64_t, Attachment>::iterator it) {
  if (it->second.active) return false;
  drop(it, "its activation was undone");  // no poller saw it, unless one stuck in an undo
  return true;
}

void DataPlane::drop(std::map<uint64_t, Attachment>::iterator it, const char* why) {
  Attachment& a = it->second;
  if (!a.unseen()) {
    std::string pollers;
    for (const Grace& g : a.awaiting) {
      for (const auto& p : pollers_) {
        if (&p->epoch() == g.epoch) pollers += (pollers.empty() ? "" : ", ") + p->name();
      }
    }
    spdlog::error(
        "attachment {} ({}): {}, but its poller ({}) has not come round within {} ms: parked, {} "
        "parked now; daqirid reports NOT_SERVING until it does",
        it->first, target_of(a), why, pollers, Epoch::kGraceWait.count(), parked_.size() + 1);
    parked_.push_back(std::move(a));
  }
  attachments_.erase(it);
}

void DataPlane::begin_close(uint64_t id, Attachment& a) {
  a.closing = true;
  if (a.gpu) {
    a.gpu_removal = a.gpu_poller->remove_task(a.gpu.get(), {a.gpu->wake_fd()});
    a.await(a.gpu_removal);
    const gpu::GpuCopyCounters& c = a.gpu->counters;
    if (a.rx) {
      spdlog::info(
          "gpu ring of attachment {} closed: {} frames, {} straight from their buffers, {} "
          "packed first, in {} copies",
          id, c.packets.load(), c.direct_frames.load(), c.staged_frames.load(), c.copies.load());
    } else {
      spdlog::info("gpu TX of attachment {} closed: {} frames out of GPU memory in {} copies", id,
                   c.packets.load(), c.copies.load());
    }
  }
  hand_back_when_quiet(a);
}

bool DataPlane::hand_back_when_quiet(Attachment& a) {
  dataplane::AttachmentLifecycle& life = a.lifecycle();
  if (life.closing.load(std::memory_order_relaxed)) return true;
  // The GPU ring first: no copy may still read a buffer the RX poller is about to take back,
  // and its poller, once past the removal, launches no more.
  if (a.gpu && (!a.gpu_removal.reached() || !a.gpu->quiesced())) return false;
  life.closing.store(true, std::memory_order_release);
  // The poller returns every buffer and lets go; woken, a sleeping one need not finish its
  // park (up to 1 ms) first.
  for (Poller* p : pollers_of(a))
    p->epoch().wake();
  return true;
}

std::vector<Poller*> DataPlane::pollers_of(const Attachment& a) const {
  std::vector<Poller*> pollers =
      a.rx ? rx_pollers(a) : std::vector<Poller*>{a.tx_queue->home.poller};
  if (a.gpu) pollers.push_back(a.gpu_poller);
  return pollers;
}

void DataPlane::finish_close(std::map<uint64_t, Attachment>::iterator it, bool released) {
  Attachment& a = it->second;
  if (!released) {
    // Its poller still has it (a NIC that never completes its TX, a poller that does not
    // come round): freeing it now would be a use after free. It stays, out of the table,
    // until its poller lets go (reap_parked_locked), and the daemon reports itself unhealthy.
    std::string pollers;
    for (Poller* p : pollers_of(a))
      pollers += (pollers.empty() ? "" : ", ") + p->name();
    spdlog::error(
        "attachment {} ({}) was not let go by its poller ({}) within {} ms: parked, {} parked "
        "now; daqirid reports NOT_SERVING until it is let go",
        it->first, target_of(a), pollers, kReleaseWait.count(), parked_.size() + 1);
    parked_.push_back(std::move(a));
    attachments_.erase(it);
    return;
  }
  retire(a);
  bool rx = a.rx != nullptr;
  drop(it, "let go by its poller and taken out of its sets");
  if (rx) rebalance_shares();
}

void DataPlane::retire(Attachment& a) {
  a.retired = true;
  if (a.rx) {
    remove_rx(a, a.flows.size());
    return;
  }
  Poller& poller = *a.tx_queue->home.poller;
  a.await(poller.unwatch(a.tx->kick_fd()));
  a.await(a.tx_queue->task->remove(a.tx.get(), poller.epoch()));
  if (a.gpu) a.await(a.gpu_poller->unwatch(a.gpu->kick_fd()));
}

void DataPlane::reap_parked_locked() {
  // Lingering flows first: their removal decides when their parked attachments may go.
  reap_lingering_locked();
  for (const auto& p : pollers_)
    p->epoch().reap();
  bool any = false;
  for (Attachment& a : parked_) {
    if (a.retired || !hand_back_when_quiet(a) ||
        !a.lifecycle().released.load(std::memory_order_acquire)) {
      continue;
    }
    // Still in a lingering flow's published set: it goes with the flow's removal.
    if (a.rx && std::any_of(a.flows.begin(), a.flows.end(),
                            [this](const std::string& f) { return lingers(f); })) {
      continue;
    }
    retire(a);
    any = true;
  }
  auto freed = std::partition(parked_.begin(), parked_.end(),
                              [](const Attachment& a) { return !a.retired || !a.unseen(); });
  for (auto p = freed; p != parked_.end(); ++p)
    spdlog::info("a parked attachment ({}) was let go by its pollers at last: freed",
                 target_of(*p));
  any |= freed != parked_.end();
  parked_.erase(freed, parked_.end());
  if (any) rebalance_shares();
}

}  // namespace daqiri::orchestrator
