// A TX queue's rate cap (`pacing_mbps`): a token bucket of frame bytes, refilled from the
// monotonic clock once a poll. A frame may start while the credit is positive, and its bytes
// are then owed, so the long-run rate stays at the cap and no frame waits for a credit larger
// than the bucket. What a quiet queue saves is capped at the bucket: two of its largest frames,
// or 100 us at the cap, whichever is more, so that a poller that runs late catches up instead
// of losing the time; after an idle spell it may send that much at once, never more.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "dataplane/clock.hpp"

namespace daqiri::dataplane {

class TxPacer {
 public:
  // `mbps` 0: unpaced, every budget unlimited and no clock read.
  TxPacer(uint64_t mbps, uint32_t max_frame, uint64_t now_ns = monotonic_ns())
      : bytes_per_s_(mbps * 1'000'000 / 8),
        depth_(static_cast<int64_t>(
                   std::max<uint64_t>(uint64_t{2} * max_frame, bytes_per_s_ / 10'000)) *
               kNsPerS),
        credit_(depth_),
        last_ns_(now_ns) {}

  // At the start of a poll: what the queue may start sending in it.
  void refill(uint64_t now_ns) {
    if (bytes_per_s_ == 0) return;
    // Time past what fills the bucket adds nothing (at a slow cap, a long idle spell adds less
    // than it could: the rate only errs low); clamping it keeps the product in range (10 ms at
    // 1 Tb/s is 1.25e18 byte-nanoseconds).
    uint64_t elapsed = std::min<uint64_t>(now_ns - last_ns_, kMaxElapsedNs);
    last_ns_ = now_ns;
    credit_ = std::min(depth_, credit_ + static_cast<int64_t>(elapsed * bytes_per_s_));
    budget_ = credit_ <= 0 ? 0 : static_cast<uint64_t>((credit_ + kNsPerS - 1) / kNsPerS);
  }
  void refill() {
    if (bytes_per_s_ != 0) refill(monotonic_ns());
  }
  // Bytes left to start in this poll (the last frame may overshoot them).
  [[nodiscard]] uint64_t budget() const { return budget_; }
  // Frames of `bytes` bytes started out of the budget.
  void spend(uint64_t bytes) {
    if (bytes_per_s_ == 0) return;
    credit_ -= static_cast<int64_t>(bytes) * kNsPerS;
    budget_ -= std::min(budget_, bytes);
  }
  // Which of `count` clients a paced queue serves first this poll: a different one each time,
  // so that one that always has frames waiting cannot take every budget. Unpaced: the first.
  [[nodiscard]] size_t first_served(size_t count) {
    return bytes_per_s_ == 0 || count == 0 ? 0 : round_++ % count;
  }

 private:
  static constexpr int64_t kNsPerS = 1'000'000'000;
  static constexpr uint64_t kMaxElapsedNs = 10'000'000;
  uint64_t bytes_per_s_;
  int64_t depth_;   // byte-nanoseconds: bytes x 1e9, so that no fraction of a byte is lost
  int64_t credit_;  // byte-nanoseconds; negative while a frame's bytes are owed
  uint64_t last_ns_;
  uint64_t budget_ = std::numeric_limits<uint64_t>::max();
  uint64_t round_ = 0;
};

// The `i`th client of `count` a poll serves, starting from `first`.
inline size_t served(size_t first, size_t i, size_t count) {
  size_t k = first + i;
  return k < count ? k : k - count;
}

}  // namespace daqiri::dataplane
