// A minimal PCAP writer (nanosecond timestamps, Ethernet link type) for `daqiri-ctl tap`.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "daqiri/common/result.hpp"

namespace daqiri::ctl {

class PcapWriter {
 public:
  static Result<PcapWriter> open(const std::string& path);
  PcapWriter(PcapWriter&& o) noexcept : f_(o.f_) { o.f_ = nullptr; }
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;
  ~PcapWriter();
  Result<> write(uint64_t timestamp_ns, std::span<const std::byte> frame);

 private:
  explicit PcapWriter(std::FILE* f) : f_(f) {}
  std::FILE* f_;
};

}  // namespace daqiri::ctl
