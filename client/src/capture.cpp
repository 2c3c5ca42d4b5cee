#include "daqiri/capture.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "daqiri/common/unique_fd.hpp"

namespace daqiri::capture {
namespace {

constexpr uint32_t kLinktypeEthernet = 1;
constexpr uint32_t kPcapMagicNs = 0xa1b23c4d;
constexpr uint32_t kPcapngShb = 0x0A0D0D0A;
constexpr uint32_t kPcapngIdb = 1;
constexpr uint32_t kByteOrderMagic = 0x1A2B3C4D;

// Little helpers that append host-order (little-endian on our targets) fields; pcap and
// pcapng are read in whichever byte order their magic announces.
void put(std::vector<std::byte>& out, const void* p, size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  out.insert(out.end(), b, b + n);
}
template <typename T>
void put(std::vector<std::byte>& out, T v) {
  put(out, &v, sizeof v);
}
void pad4(std::vector<std::byte>& out) {
  while (out.size() % 4 != 0)
    out.push_back(std::byte{0});
}
// A pcapng option: code, length, value padded to 32 bits.
void option(std::vector<std::byte>& out, uint16_t code, const void* value, uint16_t len) {
  put(out, code);
  put(out, len);
  put(out, value, len);
  pad4(out);
}
void option(std::vector<std::byte>& out, uint16_t code, const std::string& text) {
  if (!text.empty()) option(out, code, text.data(), static_cast<uint16_t>(text.size()));
}
// Closes a pcapng block that starts at `start` with its type: fills in both lengths.
void finish_block(std::vector<std::byte>& out, size_t start) {
  put(out, uint16_t{0});  // opt_endofopt
  put(out, uint16_t{0});
  auto total = static_cast<uint32_t>(out.size() - start + 4);
  std::memcpy(out.data() + start + 4, &total, 4);
  put(out, total);
}

struct Chunk {
  std::vector<std::byte> data;
  size_t used = 0;
  bool rotate_after = false;  // the writer starts the next file once this chunk is written
};

}  // namespace

std::vector<std::byte> file_header(const WriterOptions& o) {
  std::vector<std::byte> h;
  if (o.format == Format::kPcap) {
    put(h, kPcapMagicNs);
    put(h, uint16_t{2});
    put(h, uint16_t{4});
    put(h, int32_t{0});   // thiszone
    put(h, uint32_t{0});  // sigfigs
    put(h, o.snaplen);
    put(h, kLinktypeEthernet);
  } else if (o.format == Format::kPcapng) {
    size_t shb = h.size();
    put(h, kPcapngShb);
    put(h, uint32_t{0});  // total length, filled in
    put(h, kByteOrderMagic);
    put(h, uint16_t{1});
    put(h, uint16_t{0});
    put(h, int64_t{-1});                  // section length: not known
    option(h, 4, std::string("daqiri"));  // shb_userappl
    finish_block(h, shb);
    size_t idb = h.size();
    put(h, kPcapngIdb);
    put(h, uint32_t{0});
    put(h, uint16_t(kLinktypeEthernet));
    put(h, uint16_t{0});
    put(h, o.snaplen);
    option(h, 2, o.interface);                                        // if_name
    option(h, 3, o.flow.empty() ? std::string() : "flow " + o.flow);  // if_description
    uint8_t ns = 9;                                                   // if_tsresol: 10^-9 s
    option(h, 9, &ns, 1);
    finish_block(h, idb);
  }
  return h;
}

Result<> check_writer_options(const WriterOptions& options) {
  if (options.snaplen < 64) return fail(ErrorCode::kInvalidArgument, "capture: snaplen < 64");
  if (rotates(options) && options.append) {
    return fail(ErrorCode::kInvalidArgument, "capture: rotation and append do not go together");
  }
  return {};
}

Result<UniqueFd> open_file(const WriterOptions& options, const std::string& path, int flags) {
  if (options.open_file) return options.open_file(path, flags);
  UniqueFd f(::open(path.c_str(), flags, 0644));
  if (!f) return fail_errno("capture: open " + path);
  return f;
}

std::string rotated_name(const std::string& path, uint64_t index) {
  size_t slash = path.rfind('/');
  size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
      dot == (slash == std::string::npos ? 0 : slash + 1)) {
    dot = path.size();
  }
  char number[24];
  std::snprintf(number, sizeof number, "-%04llu", static_cast<unsigned long long>(index));
  return path.substr(0, dot) + number + path.substr(dot);
}

struct FileWriter::State {
  std::string path;
  WriterOptions options;
  std::vector<std::byte> header;
  bool rotating = false;

  // The caller's side.
  std::unique_ptr<Chunk> current;
  uint64_t file_bytes = 0;    // what the current file will hold once queued chunks are written
  uint64_t file_records = 0;  // records queued for the current file
  std::chrono::steady_clock::time_point file_started;
  WriterStats stats;
  bool closed = false;

  // Shared with the writer thread, under `mutex`.
  mutable std::mutex mutex;
  std::condition_variable to_writer, to_caller;
  std::deque<std::unique_ptr<Chunk>> queued;
  std::vector<std::unique_ptr<Chunk>> spare;
  size_t chunks = 0;  // allocated so far, at most options.max_chunks
  bool stop = false;
  std::optional<Error> error;
  std::atomic<bool> has_error{false};  // error is set: the caller checks this per record
  std::vector<std::string> files;

  // The writer thread's.
  UniqueFd fd;
  uint64_t file_index = 0;
  std::thread thread;

  std::string file_name(uint64_t index) const {
    return rotating ? rotated_name(path, index) : path;
  }

  // Opens file `index` and writes its header (appending: after what is there).
  Result<> open_file(uint64_t index) {
    std::string name = file_name(index);
    // Appending to PCAP reads the existing header first: read-write then.
    bool check_header = options.append && options.format == Format::kPcap;
    int flags = (check_header ? O_RDWR : O_WRONLY) | O_CREAT | O_CLOEXEC |
                (options.append ? O_APPEND : O_TRUNC);
    auto opened = capture::open_file(options, name, flags);
    if (!opened) return std::unexpected(opened.error());
    UniqueFd f = std::move(*opened);
    if (check_header) {  // PCAP has one header per file: append only behind the same header
      struct stat st {};
      if (::fstat(f.get(), &st) == 0 && st.st_size > 0) {
        std::vector<std::byte> existing(header.size());
        if (::pread(f.get(), existing.data(), existing.size(), 0) != ssize_t(existing.size()) ||
            existing != header) {
          return fail(ErrorCode::kFailedPrecondition,
                      "capture: " + name +
                          " is not a PCAP file with the same snaplen; append to pcapng instead");
        }
        fd = std::move(f);
        record_file(name);
        return {};
      }
    }
    if (auto ok = write_all(f.get(), header.data(), header.size(), name); !ok) return ok;
    fd = std::move(f);
    record_file(name);
    return {};
  }
  void record_file(const std::string& name) {
    std::lock_guard lock(mutex);
    files.push_back(name);
  }
  static Result<> write_all(int f, const std::byte* p, size_t n, const std::string& name) {
    while (n > 0) {
      ssize_t w = ::write(f, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return fail_errno("capture: write " + name);
      p += w;
      n -= size_t(w);
    }
    return {};
  }
  Result<> close_file() {
    if (!fd) return {};
    std::string name = file_name(file_index);
    if (options.sync != Sync::kNever && ::fsync(fd.get()) != 0)
      return fail_errno("capture: fsync " + name);
    if (::close(fd.release()) != 0) return fail_errno("capture: close " + name);
    return {};
  }

  void run() {
    for (;;) {
      std::unique_ptr<Chunk> c;
      bool failed = false;
      {
        std::unique_lock lock(mutex);
        to_writer.wait(lock, [&] { return stop || !queued.empty(); });
        if (queued.empty()) break;  // stop, and everything written
        c = std::move(queued.front());
        queued.pop_front();
        failed = error.has_value();
      }
      Result<> ok = failed ? Result<>{} : write_chunk(*c);  // after an error: discard
      std::lock_guard lock(mutex);
      if (!ok) set_error_locked(ok.error());
      c->used = 0;
      c->rotate_after = false;
      spare.push_back(std::move(c));
      to_caller.notify_all();
    }
    auto closed_ok = close_file();
    std::lock_guard lock(mutex);
    if (!closed_ok) set_error_locked(closed_ok.error());
  }
  // Keeps the first error.
  void set_error_locked(const Error& e) {
    if (error) return;
    error = e;
    has_error.store(true, std::memory_order_release);
  }
  // Hands the caller's chunk to the writer if it holds records or a rotation.
  void queue_current_locked() {
    if (current && (current->used > 0 || current->rotate_after)) {
      queued.push_back(std::move(current));
      to_writer.notify_one();
    }
  }
  [[nodiscard]] std::unique_ptr<Chunk> new_chunk() const {
    auto c = std::make_unique<Chunk>();
    c->data.resize(options.chunk_bytes);
    return c;
  }

  Result<> write_chunk(const Chunk& c) {
    std::string name = file_name(file_index);
    if (auto ok = write_all(fd.get(), c.data.data(), c.used, name); !ok) return ok;
    if (options.sync == Sync::kEveryChunk && ::fsync(fd.get()) != 0)
      return fail_errno("capture: fsync " + name);
    if (!c.rotate_after) return {};
    if (auto ok = close_file(); !ok) return ok;
    return open_file(++file_index);
  }

  // The caller's next empty chunk; waits while all of them are queued.
  Result<> next_chunk() {
    std::unique_lock lock(mutex);
    queue_current_locked();
    if (spare.empty() && chunks < options.max_chunks) {
      ++chunks;
      lock.unlock();
      current = new_chunk();
      return {};
    }
    to_caller.wait(lock, [&] { return !spare.empty() || error; });
    if (error) return std::unexpected(*error);
    current = std::move(spare.back());
    spare.pop_back();
    return {};
  }
};

Result<std::unique_ptr<FileWriter>> FileWriter::open(const std::string& path,
                                                     const WriterOptions& options) {
  if (auto ok = check_writer_options(options); !ok) return std::unexpected(ok.error());
  auto s = std::make_unique<State>();
  s->path = path;
  s->options = options;
  s->options.max_chunks = std::max<size_t>(options.max_chunks, 2);
  // A record must fit a chunk: header + snaplen + pcapng's padding and trailer.
  s->options.chunk_bytes = std::max<size_t>(options.chunk_bytes, size_t{options.snaplen} + 64);
  s->header = file_header(s->options);
  s->rotating = rotates(options);
  if (auto ok = s->open_file(0); !ok) return std::unexpected(ok.error());
  s->file_bytes = s->header.size();
  s->file_started = std::chrono::steady_clock::now();
  if (options.preallocate) {
    for (; s->chunks < s->options.max_chunks; ++s->chunks)
      s->spare.push_back(s->new_chunk());
  }
  if (auto ok = s->next_chunk(); !ok) return std::unexpected(ok.error());
  State* raw = s.get();
  s->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<FileWriter>(new FileWriter(std::move(s)));
}

FileWriter::FileWriter(std::unique_ptr<State> state) : s_(std::move(state)) {}

FileWriter::~FileWriter() {
  (void)close();
}

Result<> FileWriter::write(uint64_t timestamp_ns, std::span<const std::byte> frame,
                           uint32_t payload_offset) {
  State& s = *s_;
  if (s.closed) return fail(ErrorCode::kFailedPrecondition, "capture: writer closed");
  const WriterOptions& o = s.options;
  auto frame_length = static_cast<uint32_t>(frame.size());
  RecordData data = record_data(o.format, frame_length, payload_offset, o.snaplen);
  size_t record = record_size(o.format, data.length);
  if (record > o.chunk_bytes) {
    return fail(ErrorCode::kInvalidArgument, "capture: a record larger than a chunk");
  }
  if (s.rotating && s.file_records > 0) {
    bool too_big = o.rotate_bytes > 0 && s.file_bytes + record > o.rotate_bytes;
    bool too_old = o.rotate_interval.count() > 0 &&
                   std::chrono::steady_clock::now() - s.file_started >= o.rotate_interval;
    if (too_big || too_old) {
      s.current->rotate_after = true;
      if (auto ok = s.next_chunk(); !ok) return ok;
      s.file_bytes = s.header.size();
      s.file_records = 0;
      s.file_started = std::chrono::steady_clock::now();
    }
  }
  if (s.current->used + record > s.current->data.size()) {
    if (auto ok = s.next_chunk(); !ok) return ok;
  } else if (s.has_error.load(std::memory_order_acquire)) {
    std::lock_guard lock(s.mutex);
    return std::unexpected(*s.error);
  }
  auto* out = reinterpret_cast<uint8_t*>(s.current->data.data() + s.current->used);
  out = begin_record(out, o.format, timestamp_ns, data.length, frame_length);
  std::memcpy(out, frame.data() + data.offset, data.length);
  finish_record(out + data.length, o.format, data.length);
  s.current->used += record;
  s.file_bytes += record;
  ++s.file_records;
  ++s.stats.packets;
  s.stats.bytes += data.length;
  return {};
}

Result<> FileWriter::close() {
  State& s = *s_;
  if (s.closed) {
    std::lock_guard lock(s.mutex);
    if (s.error) return std::unexpected(*s.error);
    return {};
  }
  s.closed = true;
  {
    std::lock_guard lock(s.mutex);
    s.queue_current_locked();
    s.stop = true;
    s.to_writer.notify_one();
  }
  s.thread.join();
  std::lock_guard lock(s.mutex);
  if (s.error) return std::unexpected(*s.error);
  return {};
}

WriterStats FileWriter::stats() const {
  return s_->stats;
}

std::vector<std::string> FileWriter::files() const {
  std::lock_guard lock(s_->mutex);
  return s_->files;
}

}  // namespace daqiri::capture
