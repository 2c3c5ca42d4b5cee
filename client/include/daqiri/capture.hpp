// Burst capture to files: PCAP (nanosecond timestamps), PCAPNG (interface and flow metadata,
// appendable across runs) or raw concatenated payloads, written by a thread of the writer's
// own so the receive loop only copies.
//
//   auto w = daqiri::capture::FileWriter::open("/data/run.pcapng", {.format = Format::kPcapng});
//   for (const Packet& p : burst) w->write(p.timestamp_ns, p.frame, p.payload_offset);
//   rx.release(burst);  // the bytes are in the writer's queue: on their way to disk
//
// Memory is bounded: frames are copied into chunks (chunk_bytes each, at most max_chunks
// queued); when every chunk waits for the disk, write() waits too. A failed write (a full disk)
// stops the writer: write() and close() return that error from then on, naming the file.
// Rotation by size or age starts a new file (NAME-0000.EXT, NAME-0001.EXT, ...) at a record
// boundary. Not thread-safe: one thread calls write(); the writer's own thread does the I/O.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daqiri/capture_record.hpp"
#include "daqiri/common/result.hpp"
#include "daqiri/common/unique_fd.hpp"

namespace daqiri::capture {

// The formats by the names daqiri-ctl, the API and the docs use.
inline constexpr std::array<std::pair<std::string_view, Format>, 3> kFormatNames{
    {{"pcap", Format::kPcap}, {"pcapng", Format::kPcapng}, {"raw", Format::kRaw}}};

// When the writer calls fsync: never (the kernel writes back in its own time), when it
// closes a file (at rotation and at close), or after every chunk.
enum class Sync { kNever, kOnClose, kEveryChunk };

struct WriterOptions {
  Format format = Format::kPcap;
  uint32_t snaplen = 262144;  // bytes kept of each frame (pcap, pcapng); the rest is cut
  uint64_t rotate_bytes = 0;  // start a new file once a file would grow past this; 0: never
  std::chrono::nanoseconds rotate_interval{0};  // or once a file is this old; 0: never
  Sync sync = Sync::kOnClose;
  bool append = false;           // add to an existing file (pcapng: a new section)
  size_t chunk_bytes = 4 << 20;  // the write unit
  size_t max_chunks = 8;         // memory bound: chunk_bytes x max_chunks
  std::string interface;         // pcapng: the interface's name (if_name)
  std::string flow;              // pcapng: the flow (if_description)
  // Opens each file (rotation opens several) with open(2)'s `flags`; default: open(2), 0644.
  // daqirid's captures open beneath an allowed folder and hand the file to the requester.
  std::function<Result<UniqueFd>(const std::string& path, int flags)> open_file;
  // Allocate every chunk up front (no allocation once write() runs).
  bool preallocate = false;
};

struct WriterStats {
  uint64_t packets = 0;  // records accepted by write()
  uint64_t bytes = 0;    // their bytes as stored (after snaplen)
};

class FileWriter {
 public:
  // Opens (creates or truncates; appends with options.append) the first file and writes its
  // header before returning, so a path that cannot be written fails here.
  static Result<std::unique_ptr<FileWriter>> open(const std::string& path,
                                                  const WriterOptions& options);
  ~FileWriter();  // close(), errors dropped
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  // Copies one frame into the write queue. payload_offset: where the UDP payload starts (raw).
  Result<> write(uint64_t timestamp_ns, std::span<const std::byte> frame,
                 uint32_t payload_offset = 0);
  // Writes everything queued, syncs as the options say, closes. Returns the first error.
  Result<> close();

  [[nodiscard]] WriterStats stats() const;
  // Every file opened so far, in order.
  [[nodiscard]] std::vector<std::string> files() const;

  struct State;

 private:
  explicit FileWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

// Whether the options start new files (by size or age).
inline bool rotates(const WriterOptions& o) {
  return o.rotate_bytes > 0 || o.rotate_interval.count() > 0;
}
// What every writer refuses: a snaplen under 64, rotation together with append.
Result<> check_writer_options(const WriterOptions& options);

// Opens a capture file as the writers do: options.open_file when set, else open(2), mode 0644.
Result<UniqueFd> open_file(const WriterOptions& options, const std::string& path, int flags);

// What a file starts with before its first record (PCAP: the file header; PCAPNG: the
// section header and interface blocks; raw: nothing).
std::vector<std::byte> file_header(const WriterOptions& options);

// The file a rotating writer's file number `index` goes to: "dir/run.pcap" -> "dir/run-0003.pcap".
std::string rotated_name(const std::string& path, uint64_t index);

}  // namespace daqiri::capture
