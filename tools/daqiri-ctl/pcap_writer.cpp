#include "pcap_writer.hpp"

namespace daqiri::ctl {
namespace {

struct FileHeader {
  uint32_t magic = 0xa1b23c4d;  // nanosecond timestamps
  uint16_t major = 2;
  uint16_t minor = 4;
  int32_t zone = 0;
  uint32_t sigfigs = 0;
  uint32_t snaplen = 65535;
  uint32_t linktype = 1;  // Ethernet
};

struct RecordHeader {
  uint32_t sec;
  uint32_t nsec;
  uint32_t caplen;
  uint32_t len;
};

}  // namespace

Result<PcapWriter> PcapWriter::open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return fail_errno("open " + path);
  FileHeader h;
  if (std::fwrite(&h, sizeof h, 1, f) != 1) {
    std::fclose(f);
    return fail_errno("write " + path);
  }
  return PcapWriter(f);
}

PcapWriter::~PcapWriter() {
  if (f_) std::fclose(f_);
}

Result<> PcapWriter::write(uint64_t timestamp_ns, std::span<const std::byte> frame) {
  RecordHeader r{static_cast<uint32_t>(timestamp_ns / 1'000'000'000u),
                 static_cast<uint32_t>(timestamp_ns % 1'000'000'000u),
                 static_cast<uint32_t>(frame.size()), static_cast<uint32_t>(frame.size())};
  if (std::fwrite(&r, sizeof r, 1, f_) != 1 ||
      std::fwrite(frame.data(), 1, frame.size(), f_) != frame.size()) {
    return fail_errno("write pcap");
  }
  return {};
}

}  // namespace daqiri::ctl
