// daqiri-adversary: a client that attacks the daemon's trust boundary, for the adversary tests.
//   claim-race SOCKET FLOW N ORDER GOFILE COUNT PORT
//       ORDER batch: Attach N times, wait for GOFILE, then CLAIM all; ORDER pairs: wait for
//       GOFILE, then Attach and CLAIM N times in turn. Prints "granted G claimed C", then reads
//       COUNT daqiri-gen packets of stream PORT from every claimed ring, checking each payload
//       and the order, and prints "intact C x COUNT" (or what went wrong); then sleeps.
//   tx-rewrite SOCKET SRCPORT DSTPORT COUNT [IF SOURCE DEST]
//       submits COUNT valid frames (SOURCE:SRCPORT -> DEST:DSTPORT, 127.0.0.1 both unless
//       given) through IF's TX queue (lo) while a forked child rewrites the source address, the
//       protocol and the source MAC of every TX buffer in a loop; prints "sent COUNT ok K
//       refused F" once all came back, then sleeps.
//   tx-frame SOCKET KIND
//       submits one frame that breaks the queue's policy (KIND: options, fragment, source,
//       tcp, port) and prints "frame: refused" when it comes back failed, "frame: sent" when it
//       went out.
//   claim-late SOCKET FLOW GOFILE
//       Attaches to FLOW, prints "granted", waits for GOFILE, then claims: prints "claim: claimed"
//       (and the fds it got) or "claim: refused: WHY"; then sleeps.
//   tx-leave SOCKET IF N
//       submits N frames through IF's TX queue, prints "submitted N" and sleeps, never waiting
//       for them (the test kills it once the daemon has taken them).
//   tx-hoard SOCKET N
//       (libdaqiri) attaches to lo's TX queue up to N times in one session, writing every byte
//       of each TX pool; prints "attached I" for each and "refused: WHY" at the first refusal,
//       then sleeps.
//   hold SOCKET FLOW
//       (libdaqiri) attaches to FLOW, which maps its pool, prints "holding" and sleeps without
//       ever reading: its mappings outlive the daemon if that is killed.
//   hello-name SOCKET
//       says HELLO with 64 name bytes and no NUL: a newline, quotes, escapes, UTF-8 and a
//       terminal escape sequence; prints "welcomed", then sleeps.
// Exit codes: 0 as meant, 1 the attack showed something wrong, 3 it could not be set up.
#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/client.hpp"
#include "daqiri/frame.hpp"
#include "daqiri/ring.hpp"
#include "daqiri/test_pattern.hpp"
#include "support/raw_session.hpp"

namespace {

using namespace std::chrono_literals;
using daqiri::test::Raw;
using daqiri::test::RawGrant;
using daqiri::test::say;

constexpr uint32_t kLoopback = 0x7f000001;

uint32_t ipv4(const std::string& text) {
  in_addr a{};
  ::inet_pton(AF_INET, text.c_str(), &a);
  return ntohl(a.s_addr);
}

[[noreturn]] void sleep_forever() {
  for (;;)
    std::this_thread::sleep_for(1s);
}

bool wait_until(const auto& done, std::chrono::seconds limit = 20s) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

void* map(int fd, size_t size, int prot) {
  void* p = ::mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// One claimed RX attachment, mapped.
struct RxRing {
  std::optional<daqiri::abi::RingView> ring;
  const std::byte* region = nullptr;
  uint64_t region_size = 0;
};

std::optional<RxRing> map_rx(const Raw& r) {
  const daqiri_msg_attached& a = r.attached;
  if (a.region_count != 1 || r.fds.size() < 3) return std::nullopt;
  auto* rings = static_cast<std::byte*>(map(r.fds[0].get(), a.rings_size, PROT_READ | PROT_WRITE));
  const void* region = map(r.fds[2].get(), a.regions[0].size, PROT_READ);
  if (rings == nullptr || region == nullptr) return std::nullopt;
  RxRing out;
  out.ring = daqiri::abi::RingView::open(rings + a.ring_offset, a.rings_size - a.ring_offset,
                                         DAQIRI_RING_RX, sizeof(daqiri_rx_desc));
  out.region = static_cast<const std::byte*>(region);
  out.region_size = a.regions[0].size;
  if (!out.ring) return std::nullopt;
  return out;
}

// Reads `count` packets of `stream` in order from `rx` and releases them; false (saying why) on
// a missing, foreign, corrupt or out-of-order one.
bool read_intact(RxRing& rx, uint64_t count, uint32_t stream) {
  for (uint32_t c = 0; c < count; ++c) {
    if (!wait_until([&] { return rx.ring->load_producer() - c > 0; })) {
      say("packet %u never came", c);
      return false;
    }
    daqiri_rx_desc d = *rx.ring->slot<daqiri_rx_desc>(c);
    if (d.region != 0 || d.offset + d.length > rx.region_size) {
      say("packet %u: descriptor outside the region", c);
      return false;
    }
    const auto* f = reinterpret_cast<const uint8_t*>(rx.region + d.offset);
    uint16_t at = daqiri_rx_payload_offset(&d, f);
    if (at == 0 || at > d.length) {
      say("packet %u: no UDP payload", c);
      return false;
    }
    daqiri::pattern::Header h{};
    auto check = daqiri::pattern::check({rx.region + d.offset + at, d.length - at}, h);
    if (check != daqiri::pattern::Check::kOk || h.stream != stream || h.sequence != c) {
      say("packet %u: not intact (check %d, stream %u, sequence %llu)", c, int(check), h.stream,
          static_cast<unsigned long long>(h.sequence));
      return false;
    }
    rx.ring->publish_consumer(c + 1);
  }
  return true;
}

int claim_race(const std::string& socket, const std::string& flow, int n, const std::string& order,
               const std::string& go_file, uint64_t count, uint32_t port) {
  Raw r;
  if (!daqiri::test::raw_open(r, socket)) return 3;
  daqiri::v1::AttachRequest req;
  req.set_flow(flow);
  std::vector<RawGrant> grants;
  std::string refusal;
  auto grant_one = [&] {
    RawGrant g;
    std::string why;
    if (daqiri::test::raw_grant(r, req, g, &why)) {
      grants.push_back(g);
      return true;
    }
    if (refusal.empty()) refusal = why;
    return false;
  };
  bool batch = order == "batch";
  if (batch) {
    for (int i = 0; i < n; ++i)
      grant_one();
    say("granted %zu", grants.size());
  }
  if (!wait_until([&] { return ::access(go_file.c_str(), F_OK) == 0; })) return 3;
  std::vector<RxRing> rings;
  auto claim = [&](const RawGrant& g) {
    std::string why;
    if (!daqiri::test::raw_claim(r, g, &why)) {
      if (refusal.empty()) refusal = why;
      return;
    }
    auto rx = map_rx(r);
    if (rx) rings.push_back(std::move(*rx));
  };
  if (batch) {
    for (const RawGrant& g : grants)
      claim(g);
  } else {
    for (int i = 0; i < n; ++i) {
      if (grant_one()) claim(grants.back());
    }
  }
  say("granted %zu claimed %zu", grants.size(), rings.size());
  if (!refusal.empty()) say("refused: %s", refusal.c_str());
  for (RxRing& rx : rings) {
    if (!read_intact(rx, count, port)) return 1;
  }
  say("intact %zu x %llu", rings.size(), static_cast<unsigned long long>(count));
  sleep_forever();
}

// A TX attachment on lo, mapped.
struct TxSide {
  Raw r;
  std::optional<daqiri::abi::RingView> tx, done;
  std::byte* buffers = nullptr;
  uint32_t buf_size = 0, num_bufs = 0;
};

bool open_tx(TxSide& t, const std::string& socket, const std::string& itf = "lo") {
  daqiri::v1::AttachRequest req;
  req.mutable_tx_queue()->set_interface(itf);
  if (!daqiri::test::raw_open(t.r, socket) || !daqiri::test::raw_attach(t.r, req) ||
      t.r.fds.size() != 4) {
    return false;
  }
  const daqiri_msg_attached& a = t.r.attached;
  auto* rings =
      static_cast<std::byte*>(map(t.r.fds[0].get(), a.rings_size, PROT_READ | PROT_WRITE));
  t.buffers =
      static_cast<std::byte*>(map(t.r.fds[2].get(), a.regions[0].size, PROT_READ | PROT_WRITE));
  if (rings == nullptr || t.buffers == nullptr) return false;
  t.tx = daqiri::abi::RingView::open(rings + a.ring_offset, a.completion_offset - a.ring_offset,
                                     DAQIRI_RING_TX, sizeof(daqiri_tx_desc));
  t.done =
      daqiri::abi::RingView::open(rings + a.completion_offset, a.rings_size - a.completion_offset,
                                  DAQIRI_RING_COMPLETION, sizeof(uint32_t));
  t.buf_size = a.regions[0].buf_size;
  t.num_bufs = a.regions[0].num_bufs;
  return t.tx && t.done;
}

// Submits frames that `write` builds, one per buffer, until `count` went in; returns how many
// came back completed and how many failed.
std::pair<uint64_t, uint64_t> submit_all(TxSide& t, uint64_t count, const auto& write) {
  std::vector<uint32_t> free_bufs;
  for (uint32_t b = std::min(t.num_bufs, t.tx->size()); b-- > 0;)
    free_bufs.push_back(b);
  uint32_t produced = 0, completed = 0;
  uint64_t ok = 0, failed = 0;
  auto reap = [&] {
    uint32_t p = t.done->load_producer();
    for (; completed != p; ++completed) {
      uint32_t e = *t.done->slot<uint32_t>(completed);
      (e & DAQIRI_COMPLETION_FAILED ? failed : ok) += 1;
      free_bufs.push_back(e & ~DAQIRI_COMPLETION_FAILED);
    }
    t.done->publish_consumer(completed);
  };
  for (uint64_t i = 0; i < count;) {
    reap();
    if (free_bufs.empty()) {
      t.tx->wake_consumer(t.r.fds[3].get());
      std::this_thread::yield();
      continue;
    }
    uint32_t b = free_bufs.back();
    free_bufs.pop_back();
    std::span<std::byte> frame(t.buffers + uint64_t{b} * t.buf_size, t.buf_size);
    uint32_t length = write(frame, i);
    *t.tx->slot<daqiri_tx_desc>(produced) = {b, length, 0, 0};
    t.tx->publish_producer(++produced);
    t.tx->wake_consumer(t.r.fds[3].get());
    ++i;
  }
  wait_until([&] {
    reap();
    return completed == produced;
  });
  return {ok, failed};
}

int tx_rewrite(const std::string& socket, uint16_t src_port, uint16_t dst_port, uint64_t count,
               const std::string& itf, uint32_t source, uint32_t dest) {
  TxSide t;
  if (!open_tx(t, socket, itf)) return 3;
  pid_t child = ::fork();
  if (child == 0) {
    // The rewriter: every buffer's IPv4 source ends in .99, its protocol flips between TCP and
    // UDP and its source MAC changes, as fast as it can, while the parent submits.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (uint8_t proto = 6;; proto ^= 6 ^ 17) {
      for (uint32_t b = 0; b < t.num_bufs; ++b) {
        auto* eth = reinterpret_cast<volatile uint8_t*>(t.buffers + uint64_t{b} * t.buf_size);
        volatile uint8_t* ip = eth + daqiri::frame::kEthHeader;
        eth[6] = 0x02;
        eth[11] = proto;
        ip[9] = proto;
        ip[15] = 99;
      }
    }
  }
  auto [ok, failed] = submit_all(t, count, [&](std::span<std::byte> frame, uint64_t i) {
    size_t h = daqiri::frame::write_udp_headers(frame, {source, src_port}, {dest, dst_port}, 32);
    daqiri::pattern::fill(frame.subspan(h, 32), dst_port, i);
    return static_cast<uint32_t>(h + 32);
  });
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  say("sent %llu ok %llu refused %llu", static_cast<unsigned long long>(count),
      static_cast<unsigned long long>(ok), static_cast<unsigned long long>(failed));
  sleep_forever();
}

int tx_frame(const std::string& socket, const std::string& kind) {
  TxSide t;
  if (!open_tx(t, socket)) return 3;
  uint16_t src_port = kind == "port" ? 53 : 40000;
  uint32_t src = kind == "source" ? 0x0a090909 : kLoopback;
  auto [ok, failed] = submit_all(t, 1, [&](std::span<std::byte> frame, uint64_t) {
    size_t h = daqiri::frame::write_udp_headers(frame, {src, src_port}, {kLoopback, 9}, 32);
    auto* ip = frame.data() + daqiri::frame::kEthHeader;
    if (kind == "fragment") ip[6] = std::byte{0x20};  // more fragments
    if (kind == "tcp") ip[9] = std::byte{6};
    if (kind == "options") {
      // A 24-byte IPv4 header (one 4-byte NOP option) and the UDP header after it.
      std::memmove(ip + 24, ip + 20, 8 + 32);
      std::memset(ip + 20, 1, 4);
      ip[0] = std::byte{0x46};
      ip[3] = std::byte{static_cast<uint8_t>(std::to_integer<uint8_t>(ip[3]) + 4)};
      h += 4;
    }
    return static_cast<uint32_t>(h + 32);
  });
  say(failed == 1 ? "frame: refused" : ok == 1 ? "frame: sent" : "frame: lost");
  sleep_forever();
}

int claim_late(const std::string& socket, const std::string& flow, const std::string& go_file) {
  Raw r;
  if (!daqiri::test::raw_open(r, socket)) return 3;
  daqiri::v1::AttachRequest req;
  req.set_flow(flow);
  RawGrant g;
  std::string why;
  if (!daqiri::test::raw_grant(r, req, g, &why)) {
    say("attach failed: %s", why.c_str());
    return 3;
  }
  say("granted");
  if (!wait_until([&] { return ::access(go_file.c_str(), F_OK) == 0; })) return 3;
  if (daqiri::test::raw_claim(r, g, &why)) {
    say("claim: claimed %zu fds", r.fds.size());
  } else {
    say("claim: refused: %s", why.c_str());
  }
  sleep_forever();
}

int tx_leave(const std::string& socket, const std::string& itf, uint32_t n) {
  auto c = daqiri::test::connect_or_exit(socket, "test-leave");
  daqiri::TxOptions o;
  o.interface = itf;
  auto tx = c->attach_tx(o);
  if (!tx) {
    say("attach failed: %s", tx.error().message.c_str());
    return 3;
  }
  std::vector<daqiri::TxBuffer> bufs(n);
  bufs.resize((*tx)->reserve(bufs));
  for (auto& b : bufs) {
    size_t h = daqiri::frame::write_udp_headers(b.data, {kLoopback, 40000}, {kLoopback, 9}, 32);
    daqiri::pattern::fill(b.data.subspan(h, 32), 9, b.index);
    b.length = static_cast<uint32_t>(h + 32);
  }
  auto sent = (*tx)->submit(bufs);
  say("submitted %zu", sent ? *sent : 0);
  if (!sent || *sent != n) return 1;
  sleep_forever();
}

int hold(const std::string& socket, const std::string& flow) {
  auto c = daqiri::test::connect_or_exit(socket, "test-hold");
  daqiri::RxOptions o;
  o.flow = flow;
  if (auto rx = c->attach_rx(o); !rx) {
    say("attach failed: %s", rx.error().message.c_str());
    return 3;
  }
  say("holding");
  sleep_forever();
}

int tx_hoard(const std::string& socket, int n) {
  auto c = daqiri::test::connect_or_exit(socket, "test-hoard");
  for (int i = 1; i <= n; ++i) {
    daqiri::TxOptions o;
    o.interface = "lo";
    auto tx = c->attach_tx(o);
    if (!tx) {
      say("refused: %s", tx.error().message.c_str());
      break;
    }
    // Every page of the pool made real: the memory the attachment costs is taken for sure.
    std::vector<daqiri::TxBuffer> all(1 << 16);
    size_t got = (*tx)->reserve(all);
    for (size_t k = 0; k < got; ++k)
      std::memset(all[k].data.data(), 0x5a, all[k].data.size());
    say("attached %d", i);
  }
  sleep_forever();
}

int hello_name(const std::string& socket) {
  std::array<char, 64> name{};
  const char evil[] = "evil\nname \"quoted\" back\\slash \x1b[31mred\x1b[0m \xc3\xa9t\xc3\xa9 ";
  for (size_t i = 0; i < name.size(); ++i)
    name[i] = evil[i % (sizeof evil - 1)];  // 64 bytes, no NUL
  Raw r;
  if (!daqiri::test::raw_open(r, socket, name)) return 3;
  say("welcomed");
  sleep_forever();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 8 && a[0] == "claim-race") {
    return claim_race(a[1], a[2], std::stoi(a[3]), a[4], a[5], std::stoull(a[6]),
                      static_cast<uint32_t>(std::stoul(a[7])));
  }
  if ((a.size() == 5 || a.size() == 8) && a[0] == "tx-rewrite") {
    bool given = a.size() == 8;
    return tx_rewrite(a[1], static_cast<uint16_t>(std::stoi(a[2])),
                      static_cast<uint16_t>(std::stoi(a[3])), std::stoull(a[4]),
                      given ? a[5] : "lo", given ? ipv4(a[6]) : kLoopback,
                      given ? ipv4(a[7]) : kLoopback);
  }
  if (a.size() == 3 && a[0] == "tx-frame") return tx_frame(a[1], a[2]);
  if (a.size() == 2 && a[0] == "hello-name") return hello_name(a[1]);
  if (a.size() == 3 && a[0] == "hold") return hold(a[1], a[2]);
  if (a.size() == 3 && a[0] == "tx-hoard") return tx_hoard(a[1], std::stoi(a[2]));
  if (a.size() == 4 && a[0] == "claim-late") return claim_late(a[1], a[2], a[3]);
  if (a.size() == 4 && a[0] == "tx-leave") {
    return tx_leave(a[1], a[2], static_cast<uint32_t>(std::stoul(a[3])));
  }
  std::fprintf(stderr, "usage: see the comment at the top of adversary_client.cpp\n");
  return 2;
}
