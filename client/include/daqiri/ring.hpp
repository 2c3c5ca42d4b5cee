// A typed view of one ring of daqiri/abi.h, used by the daemon and the client alike. It owns
// nothing: the memory belongs to a mapping kept elsewhere. Accessors name the memory order of
// the ABI's rules; see the comment at the top of abi.h.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "daqiri/abi.h"

namespace daqiri::abi {

static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);
static_assert(std::atomic_ref<uint32_t>::required_alignment <= alignof(uint32_t));

class RingView {
 public:
  RingView() = default;

  // Bytes a ring of `size` slots of `desc_size` bytes takes, header included, cache-line padded.
  static constexpr size_t bytes_for(uint32_t size, uint32_t desc_size) {
    size_t bytes = DAQIRI_RING_HEADER_SIZE + size_t{size} * desc_size;
    return (bytes + DAQIRI_CACHE_LINE - 1) / DAQIRI_CACHE_LINE * DAQIRI_CACHE_LINE;
  }

  // The daemon lays out a fresh ring in zeroed memory.
  static RingView create(void* base, daqiri_ring_kind kind, uint32_t size, uint32_t desc_size) {
    auto* h = static_cast<daqiri_ring_header*>(base);
    h->magic = DAQIRI_RING_MAGIC;
    h->abi_version = DAQIRI_ABI_VERSION;
    h->kind = static_cast<uint16_t>(kind);
    h->size = size;
    h->desc_size = desc_size;
    h->desc_offset = DAQIRI_RING_HEADER_SIZE;
    std::atomic_ref<uint32_t>(h->state).store(DAQIRI_RING_ACTIVE, std::memory_order_release);
    return RingView(h, size, desc_size);
  }

  // A client checks a ring the daemon shared: magic, version, kind, geometry within `bytes`.
  static std::optional<RingView> open(void* base, size_t bytes, daqiri_ring_kind kind,
                                      uint32_t desc_size) {
    if (bytes < DAQIRI_RING_HEADER_SIZE) return std::nullopt;
    auto* h = static_cast<daqiri_ring_header*>(base);
    uint32_t size = h->size;
    bool ok = h->magic == DAQIRI_RING_MAGIC && h->abi_version == DAQIRI_ABI_VERSION &&
              h->kind == kind && h->desc_size == desc_size &&
              h->desc_offset == DAQIRI_RING_HEADER_SIZE && size != 0 && (size & (size - 1)) == 0 &&
              bytes_for(size, desc_size) <= bytes;
    if (!ok) return std::nullopt;
    return RingView(h, size, desc_size);
  }

  [[nodiscard]] bool valid() const { return h_ != nullptr; }
  [[nodiscard]] uint32_t size() const { return size_; }
  [[nodiscard]] uint32_t mask() const { return size_ - 1; }

  template <typename Desc>
  [[nodiscard]] Desc* slot(uint32_t counter) const {
    auto* base = reinterpret_cast<std::byte*>(h_) + DAQIRI_RING_HEADER_SIZE;
    return reinterpret_cast<Desc*>(base + size_t{counter & (size_ - 1)} * desc_size_);
  }

  // Producer side.
  [[nodiscard]] uint32_t load_consumer() const {
    return std::atomic_ref<uint32_t>(h_->consumer).load(std::memory_order_acquire);
  }
  void prefetch_consumer() const { __builtin_prefetch(&h_->consumer); }
  // Publishes slots written so far. seq_cst pairs with the consumer's NEED_WAKEUP handshake.
  void publish_producer(uint32_t p) const {
    std::atomic_ref<uint32_t>(h_->producer).store(p, std::memory_order_seq_cst);
  }
  // Publishes without the fence: the caller then looks at NEED_WAKEUP again later, fenced at
  // the latest once it has nothing new to publish (see RxAttachment in the daemon).
  void publish_producer_release(uint32_t p) const {
    std::atomic_ref<uint32_t>(h_->producer).store(p, std::memory_order_release);
  }
  // After publish_producer_release, before consumer_wants_wakeup(): the fence publish_producer
  // has built in. ThreadSanitizer has no fences; there it is a seq_cst read-modify-write of the
  // producer index that leaves it as it is, which orders the same way against the consumer's
  // seq_cst NEED_WAKEUP store and producer load (and costs more: it writes a shared line).
  void fence_after_publish() const {
#if defined(__SANITIZE_THREAD__)
    std::atomic_ref<uint32_t>(h_->producer).fetch_add(0, std::memory_order_seq_cst);
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  }
  [[nodiscard]] bool consumer_wants_wakeup() const {
    return (std::atomic_ref<uint32_t>(h_->consumer_flags).load(std::memory_order_seq_cst) &
            DAQIRI_RING_NEED_WAKEUP) != 0;
  }
  // After publish_producer: signals `eventfd` if the consumer asked for it (NEED_WAKEUP).
  // Returns whether it did.
  bool wake_consumer(int eventfd) const {
    return signal_if(consumer_wants_wakeup(), eventfd);
  }
  // RX: asks the consumer to kick once it releases (NEED_KICK), or stops asking. seq_cst, and
  // load_consumer_seq_cst() after it: a release before the flag is seen there.
  void set_need_kick(bool on) const {
    std::atomic_ref<uint32_t>(h_->producer_flags)
        .store(on ? DAQIRI_RING_NEED_KICK : 0u, std::memory_order_seq_cst);
  }
  [[nodiscard]] uint32_t load_consumer_seq_cst() const {
    return std::atomic_ref<uint32_t>(h_->consumer).load(std::memory_order_seq_cst);
  }

  // Consumer side.
  [[nodiscard]] uint32_t load_producer() const {
    return std::atomic_ref<uint32_t>(h_->producer).load(std::memory_order_acquire);
  }
  [[nodiscard]] uint32_t load_producer_seq_cst() const {
    return std::atomic_ref<uint32_t>(h_->producer).load(std::memory_order_seq_cst);
  }
  void publish_consumer(uint32_t c) const {
    std::atomic_ref<uint32_t>(h_->consumer).store(c, std::memory_order_release);
  }
  [[nodiscard]] bool producer_wants_kick() const {
    return (std::atomic_ref<uint32_t>(h_->producer_flags).load(std::memory_order_acquire) &
            DAQIRI_RING_NEED_KICK) != 0;
  }
  // After publish_consumer: signals `eventfd` if the producer waits for releases (NEED_KICK).
  // No fence in between (abi.h: a kick lost to the race costs the producer's timed sleep).
  // Returns whether it did.
  bool kick_producer(int eventfd) const {
    return signal_if(producer_wants_kick(), eventfd);
  }
  void set_need_wakeup(bool on) const {
    std::atomic_ref<uint32_t>(h_->consumer_flags)
        .store(on ? DAQIRI_RING_NEED_WAKEUP : 0u, std::memory_order_seq_cst);
  }

  // Sleeps until the producer index moves off `seen`, for at most `timeout_ms`, the way the
  // ABI asks of a consumer: set NEED_WAKEUP, look again (the producer may have published in
  // between and then not signalled), poll `eventfd` (and `hangup_fd` for a hang-up, when >= 0),
  // drain it, clear the flag. Returns whether the producer index moved.
  bool sleep_for_producer(int eventfd, uint32_t seen, int timeout_ms, int hangup_fd = -1) const {
    set_need_wakeup(true);
    bool moved = load_producer_seq_cst() != seen;
    if (!moved) {
      pollfd p[2] = {{eventfd, POLLIN, 0}, {hangup_fd, POLLRDHUP, 0}};
      if (::poll(p, hangup_fd >= 0 ? 2 : 1, timeout_ms) > 0 && (p[0].revents & POLLIN) != 0) {
        uint64_t v = 0;
        [[maybe_unused]] auto r = ::read(eventfd, &v, sizeof v);
      }
      moved = load_producer() != seen;
    }
    set_need_wakeup(false);
    return moved;
  }

  // Either side: whether the daemon still serves the ring.
  [[nodiscard]] uint32_t state() const {
    return std::atomic_ref<uint32_t>(h_->state).load(std::memory_order_acquire);
  }
  void set_state(daqiri_ring_state s) const {
    std::atomic_ref<uint32_t>(h_->state).store(s, std::memory_order_release);
  }

 private:
  RingView(daqiri_ring_header* h, uint32_t size, uint32_t desc_size)
      : h_(h), size_(size), desc_size_(desc_size) {}
  // Writes 1 to `eventfd` when the other side asked for it; returns whether it did.
  static bool signal_if(bool asked, int eventfd) {
    if (!asked) return false;
    uint64_t one = 1;
    [[maybe_unused]] auto w = ::write(eventfd, &one, sizeof one);
    return true;
  }

  daqiri_ring_header* h_ = nullptr;
  uint32_t size_ = 0;
  uint32_t desc_size_ = 0;
};

}  // namespace daqiri::abi
