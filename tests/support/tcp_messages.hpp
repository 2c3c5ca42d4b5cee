// The messages TCP TX tests send through the daemon: message `seq` of sender `tag` is its 8
// bytes of tag and seq, then bytes that are a function of both and of their place. A reader of
// the byte stream cuts it at the known size and tells a message that is whole and its own from
// one cut short or interleaved with another's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace daqiri::test::tcp_messages {

// Byte i of a message is pattern byte i + shift: filling is one copy, fast under sanitizers.
inline uint8_t pattern_at(size_t k) {
  return static_cast<uint8_t>(k * 13u + (k >> 8));
}
inline size_t shift(uint32_t tag, uint32_t seq) {
  return (tag * 131u + seq * 7u) % 251u;
}
inline const uint8_t* pattern(size_t length) {
  static thread_local std::vector<uint8_t> p;
  if (p.size() < length + 251) {
    p.resize(length + 251);
    for (size_t k = 0; k < p.size(); ++k)
      p[k] = pattern_at(k);
  }
  return p.data();
}

inline void fill(std::span<std::byte> m, uint32_t tag, uint32_t seq) {
  std::memcpy(m.data(), &tag, 4);
  std::memcpy(m.data() + 4, &seq, 4);
  if (m.size() > 8)
    std::memcpy(m.data() + 8, pattern(m.size()) + 8 + shift(tag, seq), m.size() - 8);
}

// Whether `m` is one whole message; its tag and seq either way.
inline bool check(std::span<const uint8_t> m, uint32_t& tag, uint32_t& seq) {
  if (m.size() < 8) return false;
  std::memcpy(&tag, m.data(), 4);
  std::memcpy(&seq, m.data() + 4, 4);
  return m.size() == 8 ||
         std::memcmp(m.data() + 8, pattern(m.size()) + 8 + shift(tag, seq), m.size() - 8) == 0;
}

}  // namespace daqiri::test::tcp_messages
