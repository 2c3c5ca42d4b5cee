// `daqiri-ctl tap`: attach to a flow as an ordinary client and print, count, verify or record
// what arrives.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control_client.hpp"
#include "daqiri/capture.hpp"
#include "daqiri/client.hpp"

namespace daqiri::ctl {

struct TapArgs {
  std::string flow;
  uint64_t count = 0;   // stop after this many; 0: until --timeout (or forever)
  double timeout = 0;   // seconds; 0: none
  bool verify = false;  // check daqiri-gen's sequence and pattern
  bool quiet = false;   // no line per packet
  bool block = false;   // backpressure: a full ring holds the flow back instead of dropping
  std::string out;      // record what arrives here (capture.hpp: format, rotation, sync)
  capture::WriterOptions capture;
  bool gpu = false;        // receive in a GPU ring; --out then writes from GPU memory
  bool use_cufile = true;  // with gpu: cuFile where libcufile loads
};

int run_tap(const Options& opts, const TapArgs& args);
// `tap --gpu` (tap_gpu.cpp; without CUDA it says so and fails).
int run_tap_gpu(const Options& opts, const TapArgs& args);

// What tap and tap --gpu share (connect_session and exit_for: send too).
// A data-plane session under --socket, connecting for at most --timeout; name: how the daemon
// lists it.
Result<std::unique_ptr<Client>> connect_session(const Options& opts, const std::string& name);
RxOptions tap_rx_options(const TapArgs& args);
capture::WriterOptions tap_writer_options(const TapArgs& args);
int exit_for(const Error& e);
void print_tap_error(const std::string& message);
void print_tap_detached();
// The summary both print: what a writer wrote, then what arrived.
void print_tap_summary(const std::vector<std::string>* files, const capture::WriterStats& written,
                       uint64_t packets, std::optional<uint64_t> payload_bytes, double seconds);

// A tap's receive loop: what it counted, when it stops, how it ended.
struct TapRun {
  explicit TapRun(const TapArgs& a);
  // How long the next wait may sleep (at most 1 s); nullopt once --count packets arrived or
  // --timeout passed.
  [[nodiscard]] std::optional<std::chrono::milliseconds> next_wait() const;

  const TapArgs& args;
  uint64_t packets = 0;
  std::optional<uint64_t> payload_bytes;  // known when payloads passed through the host
  bool detached = false;
  std::optional<Error> write_error;
  std::chrono::steady_clock::time_point start, deadline;
};

// Closes the writer (FileWriter or GpuFileWriter; null: none), prints the summary and what went
// wrong; true when the tap did what was asked (before --verify's own checks).
template <typename Writer>
bool finish_tap(Writer* writer, TapRun& end) {
  std::vector<std::string> files;
  if (writer != nullptr) {
    auto closed = writer->close();
    if (!end.write_error && !closed) end.write_error = closed.error();
    files = writer->files();
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - end.start).count();
  print_tap_summary(writer ? &files : nullptr, writer ? writer->stats() : capture::WriterStats{},
                    end.packets, end.payload_bytes, secs);
  if (end.write_error) print_tap_error(end.write_error->message);
  if (end.detached) print_tap_detached();
  return !end.detached && !end.write_error &&
         (end.args.count == 0 || end.packets >= end.args.count);
}

}  // namespace daqiri::ctl
