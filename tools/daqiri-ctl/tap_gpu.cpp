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
  auto client = connect_session(opts, "daqiri-ctl tap");
  if (!client) {
    print_tap_error(client.error().message);
    return exit_for(client.error());
  }
  auto ring = GpuRxRing::attach(**client, tap_rx_options(args));
  if (!ring) {
    print_tap_error(ring.error().message);
    // No usable CUDA driver is unavailable too, but it is this host's, not "no daemon" (3).
    int code = exit_for(ring.error());
    return code == kNoDaemon && (*client)->connected() ? kFailed : code;
  }
  std::unique_ptr<capture::GpuFileWriter> writer;
  if (!args.out.empty()) {
    auto w = capture::GpuFileWriter::open(args.out, **ring, tap_writer_options(args),
                                          {.use_cufile = args.use_cufile});
    if (!w) {
      print_tap_error(w.error().message);
      return kFailed;
    }
    writer = std::move(*w);
    std::cout << "data path: " << writer->data_path() << '\n' << std::flush;
  }
  uint32_t seen = 0;
  TapRun run(args);
  while (auto wait = run.next_wait()) {
    auto p = (*ring)->wait(seen, *wait);
    if (!p) {
      run.detached = true;
      break;
    }
    uint32_t n = *p - seen;
    if (args.count > 0) n = static_cast<uint32_t>(std::min<uint64_t>(n, args.count - run.packets));
    if (writer) {
      if (auto ok = writer->write(seen, seen + n); !ok) run.write_error = ok.error();
    }
    (*ring)->release(*p);  // written (or only counted): the slots go back
    seen = *p;
    run.packets += n;
    if (run.write_error) break;
  }
  return finish_tap(writer.get(), run) ? kOk : kFailed;
}
#endif

}  // namespace daqiri::ctl
