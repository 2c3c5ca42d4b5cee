#include "capture_commands.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>

#include <cctype>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "table.hpp"

namespace daqiri::ctl {
namespace {

void print_result(const v1::Capture& c) {
  std::cout << fmt::format("capture {}: {} packets ({} bytes) of flow {} to {}\n", c.id(),
                           c.packets(), c.bytes(), c.flow(), fmt::join(c.files(), ", "));
  if (!c.error().empty())
    std::cout << "capture " << c.id() << " ended early: " << c.error() << '\n';
}

}  // namespace

int run_capture(ControlClient& client, const Options& opts, const CaptureArgs& args) {
  v1::StartCaptureRequest req;
  if (args.flow.empty() == args.queue.empty()) {
    std::cerr << "daqiri-ctl: capture: name a flow or --queue INTERFACE/QUEUE\n";
    return kUsage;
  }
  req.set_flow(args.flow);
  if (!args.queue.empty()) {
    auto slash = args.queue.find('/');
    if (slash == std::string::npos) {
      std::cerr << "daqiri-ctl: capture: --queue is INTERFACE/QUEUE\n";
      return kUsage;
    }
    req.mutable_rx_queue()->set_interface(args.queue.substr(0, slash));
    req.mutable_rx_queue()->set_queue(args.queue.substr(slash + 1));
  }
  std::error_code ec;
  req.set_path(std::filesystem::absolute(args.out, ec).lexically_normal().string());
  // The proto's own names: pcapng -> CAPTURE_FORMAT_PCAPNG.
  std::string format = "CAPTURE_FORMAT_" + args.format;
  for (char& ch : format)
    ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  v1::CaptureFormat wire{};
  v1::CaptureFormat_Parse(format, &wire);
  req.set_format(wire);
  req.set_max_packets(args.count);
  req.set_max_seconds(args.duration);
  req.set_snaplen(args.snaplen);
  req.set_rotate_bytes(static_cast<uint64_t>(args.rotate_mb * 1024 * 1024));
  // Ctrl-C (or SIGTERM) stops the capture instead of the program: wait for them in the loop.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (!args.detach) sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  v1::Capture started;
  {
    auto ctx = client.context();
    auto status = client.control().StartCapture(ctx.get(), req, &started);
    if (!status.ok()) return client.report(status);
  }
  if (opts.json && args.detach) {
    print_json(started);
    return kOk;
  }
  std::cout << fmt::format("capture {} started: flow {} to {} (from {})\n", started.id(),
                           started.flow(), started.path(), started.staging());
  if (args.detach) return kOk;
  std::cout.flush();
  for (;;) {
    timespec tick{0, 100'000'000};
    bool stop = sigtimedwait(&stop_signals, nullptr, &tick) > 0;
    v1::Capture now;
    auto ctx = client.context();
    grpc::Status status;
    if (stop) {
      v1::StopCaptureRequest stop_req;
      stop_req.set_id(started.id());
      status = client.control().StopCapture(ctx.get(), stop_req, &now);
    } else {
      v1::ListCapturesResponse list;
      status = client.control().ListCaptures(ctx.get(), {}, &list);
      for (const auto& c : list.captures()) {
        if (c.id() == started.id()) now = c;
      }
    }
    if (!status.ok()) return client.report(status);
    if (stop || (now.id() == started.id() && !now.running())) {
      if (opts.json) {
        print_json(now);
      } else {
        print_result(now);
      }
      return now.error().empty() ? kOk : kFailed;
    }
  }
}

int run_captures(ControlClient& client, const Options& opts) {
  v1::ListCapturesResponse resp;
  auto ctx = client.context();
  auto status = client.control().ListCaptures(ctx.get(), {}, &resp);
  if (!status.ok()) return client.report(status);
  if (opts.json) {
    print_json(resp);
    return kOk;
  }
  if (resp.captures().empty()) {
    std::cout << "(none)\n";
    return kOk;
  }
  Table t({"ID", "FLOW", "FORMAT", "UID", "STATE", "PACKETS", "BYTES", "FILES", "ERROR"});
  for (const auto& c : resp.captures()) {
    t.add({std::to_string(c.id()), c.flow(),
           lower_enum(v1::CaptureFormat_Name(c.format()), "CAPTURE_FORMAT_"),
           std::to_string(c.uid()), c.running() ? "running" : "ended", std::to_string(c.packets()),
           std::to_string(c.bytes()), fmt::format("{}", fmt::join(c.files(), ",")),
           c.error().empty() ? "-" : c.error()});
  }
  t.print(std::cout);
  return kOk;
}

int run_stop_capture(ControlClient& client, const Options& opts, uint64_t id) {
  v1::StopCaptureRequest req;
  req.set_id(id);
  v1::Capture resp;
  auto ctx = client.context();
  auto status = client.control().StopCapture(ctx.get(), req, &resp);
  if (!status.ok()) return client.report(status);
  if (opts.json) {
    print_json(resp);
  } else {
    print_result(resp);
  }
  return kOk;
}

}  // namespace daqiri::ctl
