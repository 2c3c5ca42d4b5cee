// Lifecycle flags and counters every attachment shares. Control threads write the flags and
// read the counters; the attachment's poller does the rest (relaxed counters: each has one
// writer, readers want only a recent value).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace daqiri::dataplane {

enum class Backpressure { kDropNew, kBlock };

// Counters have one writer (the poller): a relaxed add, no read-modify-write needed.
template <typename T>
inline void bump(std::atomic<T>& counter, std::type_identity_t<T> n = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

struct AttachmentCounters {
  std::atomic<uint64_t> packets{0};  // delivered (RX) or sent (TX)
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> dropped_ring_full{0};   // RX: the client's ring had no room
  std::atomic<uint64_t> dropped_over_share{0};  // RX: it held its share of the flow's pool
  std::atomic<uint64_t> dropped_no_buffer{0};   // RX: lost while the flow's pool was empty
  std::atomic<uint64_t> bad_index{0};           // the client wrote an impossible ring index
  std::atomic<uint64_t> bad_descriptor{0};      // TX: a descriptor that failed validation
  std::atomic<uint64_t> send_errors{0};         // TX: the backend refused a frame
  std::atomic<uint64_t> refused{0};             // TX: frames the queue's policy refused
  std::atomic<uint64_t> on_loan{0};             // RX: buffers held by the client now
  std::atomic<uint64_t> stalls{0};  // RX, block backpressure: times its full ring held the flow
  std::atomic<uint64_t> kicks{0};   // times the client woke the sleeping poller (its kick)

  static void add(std::atomic<uint64_t>& c, uint64_t n) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

// closing: control asks the poller to let go; released: the poller has returned every buffer
// and will not touch the attachment again; violated: the client broke the protocol, or the
// daemon's own engine failed it, and it must be cut off (the session server acts on it).
struct AttachmentLifecycle {
  std::atomic<bool> closing{false};
  std::atomic<bool> released{false};
  std::atomic<bool> violated{false};
  // Set before violated when the engine failed, not the client: the call and its error's text,
  // static strings (a poller allocates nothing), for the session server's log.
  std::atomic<const char*> engine_call{nullptr};
  std::atomic<const char*> engine_error{nullptr};

  void engine_failed(const char* call, const char* error) {
    engine_call.store(call, std::memory_order_relaxed);
    engine_error.store(error, std::memory_order_relaxed);
    violated.store(true, std::memory_order_release);
  }
};

}  // namespace daqiri::dataplane
