// Cross-checks over a parsed Config: names unique, references resolve, cores exist, pools
// large enough for their rings, hugepages available, backends built in. Each error points at
// the key in the file that has to change.
#pragma once

#include "config/config.hpp"
#include "config/system_facts.hpp"

namespace daqiri::config {

// What DPDK keeps free before a frame in each buffer (RTE_PKTMBUF_HEADROOM), inside buf_size.
inline constexpr uint32_t kMbufHeadroom = 128;

void validate_config(const Config& config, const SystemFacts& facts, Diagnostics& diags);

// Buffers each pool a queue draws from a region needs: 1.5x its ring plus one burst, so the
// pool never runs dry while a client's ring is full and a burst is in flight (a pool barely
// larger than the ring stalls silently in DAQIRI).
inline uint64_t buffers_needed(const QueueConfig& q) {
  return uint64_t{q.ring_size} * 3 / 2 + q.batch_size;
}

}  // namespace daqiri::config
