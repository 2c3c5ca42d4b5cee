// Frames as daqiri-gen sends them and classic PCAP files of them: what the DPDK tests replay
// through net_pcap and read back from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "daqiri/frame.hpp"
#include "daqiri/test_pattern.hpp"

namespace daqiri::test {

using Frame = std::vector<std::byte>;

// A daqiri-gen style frame: 10.1.0.1:sport -> 10.1.0.2:dport, the pattern keyed by dport.
inline Frame make_frame(uint16_t sport, uint16_t dport, uint64_t seq, size_t payload) {
  Frame f(frame::kUdpHeaders + payload);
  size_t h = frame::write_udp_headers(f, {0x0a010001, sport}, {0x0a010002, dport}, payload);
  pattern::fill(std::span(f).subspan(h), dport, seq);
  return f;
}

inline void write_pcap(const std::string& path, const std::vector<Frame>& frames) {
  std::ofstream out(path, std::ios::binary);
  auto put32 = [&out](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  auto put16 = [&out](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
  put32(0xa1b2c3d4);  // microsecond timestamps
  put16(2);
  put16(4);
  put32(0);
  put32(0);
  put32(65535);
  put32(1);  // Ethernet
  uint32_t usec = 0;
  for (const auto& f : frames) {
    put32(1);
    put32(usec++);
    put32(static_cast<uint32_t>(f.size()));
    put32(static_cast<uint32_t>(f.size()));
    out.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size()));
  }
}

inline std::vector<Frame> read_pcap(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<Frame> frames;
  char header[24];
  if (!in.read(header, sizeof header)) return frames;
  char rec[16];
  while (in.read(rec, sizeof rec)) {
    uint32_t len = 0;
    std::memcpy(&len, rec + 8, 4);
    Frame f(len);
    if (!in.read(reinterpret_cast<char*>(f.data()), len)) break;
    frames.push_back(std::move(f));
  }
  return frames;
}

}  // namespace daqiri::test
