#include "send.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <iostream>
#include <optional>
#include <thread>
#include <vector>

#include "daqiri/client.hpp"
#include "daqiri/common/match_text.hpp"
#include "daqiri/frame.hpp"
#include "daqiri/test_pattern.hpp"
#include "tap.hpp"

namespace daqiri::ctl {
namespace {

using Clock = std::chrono::steady_clock;

std::optional<uint32_t> parse_ipv4(const std::string& text) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

// "IPV4:PORT", or "IPV4" alone where `port_optional` (the port stays as given).
bool parse_endpoint(const std::string& text, bool port_optional, frame::UdpEndpoint& out) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos && !port_optional) return false;
  auto ip = parse_ipv4(text.substr(0, colon));
  if (!ip) return false;
  out.ipv4 = *ip;
  if (colon == std::string::npos) return true;
  uint64_t port = 0;
  if (!match_text::whole_number(std::string_view(text).substr(colon + 1), port) || port == 0 ||
      port > 65535)
    return false;
  out.port = static_cast<uint16_t>(port);
  return true;
}

// Six two-digit hex bytes separated by colons.
bool parse_mac(std::string_view text, frame::Mac& out) {
  if (text.size() != 17) return false;
  for (size_t i = 0; i < out.size(); ++i) {
    const char* at = text.data() + i * 3;
    if (i > 0 && at[-1] != ':') return false;
    auto [end, ec] = std::from_chars(at, at + 2, out[i], 16);
    if (ec != std::errc() || end != at + 2) return false;
  }
  return true;
}

int usage(const std::string& message) {
  std::cerr << "daqiri-ctl send: " << message << '\n';
  return kUsage;
}

int failed(const Error& e) {
  std::cerr << "daqiri-ctl send: " << e.message << '\n';
  return exit_for(e);
}

// The interface's address, as the daemon lists it: the frames' source unless --source says.
std::optional<uint32_t> interface_address(ControlClient& control, const std::string& name,
                                          int& exit_code) {
  v1::ListInterfacesResponse resp;
  auto ctx = control.context();
  auto status = control.control().ListInterfaces(ctx.get(), {}, &resp);
  if (!status.ok()) {
    exit_code = control.report(status);
    return std::nullopt;
  }
  for (const auto& i : resp.interfaces()) {
    if (i.name() != name) continue;
    if (auto ip = parse_ipv4(i.address())) return ip;
    std::cerr << "daqiri-ctl send: interface \"" << name << "\" has no IPv4 address (\""
              << i.address() << "\"): give --source\n";
    exit_code = kUsage;
    return std::nullopt;
  }
  std::cerr << "daqiri-ctl send: no interface \"" << name << "\"\n";
  exit_code = kRejected;
  return std::nullopt;
}

}  // namespace

int run_send(ControlClient& control, const Options& opts, const SendArgs& args) {
  const TxOptions tx = with_environment_queue({.interface = args.interface, .queue = args.queue});
  if (tx.interface.empty()) {
    // A queue alone is not paired with the environment's interface: it may name another one's.
    return usage(args.queue.empty()
                     ? "name an interface (--interface, or set DAQIRI_TX_INTERFACE)"
                     : "--queue names a queue of an interface: give --interface too");
  }
  frame::UdpEndpoint dst;
  if (!parse_endpoint(args.dest, false, dst))
    return usage("--dest: expected IPV4:PORT, got \"" + args.dest + "\"");
  frame::Mac dst_mac{};
  if (!args.dest_mac.empty() && !parse_mac(args.dest_mac, dst_mac))
    return usage("--dest-mac: expected aa:bb:cc:dd:ee:ff, got \"" + args.dest_mac + "\"");
  if (args.size < pattern::kHeaderSize || args.size > 65507)
    return usage(fmt::format("--size must be {} to 65507", pattern::kHeaderSize));
  frame::UdpEndpoint src{0, dst.port};
  if (!args.source.empty()) {
    if (!parse_endpoint(args.source, true, src))
      return usage("--source: expected IPV4[:PORT], got \"" + args.source + "\"");
  } else {
    int code = kOk;
    auto ip = interface_address(control, tx.interface, code);
    if (!ip) return code;
    src.ipv4 = *ip;
  }

  auto client = connect_session(opts, "daqiri-ctl send");
  if (!client) return failed(client.error());
  auto attached = (*client)->attach_tx(tx);
  if (!attached) return failed(attached.error());
  TxStream& stream = **attached;
  const size_t frame_size = frame::kUdpHeaders + args.size;
  if (frame_size > stream.buf_size()) {
    std::cerr << fmt::format(
        "daqiri-ctl send: a {}-byte payload makes a {}-byte frame; the queue's buffers take {}\n",
        args.size, frame_size, stream.buf_size());
    return kRejected;
  }

  const auto wait_limit = std::chrono::milliseconds(static_cast<int64_t>(args.timeout * 1000));
  const auto start = Clock::now();
  auto progress = start;  // when the queue last took or gave back a frame
  // Waiting for the daemon is bounded: it may have detached us or stopped taking frames.
  auto stalled = [&]() -> std::optional<int> {
    if (stream.detached()) {
      std::cerr << "daqiri-ctl send: the stream was detached by the daemon\n";
      return kFailed;
    }
    if (Clock::now() - progress > wait_limit) {
      std::cerr << fmt::format("daqiri-ctl send: the queue took no frame for {} s\n", args.timeout);
      return kFailed;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    return std::nullopt;
  };
  std::vector<TxBuffer> bufs(32);
  uint64_t seq = 0;
  while (seq < args.count) {
    size_t want = std::min<uint64_t>(bufs.size(), args.count - seq);
    if (args.rate > 0) {
      // Paced: sleep until the next frame is due, then send the frames that are.
      auto due = start + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(double(seq) / args.rate));
      std::this_thread::sleep_until(due);
      double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      auto due_now = static_cast<int64_t>(elapsed * args.rate) + 1 - static_cast<int64_t>(seq);
      want = std::clamp<int64_t>(due_now, 1, static_cast<int64_t>(want));
    }
    size_t got = stream.reserve({bufs.data(), want});
    if (got == 0) {
      if (auto code = stalled()) return *code;  // every buffer is in flight
      continue;
    }
    for (size_t i = 0; i < got; ++i) {
      TxBuffer& b = bufs[i];
      size_t h = frame::write_udp_headers(b.data, src, dst, args.size, {}, dst_mac);
      pattern::fill(b.data.subspan(h, args.size), dst.port, seq + i);
      b.length = static_cast<uint32_t>(frame_size);
    }
    for (size_t queued = 0; queued < got;) {
      auto r = stream.submit({bufs.data() + queued, got - queued});
      if (!r) return failed(r.error());
      queued += *r;
      if (*r > 0) {
        progress = Clock::now();
      } else if (auto code = stalled()) {
        return *code;  // the ring is full
      }
    }
    seq += got;
  }
  if (auto flushed = stream.flush(wait_limit); !flushed) return failed(flushed.error());
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  uint64_t refused = stream.failed();  // frames the daemon or the kernel would not send
  uint64_t sent = seq - refused;
  std::cout << fmt::format("sent {} packets, {} payload bytes in {:.3f} s ({:.0f} pps)", sent,
                           sent * args.size, seconds, seconds > 0 ? double(sent) / seconds : 0.0);
  if (refused > 0) std::cout << fmt::format("; {} refused by the daemon", refused);
  std::cout << '\n';
  return refused == 0 ? kOk : kFailed;
}

}  // namespace daqiri::ctl
