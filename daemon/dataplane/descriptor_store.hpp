// Writing an RX descriptor into a ring slot in two 16-byte stores. Field by field it took five
// (the compiler splits a struct of mixed widths), and every store waits in the store buffer
// until the slot's line comes back from the client's core: a full store buffer stalls the
// poller, so the fewer entries a packet takes there the better.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "daqiri/abi.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace daqiri::dataplane {

// `d` with its region set to `region`, into `slot`.
[[gnu::always_inline]] inline void store_rx_desc(daqiri_rx_desc* slot, const daqiri_rx_desc& d,
                                                 uint16_t region) {
#if defined(__x86_64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // The layout abi.h asserts: offset, timestamp; length, flow_id, region, flags,
  // payload_offset, stream.
  auto lengths = uint64_t{d.length} | uint64_t{d.flow_id} << 32;
  auto tail = uint64_t{region} | uint64_t{d.flags} << 16 | uint64_t{d.payload_offset} << 32 |
              uint64_t{d.stream} << 48;
  auto* out = reinterpret_cast<__m128i*>(slot);
  _mm_storeu_si128(
      out, _mm_set_epi64x(static_cast<int64_t>(d.timestamp_ns), static_cast<int64_t>(d.offset)));
  _mm_storeu_si128(out + 1,
                   _mm_set_epi64x(static_cast<int64_t>(tail), static_cast<int64_t>(lengths)));
#else
  daqiri_rx_desc copy = d;
  copy.region = region;
  std::memcpy(slot, &copy, sizeof copy);
#endif
}

// The same frame as a daqiri_rx_desc_compact (the stamp, payload offset and stream go): one
// 16-byte store.
[[gnu::always_inline]] inline void store_rx_desc_compact(daqiri_rx_desc_compact* slot,
                                                         const daqiri_rx_desc& d, uint16_t region) {
  // offset_lo, offset_hi, region, flags; length, flow_id. Offsets stay below 2^48.
  auto where = (d.offset & 0xffff'ffff'ffffu) | uint64_t{region & 0xffu} << 48 |
               uint64_t{d.flags & 0xffu} << 56;
  auto lengths = uint64_t{d.length} | uint64_t{d.flow_id} << 32;
#if defined(__x86_64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  _mm_storeu_si128(reinterpret_cast<__m128i*>(slot),
                   _mm_set_epi64x(static_cast<int64_t>(lengths), static_cast<int64_t>(where)));
#else
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the ABI is little-endian");
  std::memcpy(slot, &where, sizeof where);
  std::memcpy(reinterpret_cast<std::byte*>(slot) + sizeof where, &lengths, sizeof lengths);
#endif
}

}  // namespace daqiri::dataplane
