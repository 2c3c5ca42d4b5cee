// Immutable snapshots published by pointer, RCU-style: control threads build a new value,
// swap it in, wait until the poller has passed through two loop iterations (so it can no longer
// hold the old pointer), then free the old one. Pollers only ever load. The wait is bounded: a
// poller that does not come round within Epoch::kGraceWait is taken for stuck, and what it
// might still see is kept (dispose) until it moves again, never freed under it.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "dataplane/process_barrier.hpp"

namespace daqiri::dataplane {

class Epoch;

// What a control thread's wait for a poller came to: the loop count after which the poller
// can no longer see what was unpublished, and whether it got there within the bound.
struct Grace {
  const Epoch* epoch = nullptr;
  uint64_t point = 0;
  bool passed = true;
  // Two waits on one epoch: the later point, passed only if both were.
  Grace& operator&=(const Grace& other) {
    if (epoch == nullptr) return *this = other;
    point = std::max(point, other.point);
    passed = passed && other.passed;
    return *this;
  }
  // Whether the poller has come round past it (always, for no wait at all).
  [[nodiscard]] bool reached() const;
};

// Counts a poller's loop iterations. One writer (the poller); control threads wait on it.
class Epoch {
 public:
  // How long a control thread waits for the poller to come round before taking it for stuck.
  static constexpr std::chrono::milliseconds kGraceWait{500};

  // Registers the process for wait_quiescent()'s barrier while the epoch's poller thread does
  // not exist yet: registered later, in the first control change, with threads running, the
  // kernel first waits out an RCU grace period.
  Epoch() { process_barrier_available(); }
  void advance() {
    value_.store(value_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  void set_stopped() { stopped_.store(true, std::memory_order_release); }
  [[nodiscard]] bool stopped() const { return stopped_.load(std::memory_order_acquire); }
  // Loop iterations so far: a poller that makes progress moves it.
  [[nodiscard]] uint64_t count() const { return value_.load(std::memory_order_acquire); }
  [[nodiscard]] bool reached(uint64_t point) const {
    return stopped_.load(std::memory_order_acquire) || count() >= point;
  }
  // An eventfd that ends the poller's park: waits write it, so that an idle poller's
  // iterations (a park each) do not set their pace.
  void wake_with(int eventfd) { wake_fd_ = eventfd; }
  // Ends the poller's park, if it has an eventfd and is parked.
  void wake() const {
    if (wake_fd_ < 0) return;
    uint64_t one = 1;
    [[maybe_unused]] auto w = ::write(wake_fd_, &one, sizeof one);
  }
  // Waits until every loop iteration that might have seen the old snapshot has ended, at most
  // kGraceWait (and not at all while the poller has not moved since it was last found stuck).
  Grace wait_quiescent() const {
    // Without it, the count read below could predate a loop iteration that loaded the old
    // snapshot before the caller swapped it (see process_barrier.hpp). With it, every
    // iteration that can hold the old snapshot ends by the count's next step; two are waited
    // for all the same (the count read may just miss the iteration the barrier hit).
    process_barrier();
    // The count before the wake: woken, the poller may run its idle spins and be asleep again
    // before this thread reads it (a wasted park, a second long when no task needs a timer).
    uint64_t start = value_.load(std::memory_order_acquire);
    Grace g{this, start + 2, true};
    if (stuck()) {
      g.passed = false;
      return g;
    }
    wake();
    auto deadline = std::chrono::steady_clock::now() + kGraceWait;
    while (!reached(g.point)) {
      if (std::chrono::steady_clock::now() > deadline) {
        stuck_at_.store(count(), std::memory_order_relaxed);
        g.passed = false;
        return g;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return g;
  }
  // Whether a wait found the poller stuck and it has not moved since.
  [[nodiscard]] bool stuck() const {
    return !stopped() && stuck_at_.load(std::memory_order_relaxed) == count();
  }
  // For other waits on the poller (an attachment's release): it has not moved since `then`,
  // a count read before the wait, woken meanwhile: it is stuck.
  void mark_stuck_if_still(uint64_t then) const {
    if (count() == then && !stopped()) stuck_at_.store(then, std::memory_order_relaxed);
  }
  // Keeps `garbage` until the poller has passed `g`'s point (frees it now if it has).
  void keep(const Grace& g, std::shared_ptr<const void> garbage) const {
    if (reached(g.point)) return;  // `garbage` goes with this frame
    std::lock_guard lock(kept_mutex_);
    kept_.emplace_back(g.point, std::move(garbage));
  }
  // Frees what keep() holds that the poller has since passed.
  void reap() const {
    std::vector<std::shared_ptr<const void>> freed;  // destroyed outside the lock
    std::lock_guard lock(kept_mutex_);
    auto still = std::partition(kept_.begin(), kept_.end(),
                                [this](const auto& k) { return !reached(k.first); });
    for (auto it = still; it != kept_.end(); ++it)
      freed.push_back(std::move(it->second));
    kept_.erase(still, kept_.end());
  }

 private:
  std::atomic<uint64_t> value_{0};
  std::atomic<bool> stopped_{false};
  int wake_fd_ = -1;  // set before the poller starts
  // Control side only: the count at which a wait last gave up, and what waits could not free.
  mutable std::atomic<uint64_t> stuck_at_{UINT64_MAX};
  mutable std::mutex kept_mutex_;
  mutable std::vector<std::pair<uint64_t, std::shared_ptr<const void>>> kept_;
};

inline bool Grace::reached() const {
  return epoch == nullptr || epoch->reached(point);
}

// Frees `garbage` once the poller can no longer see it: now if the wait that unpublished it
// passed, else when the poller has come round (Epoch::reap).
template <typename T>
void dispose(const Grace& g, std::unique_ptr<T> garbage) {
  if (g.passed || garbage == nullptr) return;
  g.epoch->keep(g, std::shared_ptr<const void>(std::move(garbage)));
}

template <typename T>
class Published {
 public:
  explicit Published(std::unique_ptr<const T> initial) : ptr_(initial.release()) {}
  ~Published() { delete ptr_.load(); }
  Published(const Published&) = delete;
  Published& operator=(const Published&) = delete;

  // Poller side.
  [[nodiscard]] const T& load() const { return *ptr_.load(std::memory_order_acquire); }
  // Control side (callers serialise): swaps, waits for the poller, frees the old value (or
  // leaves it to the epoch while the poller is stuck).
  Grace replace(std::unique_ptr<const T> next, const Epoch& epoch) {
    std::unique_ptr<const T> old(ptr_.exchange(next.release(), std::memory_order_acq_rel));
    Grace g = epoch.wait_quiescent();
    dispose(g, std::move(old));
    return g;
  }

 private:
  std::atomic<const T*> ptr_;
};

// The usual published value: a set of pointers that control threads change one member at a
// time (callers serialise); each change waits until the poller no longer sees the old set.
// A removal's Grace says when `item` may go.
template <typename T>
Grace publish_added(Published<std::vector<T*>>& set, T* item, const Epoch& epoch) {
  auto next = std::make_unique<std::vector<T*>>(set.load());
  next->push_back(item);
  return set.replace(std::move(next), epoch);
}
template <typename T>
Grace publish_removed(Published<std::vector<T*>>& set, const T* item, const Epoch& epoch) {
  auto next = std::make_unique<std::vector<T*>>(set.load());
  std::erase(*next, item);
  return set.replace(std::move(next), epoch);
}

}  // namespace daqiri::dataplane
