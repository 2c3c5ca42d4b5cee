// Capture from a GPU ring to files: the packets a GpuRxRing holds in GPU memory go to disk in
// the same PCAP / PCAPNG / raw layout as capture::FileWriter, without passing through the
// caller's host code.
//
//   auto w = daqiri::capture::GpuFileWriter::open("/data/run.pcap", **ring, {});
//   for (uint32_t seen = 0;;) {
//     auto p = ring->wait(seen, 100ms);
//     if (!p) break;
//     w->write(seen, *p);        // the bytes have left the ring when this returns
//     ring->release(*p);
//     seen = *p;
//   }
//   std::printf("%s\n", w->data_path().c_str());
//
// How: a kernel lays the records (headers built on the GPU from the ring's descriptors, frames
// copied from their slots) back to back in a device buffer; each time the buffer is full (and
// at rotation and close) it goes to the file with cuFileWrite (GPUDirect Storage: the storage
// reads GPU memory; without the nvidia-fs module libcufile's compatibility mode copies through
// host memory itself) when libcufile loads, or else with one cudaMemcpy into pinned host
// memory and pwrite(2) (host staging). data_path() says which. When write() returns, the
// packets are copied out of the ring (into the buffer, or on to the file), so the ring's slots
// may be released. One thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "daqiri/capture.hpp"
#include "daqiri/gpu_rx_ring.hpp"

namespace daqiri::capture {

struct GpuWriterOptions {
  bool use_cufile = true;  // false: host staging even where libcufile is present
};

class GpuFileWriter {
 public:
  // Opens the first file (rotation opens more) and writes its header. Of WriterOptions:
  // format, snaplen, rotate_bytes, rotate_interval, sync, chunk_bytes (the device buffer: at
  // least 1 MiB and one record), interface, flow, open_file and append (pcapng and raw) apply;
  // the writer holds one chunk, so max_chunks and preallocate do not.
  static Result<std::unique_ptr<GpuFileWriter>> open(const std::string& path, const GpuRxRing& ring,
                                                     const WriterOptions& options,
                                                     const GpuWriterOptions& gpu = {});
  // The same for a ring given by its view and the CUDA device ordinal holding it (benchmarks,
  // rings laid out like daqiri's by other means).
  static Result<std::unique_ptr<GpuFileWriter>> open(const std::string& path,
                                                     const GpuRingView& ring, int device,
                                                     const WriterOptions& options,
                                                     const GpuWriterOptions& gpu = {});
  ~GpuFileWriter();  // close(), errors dropped
  GpuFileWriter(const GpuFileWriter&) = delete;
  GpuFileWriter& operator=(const GpuFileWriter&) = delete;

  // Writes the ring's packets [first, last) (free-running counters, as GpuRxRing::wait hands
  // them out). After an error every later call returns it.
  Result<> write(uint32_t first, uint32_t last);
  // Syncs as the options say and closes. Returns the first error.
  Result<> close();

  [[nodiscard]] WriterStats stats() const;
  [[nodiscard]] std::vector<std::string> files() const;
  // "cuFile (GPUDirect Storage)", "cuFile (compatibility mode: ...)" or "host staging (...)",
  // with the reason cuFile is not used.
  [[nodiscard]] const std::string& data_path() const;
  [[nodiscard]] bool uses_cufile() const;

  struct State;

 private:
  explicit GpuFileWriter(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace daqiri::capture
