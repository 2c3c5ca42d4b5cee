// Asking for a cache line in the state a write needs, before the write: a ring slot the
// client's core last read costs the poller a round trip to that core when it stores there,
// and stores that wait fill the store buffer until the poller stalls behind them.
#pragma once

namespace daqiri::dataplane {

inline void prefetch_for_write(const void* p) {
#if defined(__x86_64__)
  // PREFETCHW (Broadwell and later, every AMD64); older Intel cores execute it as a NOP.
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

}  // namespace daqiri::dataplane
