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
    print_tap_error(client.error().message);
    return exit_for(client.error());
  }
  RxOptions rx_options;
  rx_options.flow = args.flow;
  rx_options.block = args.block;
  auto ring = GpuRxRing::attach(**client, rx_options);
  if (!ring) {
    print_tap_error(ring.error().message);
    // No usable CUDA driver is unavailable too, but it is this host's, not "no daemon" (3).
    int code = exit_for(ring.error());
    return code == kNoDaemon && (*client)->connected() ? kFailed : code;
  }
  std::unique_ptr<capture::GpuFileWriter> writer;
  if (!args.out.empty()) {
    capture::WriterOptions o = args.capture;
    o.flow = args.flow;
    auto w = capture::GpuFileWriter::open(args.out, **ring, o, {.use_cufile = args.use_cufile});
    if (!w) {
      print_tap_error(w.error().message);
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
  TapEnd end{packets, std::nullopt, detached, write_error, start};
  return finish_tap(writer.get(), end, args) ? kOk : kFailed;
}
#endif

}  // namespace daqiri::ctl
