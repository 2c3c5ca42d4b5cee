// `daqiri-ctl tap --gpu`: a flow received in a GPU ring (a device or pinned region), counted
// and, with --out, written to files straight from GPU memory (capture::GpuFileWriter).
#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "tap.hpp"

#ifdef DAQIRI_HAVE_CUDA
#include "daqiri/gpu_capture.hpp"
#include "daqiri/gpu_rx_ring.hpp"
#endif

namespace daqiri::ctl {

#ifndef DAQIRI_HAVE_CUDA
int run_tap_gpu(const Options&, const TapArgs&) {
  std::cerr << "daqiri-ctl: tap: --gpu: this daqiri-ctl was built without CUDA\n";
  return kFailed;
}
#else
int run_tap_gpu(const Options& opts, const TapArgs& args) {
  if (args.verify) {
    std::cerr << "daqiri-ctl: tap: --verify reads payloads on the host; with --gpu, record them "
                 "(--out) and check the file, or use daqiri-gpu-receive\n";
    return kRejected;
  }
  auto client = connect_tap(opts);
  if (!client) {
    std::cerr << "daqiri-ctl: tap: " << client.error().message << '\n';
    return exit_for(client.error());
  }
  RxOptions rx_options;
  rx_options.flow = args.flow;
  rx_options.block = args.block;
  auto ring = GpuRxRing::attach(**client, rx_options);
  if (!ring) {
    std::cerr << "daqiri-ctl: tap: " << ring.error().message << '\n';
    return exit_for(ring.error());
  }
  std::unique_ptr<capture::GpuFileWriter> writer;
  if (!args.out.empty()) {
    capture::WriterOptions o = args.capture;
    o.flow = args.flow;
    auto w = capture::GpuFileWriter::open(args.out, **ring, o, {.use_cufile = args.use_cufile});
    if (!w) {
      std::cerr << "daqiri-ctl: tap: " << w.error().message << '\n';
      return kFailed;
    }
    writer = std::move(*w);
    std::cout << "data path: " << writer->data_path() << '\n' << std::flush;
  }
  std::optional<Error> write_error;
  uint64_t packets = 0;
  bool detached = false;
  uint32_t seen = 0;
  auto start = std::chrono::steady_clock::now();
  auto deadline = args.timeout > 0 ? start + std::chrono::milliseconds(int64_t(args.timeout * 1000))
                                   : std::chrono::steady_clock::time_point::max();
  while (args.count == 0 || packets < args.count) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    auto wait =
        std::min<std::chrono::steady_clock::duration>(deadline - now, std::chrono::seconds(1));
    auto p = (*ring)->wait(seen, std::chrono::duration_cast<std::chrono::milliseconds>(wait));
    if (!p) {
      detached = true;
      break;
    }
    uint32_t n = *p - seen;
    if (args.count > 0) n = static_cast<uint32_t>(std::min<uint64_t>(n, args.count - packets));
    if (writer) {
      if (auto ok = writer->write(seen, seen + n); !ok) write_error = ok.error();
    }
    (*ring)->release(*p);  // written (or only counted): the slots go back
    seen = *p;
    packets += n;
    if (write_error) break;
  }
  std::vector<std::string> files;
  if (writer) {
    auto closed = writer->close();
    if (!write_error && !closed) write_error = closed.error();
    files = writer->files();
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print_tap_summary(writer ? &files : nullptr, writer ? writer->stats() : capture::WriterStats{},
                    packets, std::nullopt, secs);
  if (write_error) std::cerr << "daqiri-ctl: tap: " << write_error->message << '\n';
  if (detached) std::cout << "the stream was detached by the daemon\n";
  bool ok = !detached && !write_error && (args.count == 0 || packets >= args.count);
  return ok ? kOk : kFailed;
}
#endif

}  // namespace daqiri::ctl
