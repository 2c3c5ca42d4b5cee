// A latency histogram a poller fills and a scrape reads: fixed buckets of relaxed counters with
// one writer, so recording is a few compares and two stores (no lock, no allocation).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "dataplane/attachment_state.hpp"
#include "dataplane/clock.hpp"

namespace daqiri::dataplane {

class LatencyHistogram {
 public:
  // Upper bounds in nanoseconds (Prometheus `le`), from a microsecond to a tenth of a second.
  static constexpr std::array<uint64_t, 14> kBoundsNs{
      1'000,   2'000,   5'000,     10'000,    20'000,    50'000,     100'000,
      200'000, 500'000, 1'000'000, 2'000'000, 5'000'000, 10'000'000, 100'000'000};

  struct Snapshot {
    std::array<uint64_t, kBoundsNs.size() + 1> counts{};  // per bucket (not cumulative), +Inf last
    uint64_t sum_ns = 0;
    Snapshot& operator+=(const Snapshot& o) {
      for (size_t i = 0; i < counts.size(); ++i)
        counts[i] += o.counts[i];
      sum_ns += o.sum_ns;
      return *this;
    }
  };

  void record(uint64_t ns) {
    size_t i = 0;
    while (i < kBoundsNs.size() && ns > kBoundsNs[i])
      ++i;
    bump(counts_[i]);
    bump(sum_ns_, ns);
  }

  [[nodiscard]] Snapshot snapshot() const {
    Snapshot s;
    for (size_t i = 0; i < counts_.size(); ++i)
      s.counts[i] = counts_[i].load(std::memory_order_relaxed);
    s.sum_ns = sum_ns_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  std::array<std::atomic<uint64_t>, kBoundsNs.size() + 1> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace daqiri::dataplane
