#include "tap.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <vector>

#include "daqiri/client.hpp"
#include "daqiri/test_pattern.hpp"

namespace daqiri::ctl {
namespace {

// Sequence bookkeeping per daqiri-gen stream.
struct StreamCheck {
  std::vector<bool> seen;
  uint64_t received = 0;
  uint64_t duplicates = 0;
  uint64_t reordered = 0;
  uint64_t max_seq = 0;

  void add(uint64_t seq) {
    if (seq >= seen.size()) seen.resize(seq + 1 + seen.size() / 2, false);
    if (seen[seq]) {
      ++duplicates;
      return;
    }
    if (received > 0 && seq < max_seq) ++reordered;
    seen[seq] = true;
    ++received;
    if (seq > max_seq || received == 1) max_seq = seq;
  }
  [[nodiscard]] uint64_t lost() const { return received == 0 ? 0 : max_seq + 1 - received; }
};

std::string ipv4(uint32_t a) {
  return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
}

}  // namespace

int exit_for(const Error& e) {
  switch (e.code) {
    case ErrorCode::kUnavailable:
      return kNoDaemon;
    case ErrorCode::kPermissionDenied:
      return kDenied;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kResourceExhausted:
      return kRejected;
    case ErrorCode::kInternal:
      return kFailed;
  }
  return kFailed;
}

Result<std::unique_ptr<Client>> connect_session(const Options& opts, const std::string& name) {
  return Client::connect(
      {opts.socket, name, std::chrono::milliseconds(int64_t(opts.timeout_seconds * 1000))});
}

void print_tap_summary(const std::vector<std::string>* files, const capture::WriterStats& written,
                       uint64_t packets, std::optional<uint64_t> payload_bytes, double seconds) {
  if (files != nullptr) {
    std::cout << fmt::format("wrote {} packets ({} bytes) to {} file{}: {}\n", written.packets,
                             written.bytes, files->size(), files->size() == 1 ? "" : "s",
                             fmt::join(*files, ", "));
  }
  std::cout << fmt::format("received {} packets", packets);
  if (payload_bytes) std::cout << fmt::format(", {} payload bytes", *payload_bytes);
  std::cout << fmt::format(" in {:.3f} s ({:.0f} pps)\n", seconds,
                           seconds > 0 ? packets / seconds : 0.0);
}

RxOptions tap_rx_options(const TapArgs& args) {
  RxOptions o;
  o.flow = args.flow;
  o.block = args.block;
  return o;
}

capture::WriterOptions tap_writer_options(const TapArgs& args) {
  capture::WriterOptions o = args.capture;
  o.flow = args.flow;
  return o;
}

TapRun::TapRun(const TapArgs& a)
    : args(a),
      start(std::chrono::steady_clock::now()),
      deadline(a.timeout > 0 ? start + std::chrono::milliseconds(int64_t(a.timeout * 1000))
                             : std::chrono::steady_clock::time_point::max()) {}

std::optional<std::chrono::milliseconds> TapRun::next_wait() const {
  auto now = std::chrono::steady_clock::now();
  if ((args.count > 0 && packets >= args.count) || now >= deadline) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::min<std::chrono::steady_clock::duration>(deadline - now, std::chrono::seconds(1)));
}

void print_tap_error(const std::string& message) {
  std::cerr << "daqiri-ctl: tap: " << message << '\n';
}

void print_tap_detached() {
  std::cout << "the stream was detached by the daemon\n";
}

int run_tap(const Options& opts, const TapArgs& args) {
  if (args.flow.empty()) {
    std::cerr << "daqiri-ctl tap: name a flow (or set DAQIRI_FLOW)\n";
    return kUsage;
  }
  if (args.gpu) return run_tap_gpu(opts, args);
  auto client = connect_session(opts, "daqiri-ctl tap");
  if (!client) {
    print_tap_error(client.error().message);
    return exit_for(client.error());
  }
  auto rx = (*client)->attach_rx(tap_rx_options(args));
  if (!rx) {
    print_tap_error(rx.error().message);
    return exit_for(rx.error());
  }
  std::unique_ptr<capture::FileWriter> writer;
  if (!args.out.empty()) {
    auto w = capture::FileWriter::open(args.out, tap_writer_options(args));
    if (!w) {
      print_tap_error(w.error().message);
      return kFailed;
    }
    writer = std::move(*w);
  }
  // A stream is one sender's sequence: daqiri-gen's stream id and its UDP source port.
  std::map<uint64_t, StreamCheck> streams;
  uint64_t bytes = 0;
  uint64_t corrupt = 0;
  uint64_t foreign = 0;
  TapRun run(args);
  while (auto wait = run.next_wait()) {
    uint32_t max =
        args.count ? static_cast<uint32_t>(std::min<uint64_t>(args.count - run.packets, 4096)) : 0;
    auto burst = (*rx)->wait_burst(*wait, max);
    if (!burst) {
      run.detached = true;
      break;
    }
    for (const Packet& p : *burst) {
      ++run.packets;
      bytes += p.payload.size();
      if (writer && !run.write_error) {
        auto offset = static_cast<uint32_t>(p.payload.data() - p.frame.data());
        if (auto ok = writer->write(p.timestamp_ns, p.frame, offset); !ok) {
          run.write_error = ok.error();
        }
      }
      pattern::Header h{};
      auto check = args.verify ? pattern::check(p.payload, h) : pattern::Check::kNotOurs;
      if (check == pattern::Check::kOk) {
        auto udp_src = frame::parse_udp(p.frame);
        uint64_t key = (uint64_t{udp_src ? udp_src->src.port : 0u} << 32) | h.stream;
        streams[key].add(h.sequence);
      }
      if (check == pattern::Check::kCorrupt) ++corrupt;
      if (args.verify && check == pattern::Check::kNotOurs) ++foreign;
      if (!args.quiet) {
        auto udp = frame::parse_udp(p.frame);
        std::cout << fmt::format("{}.{:09d} flow {} {} bytes", p.timestamp_ns / 1000000000,
                                 p.timestamp_ns % 1000000000, p.flow_id, p.frame.size());
        if (udp) {
          std::cout << fmt::format(" {}:{} -> {}:{}", ipv4(udp->src.ipv4), udp->src.port,
                                   ipv4(udp->dst.ipv4), udp->dst.port);
        }
        if (check == pattern::Check::kOk) std::cout << " seq " << h.sequence;
        std::cout << '\n';
      }
    }
    (*rx)->release(*burst);  // copied into the writer's queue: on its way to disk
    if (run.write_error) break;
  }
  run.payload_bytes = bytes;
  bool ok = finish_tap(writer.get(), run);
  if (args.verify) {
    uint64_t lost = 0, reordered = 0, dups = 0;
    for (const auto& [id, s] : streams) {
      lost += s.lost();
      reordered += s.reordered;
      dups += s.duplicates;
    }
    std::cout << fmt::format(
        "verify: {} streams, lost {}, reordered {}, duplicate {}, corrupt {}, "
        "not daqiri-gen {}\n",
        streams.size(), lost, reordered, dups, corrupt, foreign);
    ok = ok && lost == 0 && reordered == 0 && dups == 0 && corrupt == 0 && foreign == 0;
  }
  return ok ? kOk : kFailed;
}

}  // namespace daqiri::ctl
