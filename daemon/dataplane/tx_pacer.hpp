// A TX queue's rate cap (`pacing_mbps`): a token bucket of frame bytes, refilled from the
// monotonic clock on each poll. A frame may start while the credit is positive, and its bytes
// are then owed, so the long-run rate stays at the cap and no frame waits for a credit larger
// than the bucket. What a quiet queue saves is capped at `depth` bytes: after an idle spell it
// may send that much at once, never more.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "dataplane/clock.hpp"

namespace daqiri::dataplane {

class TxPacer {
 public:
  TxPacer() = default;  // unpaced: every budget is unlimited
  TxPacer(uint64_t mbps, uint64_t depth_bytes, uint64_t now_ns)
      : bytes_per_s_(mbps * 1'000'000 / 8),
        depth_(static_cast<int64_t>(depth_bytes) * kNsPerS),
        credit_(depth_),
        last_ns_(now_ns) {}

  // Bytes a queue may start sending now (the last frame may overshoot them); unlimited when
  // unpaced.
  [[nodiscard]] uint64_t budget(uint64_t now_ns) {
    if (bytes_per_s_ == 0) return std::numeric_limits<uint64_t>::max();
    // Time past what fills the bucket adds nothing (at a slow cap, a long idle spell adds less
    // than it could: the rate only errs low); clamping it keeps the product in range (10 ms at
    // 1 Tb/s is 1.25e18 byte-nanoseconds).
    uint64_t elapsed = std::min<uint64_t>(now_ns - last_ns_, kMaxElapsedNs);
    last_ns_ = now_ns;
    credit_ = std::min(depth_, credit_ + static_cast<int64_t>(elapsed * bytes_per_s_));
    return credit_ <= 0 ? 0 : static_cast<uint64_t>((credit_ + kNsPerS - 1) / kNsPerS);
  }
  // The same, now; an unpaced queue reads no clock.
  [[nodiscard]] uint64_t budget_now() {
    return bytes_per_s_ == 0 ? std::numeric_limits<uint64_t>::max() : budget(monotonic_ns());
  }
  // What was started out of the last budget.
  void spend(uint64_t bytes) {
    if (bytes_per_s_ != 0) credit_ -= static_cast<int64_t>(bytes) * kNsPerS;
  }
  [[nodiscard]] bool paced() const { return bytes_per_s_ != 0; }
  // Which of `count` clients a paced queue serves first this poll: a different one each time,
  // so that one that always has frames waiting cannot take every budget. Unpaced: the first.
  [[nodiscard]] size_t first_served(size_t count) {
    return bytes_per_s_ == 0 || count == 0 ? 0 : round_++ % count;
  }

 private:
  static constexpr int64_t kNsPerS = 1'000'000'000;
  static constexpr uint64_t kMaxElapsedNs = 10'000'000;
  uint64_t bytes_per_s_ = 0;
  int64_t depth_ = 0;   // byte-nanoseconds: bytes x 1e9, so that no fraction of a byte is lost
  int64_t credit_ = 0;  // byte-nanoseconds; negative while a frame's bytes are owed
  uint64_t last_ns_ = 0;
  uint64_t round_ = 0;
};

// The bucket a queue of `mbps` gets: two of its largest frames, or 100 us at the cap, whichever
// is more, so that a poller that runs late catches up instead of losing the time.
inline uint64_t tx_pacer_depth(uint64_t mbps, uint32_t max_frame) {
  return std::max<uint64_t>(uint64_t{2} * max_frame, mbps * 1'000'000 / 8 / 10'000);
}

}  // namespace daqiri::dataplane
