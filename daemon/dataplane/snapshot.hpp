// Immutable snapshots published by pointer, RCU-style: control threads build a new value,
// swap it in, wait until the poller has passed through two loop iterations (so it can no longer
// hold the old pointer), then free the old one. Pollers only ever load.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "dataplane/process_barrier.hpp"

namespace daqiri::dataplane {

// Counts a poller's loop iterations. One writer (the poller); control threads wait on it.
class Epoch {
 public:
  // Registers the process for wait_quiescent()'s barrier while the epoch's poller thread does
  // not exist yet: registered later, in the first control change, with threads running, the
  // kernel first waits out an RCU grace period.
  Epoch() { process_barrier_available(); }
  void advance() {
    value_.store(value_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  void set_stopped() { stopped_.store(true, std::memory_order_release); }
  // Loop iterations so far: a poller that makes progress moves it.
  [[nodiscard]] uint64_t count() const { return value_.load(std::memory_order_acquire); }
  // An eventfd that ends the poller's park: waits write it, so that an idle poller's
  // iterations (a park each) do not set their pace.
  void wake_with(int eventfd) { wake_fd_ = eventfd; }
  // Ends the poller's park, if it has an eventfd and is parked.
  void wake() const {
    if (wake_fd_ < 0) return;
    uint64_t one = 1;
    [[maybe_unused]] auto w = ::write(wake_fd_, &one, sizeof one);
  }
  // Returns once every loop iteration that might have seen the old snapshot has ended.
  void wait_quiescent() const {
    // Without it, the count read below could predate a loop iteration that loaded the old
    // snapshot before the caller swapped it (see process_barrier.hpp). With it, every
    // iteration that can hold the old snapshot ends by the count's next step; two are waited
    // for all the same (the count read may just miss the iteration the barrier hit).
    process_barrier();
    // The count before the wake: woken, the poller may run its idle spins and be asleep again
    // before this thread reads it (a wasted park, a second long when no task needs a timer).
    uint64_t start = value_.load(std::memory_order_acquire);
    wake();
    while (!stopped_.load(std::memory_order_acquire) &&
           value_.load(std::memory_order_acquire) < start + 2) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

 private:
  std::atomic<uint64_t> value_{0};
  std::atomic<bool> stopped_{false};
  int wake_fd_ = -1;  // set before the poller starts
};

template <typename T>
class Published {
 public:
  explicit Published(std::unique_ptr<const T> initial) : ptr_(initial.release()) {}
  ~Published() { delete ptr_.load(); }
  Published(const Published&) = delete;
  Published& operator=(const Published&) = delete;

  // Poller side.
  [[nodiscard]] const T& load() const { return *ptr_.load(std::memory_order_acquire); }
  // Control side (callers serialise): swaps, waits for the poller, frees the old value.
  void replace(std::unique_ptr<const T> next, const Epoch& epoch) {
    const T* old = ptr_.exchange(next.release(), std::memory_order_acq_rel);
    epoch.wait_quiescent();
    delete old;
  }

 private:
  std::atomic<const T*> ptr_;
};

// The usual published value: a set of pointers that control threads change one member at a
// time (callers serialise); each change waits until the poller no longer sees the old set.
template <typename T>
void publish_added(Published<std::vector<T*>>& set, T* item, const Epoch& epoch) {
  auto next = std::make_unique<std::vector<T*>>(set.load());
  next->push_back(item);
  set.replace(std::move(next), epoch);
}
template <typename T>
void publish_removed(Published<std::vector<T*>>& set, const T* item, const Epoch& epoch) {
  auto next = std::make_unique<std::vector<T*>>(set.load());
  std::erase(*next, item);
  set.replace(std::move(next), epoch);
}

}  // namespace daqiri::dataplane
