// daqiri-gen: a UDP traffic generator with sequence numbers and a checkable payload
// (daqiri/test_pattern.hpp), so a receiver can prove nothing was lost, reordered or corrupted.
//   daqiri-gen --dest HOST:PORT --size BYTES --count N [--rate PPS | --gbps G] [--ports K]
//              [--source ADDRESS[:PORT]]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "daqiri/test_pattern.hpp"

namespace {

struct Options {
  std::string dest;
  uint32_t size = 1024;
  uint64_t count = 0;
  double duration = 0;
  double rate_pps = 0;
  double gbps = 0;
  uint32_t ports = 1;
  uint32_t batch = 32;
  std::string source;
};

bool parse_dest(const std::string& text, sockaddr_in& out) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  out = {};
  out.sin_family = AF_INET;
  int port = 0;
  const char* digits = text.c_str() + colon + 1;
  auto [end, ec] = std::from_chars(digits, text.c_str() + text.size(), port);
  if (ec != std::errc() || *end != '\0' || port <= 0 || port > 65535) return false;
  out.sin_port = htons(static_cast<uint16_t>(port));
  std::string host = text.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  return inet_pton(AF_INET, host.c_str(), &out.sin_addr) == 1;
}

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"daqiri-gen: UDP traffic with sequence numbers and a checkable payload",
               "daqiri-gen"};
  app.set_version_flag("--version", std::string("daqiri-gen ") + DAQIRI_VERSION);
  app.add_option("--dest", o.dest, "destination HOST:PORT")->required();
  app.add_option("--size", o.size, "UDP payload bytes (at least 24)")->capture_default_str();
  app.add_option("--count", o.count, "packets to send (per run, over all ports)");
  app.add_option("--duration", o.duration, "seconds to send for (instead of, or with, --count)");
  app.add_option("--rate", o.rate_pps, "packets per second (default: as fast as possible)");
  app.add_option("--gbps", o.gbps, "rate in Gbit/s of UDP payload");
  app.add_option("--ports", o.ports, "spread over PORT..PORT+K-1, a sequence per port")
      ->capture_default_str();
  app.add_option("--batch", o.batch, "datagrams per sendmmsg (1-256)")->capture_default_str();
  app.add_option("--source", o.source,
                 "bind this local IPv4 address, or ADDRESS:PORT (a receiver tells streams apart "
                 "by source port)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  sockaddr_in dest{};
  if (!parse_dest(o.dest, dest)) {
    std::fprintf(stderr, "daqiri-gen: --dest: expected IPV4:PORT, got \"%s\"\n", o.dest.c_str());
    return 2;
  }
  if (o.size < daqiri::pattern::kHeaderSize || o.size > 65507) {
    std::fprintf(stderr, "daqiri-gen: --size must be 24 to 65507\n");
    return 2;
  }
  if (o.count == 0 && o.duration <= 0) {
    std::fprintf(stderr, "daqiri-gen: give --count and/or --duration\n");
    return 2;
  }
  if (o.batch == 0 || o.batch > 256 || o.ports == 0 || ntohs(dest.sin_port) + o.ports > 65536) {
    std::fprintf(stderr, "daqiri-gen: --batch is 1-256 and the port range must fit\n");
    return 2;
  }
  if (o.gbps > 0) o.rate_pps = o.gbps * 1e9 / 8 / o.size;

  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int sndbuf = 8 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  if (!o.source.empty()) {
    sockaddr_in src{};
    src.sin_family = AF_INET;
    bool parsed = o.source.find(':') != std::string::npos
                      ? parse_dest(o.source, src)
                      : inet_pton(AF_INET, o.source.c_str(), &src.sin_addr) == 1;
    if (!parsed || ::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
      std::fprintf(stderr, "daqiri-gen: cannot bind %s: %s\n", o.source.c_str(),
                   std::strerror(errno));
      return 1;
    }
  }

  uint16_t base_port = ntohs(dest.sin_port);
  std::vector<uint64_t> seq(o.ports, 0);
  std::vector<std::vector<std::byte>> payload(o.batch, std::vector<std::byte>(o.size));
  std::vector<sockaddr_in> to(o.batch, dest);
  std::vector<iovec> iov(o.batch);
  std::vector<mmsghdr> msgs(o.batch);
  uint64_t sent = 0;
  uint64_t errors = 0;
  uint32_t next_port = 0;
  double start = now_s();
  double deadline = o.duration > 0 ? start + o.duration : 0;
  while ((o.count == 0 || sent < o.count) && (deadline == 0 || now_s() < deadline)) {
    uint64_t want = o.batch;
    if (o.count) want = std::min<uint64_t>(want, o.count - sent);
    if (o.rate_pps > 0) {
      // Pace: never ahead of where the rate says we should be.
      double due = start + double(sent + want) / o.rate_pps;
      double wait = due - now_s();
      if (wait > 0.0002) std::this_thread::sleep_for(std::chrono::duration<double>(wait - 0.0001));
      while (now_s() < due) {
      }
    }
    for (uint64_t i = 0; i < want; ++i) {
      uint32_t p = next_port;
      next_port = (next_port + 1) % o.ports;
      to[i].sin_port = htons(static_cast<uint16_t>(base_port + p));
      daqiri::pattern::fill(payload[i], base_port + p, seq[p]++);
      iov[i] = {payload[i].data(), payload[i].size()};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_name = &to[i];
      msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    uint64_t done = 0;
    while (done < want) {
      int r = ::sendmmsg(fd, msgs.data() + done, static_cast<unsigned>(want - done), 0);
      if (r < 0) {
        if (errno == ENOBUFS || errno == EAGAIN) continue;
        // e.g. ECONNREFUSED from an earlier datagram to a closed port: that one was still sent
        ++errors;
        if (errors > 1000) {
          std::fprintf(stderr, "daqiri-gen: sendmmsg: %s\n", std::strerror(errno));
          return 1;
        }
        continue;
      }
      done += uint64_t(r);
    }
    sent += want;
  }
  double secs = now_s() - start;
  double pps = secs > 0 ? double(sent) / secs : 0;
  unsigned long long packets = sent;
  unsigned long long bytes = packets * o.size;
  std::printf("sent %llu packets, %llu payload bytes in %.3f s: %.0f pps, %.3f Gbit/s\n", packets,
              bytes, secs, pps, pps * o.size * 8 / 1e9);
  return 0;
}
