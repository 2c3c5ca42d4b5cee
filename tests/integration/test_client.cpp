// daqiri-test-client: client behaviours the integration tests need, good and bad.
//   hold SOCKET FLOW N            receive until N buffers are held unreleased, print, sleep
//   slow SOCKET FLOW MS           receive one packet at a time, MS ms per packet, forever
//   take SOCKET FLOW N            receive N packets, releasing slowly, print, stay attached
//   write-rx SOCKET FLOW          receive one packet, then try to write into it (must fault)
//   tx SOCKET IF SRCPORT DSTPORT COUNT SIZE   send COUNT daqiri-gen frames through the daemon
//   tx-to SOCKET IF SRC_IP:PORT DST_IP:PORT DST_MAC COUNT SIZE   the same, between any addresses
//   tx-at SOCKET IF QUEUE COUNT GAP_MS   submit COUNT frames at once, frame i to leave GAP_MS x
//                                 (i + 1) after; print how many came back before their time
//   reconnect SOCKET FLOW COUNT   receive COUNT packets, reconnecting across daemon restarts
//   resume SOCKET FLOW COUNT      receive a daqiri-gen stream of COUNT packets until its last,
//                                 reconnecting across daemon restarts; print what came in each
//                                 session and what was lost, reordered, duplicated or corrupt
//   stream-rx SOCKET FLOW BYTES   receive a TCP flow's streams; print bytes and FNV-1a of each
//   stream-tx SOCKET IF CONN COUNT SIZE TAG
//                                 send COUNT tcp_messages of SIZE bytes to connection CONN
//                                 through IF's TX queue (tx_policy tcp)
//   stream-echo SOCKET FLOW IF BYTES
//                                 send a TCP flow's bytes back on their connections through
//                                 IF's TX queue until BYTES went
//   queue-rx SOCKET IF QUEUE COUNT [full|compact]
//                                 receive every flow of an RX queue through one ring; print
//                                 the packets of each flow and of each UDP destination port
//   frames-rx SOCKET FLOW COUNT [full|compact]
//                                 receive COUNT packets with find_payloads off (compact: on, in
//                                 compact descriptors); print frame and payload bytes, and how
//                                 many packets had a receive stamp
//   batches SOCKET REORDER COUNT  receive COUNT batches of a reorder; print each: its id,
//                                 packets, missing slots, slot bytes, whether it timed out
//                                 and its bytes in hex
//   attach-many SOCKET FLOW N     attach to FLOW N times in one session, print each, then sleep
//   tx-kick SOCKET DSTPORT        submit through the raw ABI while the daemon sleeps; kick it
//   kick-storm SOCKET N           write the TX kick eventfd N times, submitting nothing
//   tx-idle SOCKET IF KICK        attach to IF's TX queue (TxOptions::kick = KICK, 0 or 1),
//                                 print "attached", submit nothing
//   tx-gpu-attach SOCKET IF Q     attach to TX queue IF/Q for frames from GPU memory, say
//                                 what the daemon answered
//   stall-release SOCKET FLOW N   (libdaqiri) hold a block-backpressure ring until the flow
//                                 stalls, give 20 packets back one at a time, receive N in all
//   rx-kick SOCKET FLOW N GOFILE  hold a block-backpressure RX ring until the daemon asks for a
//                                 kick, wait for GOFILE, release one by one until a kick
//                                 goes out, then receive until N packets came
//   cross-release SOCKET FLOW     (libdaqiri) two streams of FLOW in one session, both rings
//                                 filled and held; hands each stream the other's last burst
//                                 ("ignored" if nothing new comes), then its own ("released"
//                                 once packets come again)
//   hostile SOCKET FLOW KIND      break the protocol with the raw ABI: consumer-index,
//                                 tx-descriptor, garbage-message; gpu-tx-length and
//                                 gpu-tx-buffer on TX queue FLOW (GPU buffers): IF/Q, or
//                                 lo's Q
// Prints what happened on stdout (flushed per line); exit codes say whether it went as meant.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/client.hpp"
#include "daqiri/common/fd_passing.hpp"
#include "daqiri/ring.hpp"
#include "daqiri/test_pattern.hpp"
#include "daqiri/v1/control.grpc.pb.h"
#include "support/raw_session.hpp"
#include "support/tcp_messages.hpp"
#include "support/test_client_support.hpp"

namespace {

using namespace std::chrono_literals;

using daqiri::test::expect_cut;
using daqiri::test::Raw;
using daqiri::test::raw_attach;
using daqiri::test::raw_open;
using daqiri::test::say;

std::unique_ptr<daqiri::Client> connect(const std::string& socket, const char* name) {
  return daqiri::test::connect_or_exit(socket, name);
}

// The attachment, or exit 3 saying why.
daqiri::RxStream& attach(daqiri::Client& c, const daqiri::RxOptions& o) {
  auto rx = c.attach_rx(o);
  if (!rx) {
    say("attach failed: %s", rx.error().message.c_str());
    std::exit(3);
  }
  return **rx;
}

daqiri::RxStream& attach(daqiri::Client& c, const std::string& flow) {
  daqiri::RxOptions o;
  o.flow = flow;
  return attach(c, o);
}

int hold(const std::string& socket, const std::string& flow, size_t n, uint32_t ring = 0) {
  auto c = connect(socket, "test-hold");
  daqiri::RxOptions o;
  o.flow = flow;
  o.ring_size = ring;  // larger than the pool: holding can empty the flow's pool
  auto& rx = attach(*c, o);
  say("attached");
  size_t held = 0;
  while (held < n) {
    auto b = rx.wait_burst(1s, static_cast<uint32_t>(n - held));
    if (!b) return 1;
    held += b->size();  // never released
  }
  say("holding %zu", held);
  for (;;)
    std::this_thread::sleep_for(1s);
}

int attach_many(const std::string& socket, const std::string& flow, int n) {
  auto c = connect(socket, "test-attach-many");  // holds every stream it attaches
  for (int i = 1; i <= n; ++i) {
    daqiri::RxOptions o;
    o.flow = flow;
    auto rx = c->attach_rx(o);
    if (!rx) {
      say("attach %d failed: %s", i, rx.error().message.c_str());
      return 3;
    }
    say("attached %d", i);
  }
  for (;;)
    std::this_thread::sleep_for(1s);
}

int slow(const std::string& socket, const std::string& flow, int ms) {
  auto c = connect(socket, "test-slow");
  auto& rx = attach(*c, flow);
  say("attached");
  for (;;) {
    auto b = rx.wait_burst(1s, 1);
    if (!b) return 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    rx.release(*b);
  }
}

// Reads `rx` until nothing has come for 200 ms (its ring full, or the flow quiet), holding
// every burst; how many packets, or nothing if the stream failed or nothing came in 20 s.
std::optional<uint64_t> hold_all(daqiri::RxStream& rx, std::vector<daqiri::Burst>& held) {
  uint64_t got = 0;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    auto b = rx.wait_burst(200ms, 1);
    if (!b || std::chrono::steady_clock::now() > deadline) return std::nullopt;
    if (b->empty()) {
      if (got > 0) return got;
      continue;
    }
    got += b->size();
    held.push_back(*b);
  }
}

// Through libdaqiri: attaches to FLOW with block backpressure and takes packets one a burst
// without releasing until none has come for 200 ms (the ring as full as the flow lets it get:
// the flow waits), prints "holding H"; gives 20 of them back one at a time, 5 ms apart (the
// flow stays stalled, its poller asleep waiting for each: RxStream::release kicks it), prints
// "released 20"; then receives and releases until N came and prints "received N".
int stall_release(const std::string& socket, const std::string& flow, uint64_t n) {
  auto c = connect(socket, "test-stall-release");
  daqiri::RxOptions o;
  o.flow = flow;
  o.block = true;
  auto& rx = attach(*c, o);
  say("attached");
  std::vector<daqiri::Burst> held;
  auto holding = hold_all(rx, held);
  if (!holding) return 1;
  uint64_t got = *holding;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  say("holding %llu", static_cast<unsigned long long>(got));
  if (held.size() < 20) return 1;
  for (size_t i = 0; i < 20; ++i) {
    rx.release(held[i]);
    std::this_thread::sleep_for(5ms);
  }
  say("released 20");
  rx.release(held.back());
  while (got < n) {
    auto b = rx.wait_burst(1s);
    if (!b || std::chrono::steady_clock::now() > deadline) return 1;
    got += b->size();
    rx.release(*b);
  }
  say("received %llu", static_cast<unsigned long long>(got));
  for (;;)
    std::this_thread::sleep_for(1s);
}

int cross_release(const std::string& socket, const std::string& flow) {
  auto c = connect(socket, "test-cross-release");
  auto& a = attach(*c, flow);
  auto& b = attach(*c, flow);
  say("attached");
  std::vector<daqiri::Burst> held_a, held_b;
  auto got_a = hold_all(a, held_a);
  auto got_b = hold_all(b, held_b);
  if (!got_a || !got_b) return 1;
  say("holding %llu and %llu", static_cast<unsigned long long>(*got_a),
      static_cast<unsigned long long>(*got_b));
  // Each burst names slots that exist in both rings: only the stream it came from may take it.
  a.release(held_b.back());
  b.release(held_a.back());
  std::this_thread::sleep_for(300ms);
  if (!a.next_burst().empty() || !b.next_burst().empty()) {
    say("a release of the other stream's burst freed slots");
    return 1;
  }
  say("ignored");
  a.release(held_a.back());
  b.release(held_b.back());
  for (daqiri::RxStream* rx : {&a, &b}) {
    auto again = rx->wait_burst(5s, 1);
    if (!again || again->empty()) return 1;
  }
  say("released");
  return 0;
}

int tx_idle(const std::string& socket, const std::string& itf, bool kick) {
  auto c = connect(socket, "test-tx-idle");
  auto t = c->attach_tx({.interface = itf, .queue = "", .kick = kick});
  if (!t) {
    say("attach failed: %s", t.error().message.c_str());
    return 3;
  }
  say("attached");
  for (;;)
    std::this_thread::sleep_for(1s);
}

// Attaches to TX queue ITF/QUEUE for frames from GPU memory (libdaqiri only: the GPU buffers
// are not mapped) and says whether the daemon agreed.
int tx_gpu_attach(const std::string& socket, const std::string& itf, const std::string& queue) {
  auto c = connect(socket, "test-tx-gpu");
  auto t = c->attach_tx({.interface = itf, .queue = queue, .kick = true, .gpu = true});
  if (!t) {
    say("attach failed: %s", t.error().message.c_str());
    return 3;
  }
  say("attached: frames up to %u bytes, %u header bytes on the host", (*t)->buf_size(),
      (*t)->gpu_memory() ? (*t)->gpu_memory()->info.header_size : 0);
  return 0;
}

int write_rx(const std::string& socket, const std::string& flow) {
  auto c = connect(socket, "test-write-rx");
  auto& rx = attach(*c, flow);
  say("attached");
  for (;;) {
    auto b = rx.wait_burst(1s, 1);
    if (!b) return 1;
    if (b->empty()) continue;
    auto* p = const_cast<std::byte*>((*b)[0].frame.data());
    auto* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(4095));
    if (::mprotect(page, 4096, PROT_READ | PROT_WRITE) == 0) {
      say("mprotect allowed a writable RX mapping");
      return 1;
    }
    say("mprotect refused: %s", std::strerror(errno));
    p[0] = std::byte{0x42};  // must fault
    say("wrote into RX memory");
    return 1;
  }
}

// `count` frames of `size` payload bytes (daqiri::pattern, stream dst.port) from `src` to `dst`.
int tx(const std::string& socket, const std::string& itf, daqiri::frame::UdpEndpoint src,
       daqiri::frame::UdpEndpoint dst, const daqiri::frame::Mac& dst_mac, uint64_t count,
       size_t size) {
  auto c = connect(socket, "test-tx");
  auto t = c->attach_tx({.interface = itf, .queue = ""});
  if (!t) {
    say("attach failed: %s", t.error().message.c_str());
    return 3;
  }
  daqiri::TxStream& s = **t;
  uint64_t seq = 0;
  std::vector<daqiri::TxBuffer> bufs(32);
  auto start = std::chrono::steady_clock::now();  // from the first reserve to the last completion
  while (seq < count) {
    size_t want = std::min<uint64_t>(bufs.size(), count - seq);
    size_t got = s.reserve({bufs.data(), want});
    for (size_t i = 0; i < got; ++i) {
      auto& b = bufs[i];
      size_t h = daqiri::frame::write_udp_headers(b.data, src, dst, size, {}, dst_mac);
      daqiri::pattern::fill(b.data.subspan(h, size), dst.port, seq++);
      b.length = static_cast<uint32_t>(h + size);
    }
    size_t done = 0;
    while (done < got) {
      auto r = s.submit({bufs.data() + done, got - done});
      if (!r) {
        say("submit failed: %s", r.error().message.c_str());
        return 1;
      }
      done += *r;
    }
  }
  if (auto ok = s.flush(10s); !ok) {
    say("flush failed: %s", ok.error().message.c_str());
    return 1;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  say("sent %llu, %llu failed in %.6f s", static_cast<unsigned long long>(count),
      static_cast<unsigned long long>(s.failed()), seconds);
  return 0;
}

// Submits `count` frames at once through IF's TX queue QUEUE, frame i to leave no earlier than
// `gap_ms` x (i + 1) after the submit (TxBuffer::send_at_ns), and watches them come back:
// frames leave in order, so the k-th completion is frame k's. Prints how many came back
// before their time, and when the last did.
int tx_at(const std::string& socket, const std::string& itf, const std::string& queue,
          uint32_t count, uint32_t gap_ms) {
  auto c = connect(socket, "test-tx-at");
  auto t = c->attach_tx({.interface = itf, .queue = queue});
  if (!t) {
    say("attach failed: %s", t.error().message.c_str());
    return 3;
  }
  daqiri::TxStream& s = **t;
  auto realtime = [] {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  };
  std::vector<daqiri::TxBuffer> bufs(count);
  if (s.reserve(bufs) != count) return 1;
  const uint64_t start = realtime();
  std::vector<uint64_t> due(count);
  for (uint32_t i = 0; i < count; ++i) {
    auto& b = bufs[i];
    size_t h = daqiri::frame::write_udp_headers(b.data, {0x7f000001, 5555}, {0x7f000001, 6000}, 64);
    daqiri::pattern::fill(b.data.subspan(h, 64), 6000, i);
    b.length = static_cast<uint32_t>(h + 64);
    b.send_at_ns = due[i] = start + uint64_t{gap_ms} * 1'000'000 * (i + 1);
  }
  if (auto r = s.submit(bufs); !r || *r != count) {
    say("submit failed");
    return 1;
  }
  uint32_t back = 0, early = 0;
  uint64_t last = 0;
  const uint64_t give_up = due.back() + 10'000'000'000ull;
  while (back < count && !s.detached() && realtime() < give_up) {
    uint32_t n = static_cast<uint32_t>(s.reclaim());
    const uint64_t now = realtime();
    for (uint32_t k = back; k < back + n && k < count; ++k)
      early += now < due[k] ? 1 : 0;
    back += n;
    if (n > 0) last = now;
  }
  if (back < count) {
    say("came back %u of %u%s", back, count, s.detached() ? " (detached)" : "");
    return 1;
  }
  say("sent %u, early %u, last back after %llu ms", count, early,
      static_cast<unsigned long long>((last - start) / 1'000'000));
  return 0;
}

int reconnect(const std::string& socket, const std::string& flow, uint64_t count) {
  auto c = connect(socket, "test-reconnect");
  auto* rx = &attach(*c, flow);
  say("attached");
  uint64_t got = 0;
  int reconnects = 0;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (got < count && std::chrono::steady_clock::now() < deadline) {
    auto b = rx->wait_burst(200ms);
    if (!b) {
      say("detached after %llu packets", static_cast<unsigned long long>(got));
      while (!c->reconnect())
        std::this_thread::sleep_for(50ms);
      say("reconnected");
      ++reconnects;
      continue;
    }
    got += b->size();
    rx->release(*b);
  }
  say("received %llu after %d reconnects, %llu sessions", static_cast<unsigned long long>(got),
      reconnects, static_cast<unsigned long long>(c->sessions_opened()));
  return got == count && reconnects > 0 ? 0 : 1;
}

// Receives TCP stream bytes until `total` have arrived; prints bytes and FNV-1a per stream.
int resume(const std::string& socket, const std::string& flow, uint64_t count) {
  auto c = connect(socket, "test-resume");
  auto* rx = &attach(*c, flow);
  say("attached");
  std::vector<bool> seen(count);
  std::vector<uint64_t> per_session{0};
  uint64_t received = 0, reordered = 0, duplicate = 0, corrupt = 0, last = 0;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!seen[count - 1] && std::chrono::steady_clock::now() < deadline) {
    auto b = rx->wait_burst(200ms);
    if (!b) {
      say("detached after %llu packets", static_cast<unsigned long long>(received));
      while (!c->reconnect() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
      say("reconnected");
      per_session.push_back(0);
      continue;
    }
    for (const daqiri::Packet& p : *b) {
      daqiri::pattern::Header h{};
      if (daqiri::pattern::check(p.payload, h) != daqiri::pattern::Check::kOk ||
          h.sequence >= count) {
        ++corrupt;
        continue;
      }
      if (seen[h.sequence]) {
        ++duplicate;
        continue;
      }
      seen[h.sequence] = true;
      reordered += received > 0 && h.sequence < last ? 1 : 0;
      last = h.sequence;
      ++received;
      ++per_session.back();
    }
    rx->release(*b);
  }
  std::string sessions;
  for (uint64_t n : per_session)
    sessions += " " + std::to_string(n);
  say("received %llu, lost %llu, reordered %llu, duplicate %llu, corrupt %llu; per session:%s",
      static_cast<unsigned long long>(received), static_cast<unsigned long long>(count - received),
      static_cast<unsigned long long>(reordered), static_cast<unsigned long long>(duplicate),
      static_cast<unsigned long long>(corrupt), sessions.c_str());
  return seen[count - 1] ? 0 : 1;
}

// Sends COUNT tcp_messages of SIZE bytes, tagged TAG, to connection CONN through IF's first TX
// queue (tx_policy tcp); prints "attached", "submitted" once every one is in the ring, and
// "sent COUNT, F failed" once every one is back.
int stream_tx(const std::string& socket, const std::string& itf, uint16_t conn, uint32_t count,
              size_t size, uint32_t tag) {
  auto c = connect(socket, "test-stream-tx");
  auto t = c->attach_tx({.interface = itf, .queue = ""});
  if (!t) {
    say("attach failed: %s", t.error().message.c_str());
    return 3;
  }
  daqiri::TxStream& s = **t;
  if (size > s.buf_size()) return 2;
  say("attached");
  std::vector<daqiri::TxBuffer> bufs(16);
  auto deadline = std::chrono::steady_clock::now() + 60s;
  uint32_t seq = 0;
  while (seq < count) {
    size_t got = s.reserve({bufs.data(), std::min<size_t>(bufs.size(), count - seq)});
    if (got == 0) {
      if (s.detached() || std::chrono::steady_clock::now() > deadline) return 1;
      std::this_thread::sleep_for(100us);
      continue;
    }
    for (size_t i = 0; i < got; ++i) {
      daqiri::test::tcp_messages::fill(bufs[i].data.first(size), tag, seq++);
      bufs[i].length = static_cast<uint32_t>(size);
      bufs[i].connection = conn;
    }
    for (size_t done = 0; done < got;) {
      auto r = s.submit({bufs.data() + done, got - done});
      if (!r) return 1;
      done += *r;
    }
  }
  say("submitted");
  if (auto ok = s.flush(60s); !ok) {
    say("flush failed: %s", ok.error().message.c_str());
    return 1;
  }
  say("sent %u, %llu failed", count, static_cast<unsigned long long>(s.failed()));
  return 0;
}

// Sends every byte TCP flow FLOW delivers back on the connection it came on, through IF's first
// TX queue, until BYTES went back; prints "attached", then "echoed BYTES, F failed".
int stream_echo(const std::string& socket, const std::string& flow, const std::string& itf,
                uint64_t total) {
  auto c = connect(socket, "test-stream-echo");
  daqiri::RxOptions o;
  o.flow = flow;
  o.block = true;
  auto* rx = &attach(*c, o);
  auto t = c->attach_tx({.interface = itf, .queue = ""});
  if (!t) {
    say("attach failed: %s", t.error().message.c_str());
    return 3;
  }
  daqiri::TxStream& s = **t;
  say("attached");
  uint64_t echoed = 0;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (echoed < total && std::chrono::steady_clock::now() < deadline) {
    auto b = rx->wait_burst(200ms);
    if (!b) return 1;
    for (const auto& p : *b) {
      daqiri::TxBuffer buf;
      while (s.reserve({&buf, 1}) == 0) {
        if (s.detached() || std::chrono::steady_clock::now() > deadline) return 1;
        std::this_thread::sleep_for(50us);
      }
      std::copy(p.payload.begin(), p.payload.end(), buf.data.begin());
      buf.length = static_cast<uint32_t>(p.payload.size());
      buf.connection = p.stream;
      while (true) {
        auto r = s.submit({&buf, 1});
        if (!r) return 1;
        if (*r == 1) break;
      }
      echoed += p.payload.size();
    }
    rx->release(*b);
  }
  if (auto ok = s.flush(10s); !ok) return 1;
  say("echoed %llu, %llu failed", static_cast<unsigned long long>(echoed),
      static_cast<unsigned long long>(s.failed()));
  return echoed == total ? 0 : 1;
}

int stream_rx(const std::string& socket, const std::string& flow, uint64_t total) {
  auto c = connect(socket, "test-stream");
  daqiri::RxOptions o;
  o.flow = flow;
  o.block = true;
  auto* rx = &attach(*c, o);
  say("attached");
  std::map<uint16_t, std::pair<uint64_t, uint64_t>> streams;  // stream -> bytes, hash
  uint64_t got = 0;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (got < total && std::chrono::steady_clock::now() < deadline) {
    auto b = rx->wait_burst(200ms);
    if (!b) return 1;
    for (const auto& p : *b) {
      if (!(p.flags & DAQIRI_DESC_STREAM)) return 1;
      auto& [bytes, hash] = streams.try_emplace(p.stream, 0, 1469598103934665603ull).first->second;
      for (std::byte x : p.payload)
        hash = (hash ^ std::to_integer<uint8_t>(x)) * 1099511628211ull;
      bytes += p.payload.size();
      got += p.payload.size();
    }
    rx->release(*b);
  }
  for (const auto& [id, s] : streams) {
    say("stream %u bytes %llu fnv %016llx", id, static_cast<unsigned long long>(s.first),
        static_cast<unsigned long long>(s.second));
  }
  return got == total ? 0 : 1;
}

// Hands every packet that arrives to `use` until `count` came or 30 s passed; how many came,
// or nothing when the stream broke.
template <class Use>
std::optional<uint64_t> receive(daqiri::RxStream& rx, uint64_t count, Use use) {
  uint64_t got = 0;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (got < count && std::chrono::steady_clock::now() < deadline) {
    auto b = rx.wait_burst(200ms);
    if (!b) return std::nullopt;
    for (const auto& p : *b)
      use(p);
    got += b->size();
    rx.release(*b);
  }
  return got;
}

// Receives `count` packets in bursts of up to 16, each released 2 ms after it came (so that
// releases go on trickling in after the last frame), says so, and stays attached.
int take(const std::string& socket, const std::string& flow, uint64_t count) {
  auto c = connect(socket, "test-take");
  auto& rx = attach(*c, flow);
  uint64_t got = 0;
  while (got < count) {
    auto b = rx.wait_burst(5s, 16);
    if (!b || b->empty()) return 1;
    std::this_thread::sleep_for(2ms);
    got += b->size();
    rx.release(*b);
  }
  say("released %llu", static_cast<unsigned long long>(got));
  for (;;)
    std::this_thread::sleep_for(1s);
}

// Receives `count` packets with RxOptions::find_payloads off, or `compact` (with it on); prints
// the frame and payload bytes it saw (payloads of frames the daemon left unread stay empty
// without find_payloads) and how many packets carried a receive stamp.
int frames_rx(const std::string& socket, const std::string& flow, uint64_t count, bool compact) {
  auto c = connect(socket, "test-frames");
  daqiri::RxOptions o;
  o.flow = flow;
  o.block = true;
  o.find_payloads = compact;
  o.compact = compact;
  uint64_t frame_bytes = 0, payload_bytes = 0, stamped = 0;
  auto got = receive(attach(*c, o), count, [&](const daqiri::Packet& p) {
    frame_bytes += p.frame.size();
    payload_bytes += p.payload.size();
    stamped += p.timestamp_ns != 0;
  });
  if (!got) return 1;
  say("received %llu packets, %llu frame bytes, %llu payload bytes, %llu stamped",
      static_cast<unsigned long long>(*got), static_cast<unsigned long long>(frame_bytes),
      static_cast<unsigned long long>(payload_bytes), static_cast<unsigned long long>(stamped));
  return *got == count ? 0 : 1;
}

int batches(const std::string& socket, const std::string& reorder, uint64_t count) {
  auto c = connect(socket, "test-batches");
  daqiri::RxOptions o;
  o.flow = reorder;
  auto& rx = attach(*c, o);
  say("attached");
  uint64_t not_batches = 0;
  auto got = receive(rx, count, [&](const daqiri::Packet& p) {
    auto b = daqiri::batch_of(p);
    if (!b) {
      ++not_batches;
      return;
    }
    std::string hex;
    for (std::byte x : b->data) {
      char two[3];
      std::snprintf(two, sizeof two, "%02x", std::to_integer<unsigned>(x));
      hex += two;
    }
    say("batch %llu packets %u missing %u slot_bytes %u timed_out %d data %s",
        static_cast<unsigned long long>(b->header.batch_id), b->header.packets, b->header.missing,
        b->header.slot_bytes, b->timed_out() ? 1 : 0, hex.c_str());
  });
  if (!got) return 1;
  say("received %llu batches, %llu not batches", static_cast<unsigned long long>(*got),
      static_cast<unsigned long long>(not_batches));
  return *got == count && not_batches == 0 ? 0 : 1;
}

// Receives `count` packets from every flow of an RX queue through one ring; prints how many of
// each flow arrived, and how many failed daqiri-gen's payload check.
int queue_rx(const std::string& socket, const std::string& itf, const std::string& queue,
             uint64_t count, bool compact) {
  auto c = connect(socket, "test-queue");
  daqiri::RxOptions o;
  o.interface = itf;
  o.queue = queue;
  o.block = true;
  o.compact = compact;
  auto& rx = attach(*c, o);
  say("attached");
  std::map<uint32_t, uint64_t> per_flow;
  std::map<uint16_t, uint64_t> per_port;  // UDP destination port
  uint64_t bad = 0;
  auto got = receive(rx, count, [&](const daqiri::Packet& p) {
    daqiri::pattern::Header h{};
    if (daqiri::pattern::check(p.payload, h) != daqiri::pattern::Check::kOk) ++bad;
    ++per_flow[p.flow_id];
    if (p.payload.data() >= p.frame.data() + 8) {  // the UDP header ends where it starts
      const auto* udp = reinterpret_cast<const uint8_t*>(p.payload.data()) - 8;
      ++per_port[static_cast<uint16_t>((udp[2] << 8) | udp[3])];
    }
  });
  if (!got) return 1;
  for (const auto& [flow, n] : per_flow)
    say("flow %u packets %llu", flow, static_cast<unsigned long long>(n));
  for (const auto& [port, n] : per_port)
    say("port %u packets %llu", port, static_cast<unsigned long long>(n));
  say("bad %llu", static_cast<unsigned long long>(bad));
  return *got == count && bad == 0 ? 0 : 1;
}

// The raw ABI's TX doorbell: each time the daemon's idle poller has set NEED_WAKEUP on the TX
// ring, submits one frame (127.0.0.1:5556 -> DSTPORT, pattern payload, sequence 0, 1, ...) and
// kicks if the flag is still set, until one kick went out. Waits for the completions, prints
// "sent N kicked", then sleeps so that its attachment's counters can be read.
int tx_kick(const std::string& socket, uint16_t dst_port) {
  Raw r;
  daqiri::v1::AttachRequest req;
  req.mutable_tx_queue()->set_interface("lo");
  if (!raw_open(r, socket) || !raw_attach(r, req)) return 3;
  if (r.fds.size() != 4) {
    say("ATTACHED carried %zu fds, not 4", r.fds.size());
    return 3;
  }
  void* rings =
      ::mmap(nullptr, r.attached.rings_size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fds[0].get(), 0);
  void* bufs = ::mmap(nullptr, r.attached.regions[0].size, PROT_READ | PROT_WRITE, MAP_SHARED,
                      r.fds[2].get(), 0);
  if (rings == MAP_FAILED || bufs == MAP_FAILED) return 3;
  auto* base = static_cast<std::byte*>(rings);
  auto tx = daqiri::abi::RingView::open(base + r.attached.ring_offset, r.attached.completion_offset,
                                        DAQIRI_RING_TX, sizeof(daqiri_tx_desc));
  auto done = daqiri::abi::RingView::open(base + r.attached.completion_offset,
                                          r.attached.rings_size - r.attached.completion_offset,
                                          DAQIRI_RING_COMPLETION, sizeof(uint32_t));
  const uint32_t buf_size = r.attached.regions[0].buf_size;
  const uint32_t most = std::min(r.attached.regions[0].num_bufs, 64u);
  uint32_t sent = 0;
  bool kicked = false;
  while (!kicked && sent < most) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!tx->consumer_wants_wakeup()) {
      if (std::chrono::steady_clock::now() > deadline) {
        say("the idle daemon never asked for a kick");
        return 1;
      }
      std::this_thread::sleep_for(100us);
    }
    std::span<std::byte> frame(static_cast<std::byte*>(bufs) + uint64_t{sent} * buf_size, buf_size);
    size_t h =
        daqiri::frame::write_udp_headers(frame, {0x7f000001, 5556}, {0x7f000001, dst_port}, 100);
    daqiri::pattern::fill(frame.subspan(h, 100), dst_port, sent);
    *tx->slot<daqiri_tx_desc>(sent) = {sent, static_cast<uint32_t>(h + 100), 0, 0};
    tx->publish_producer(++sent);
    kicked = tx->wake_consumer(r.fds[3].get());
  }
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (done->load_producer() != sent) {
    if (std::chrono::steady_clock::now() > deadline) {
      say("%u of %u completions", done->load_producer(), sent);
      return 1;
    }
    std::this_thread::sleep_for(1ms);
  }
  say("sent %u %s", sent, kicked ? "kicked" : "never kicked");
  for (;;)
    std::this_thread::sleep_for(1s);
}

// Writes its TX attachment's kick eventfd N times, as fast as it can, without submitting
// anything; prints "kicked N", then sleeps so that the counters can be read.
int kick_storm(const std::string& socket, uint64_t n) {
  Raw r;
  daqiri::v1::AttachRequest req;
  req.mutable_tx_queue()->set_interface("lo");
  if (!raw_open(r, socket) || !raw_attach(r, req) || r.fds.size() != 4) return 3;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t one = 1;
    if (::write(r.fds[3].get(), &one, sizeof one) != sizeof one) {
      say("write %llu: %s", static_cast<unsigned long long>(i), std::strerror(errno));
      return 1;
    }
  }
  say("kicked %llu", static_cast<unsigned long long>(n));
  for (;;)
    std::this_thread::sleep_for(1s);
}

// The raw ABI's RX kick: attaches to FLOW with block backpressure and releases nothing until
// the daemon's stalled poller asks for a kick (NEED_KICK), printing "asked USED"; once GOFILE
// exists, releases one slot at a time (the flow stays stalled) until a release finds the flag
// and kicks; then releases whatever comes until N packets did, and prints "received N kicked".
int rx_kick(const std::string& socket, const std::string& flow, uint64_t n,
            const std::string& go_file) {
  Raw r;
  daqiri::v1::AttachRequest req;
  req.set_flow(flow);
  req.set_backpressure(daqiri::v1::BACKPRESSURE_BLOCK);
  if (!raw_open(r, socket) || !raw_attach(r, req)) return 3;
  const size_t want = 2 + r.attached.region_count + 1;  // ..., the regions, the kick eventfd
  if (r.fds.size() != want) {
    say("ATTACHED carried %zu fds, not %zu", r.fds.size(), want);
    return 3;
  }
  const int kick = r.fds[want - 1].get();
  void* rings =
      ::mmap(nullptr, r.attached.rings_size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fds[0].get(), 0);
  if (rings == MAP_FAILED) return 3;
  auto ring = daqiri::abi::RingView::open(static_cast<std::byte*>(rings) + r.attached.ring_offset,
                                          r.attached.rings_size - r.attached.ring_offset,
                                          DAQIRI_RING_RX, sizeof(daqiri_rx_desc));
  if (!ring) return 3;
  say("attached");
  auto wait_for = [](auto done, const char* what) {
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) {
        say("%s never happened", what);
        return false;
      }
      std::this_thread::sleep_for(100us);
    }
    return true;
  };
  if (!wait_for([&] { return ring->producer_wants_kick(); }, "a kick request")) return 1;
  say("asked %u", ring->load_producer());
  if (!wait_for([&] { return ::access(go_file.c_str(), F_OK) == 0; }, "the go file")) return 1;
  uint32_t released = 0;
  bool kicked = false;
  while (!kicked) {
    if (!wait_for([&] { return ring->producer_wants_kick(); }, "another kick request")) return 1;
    if (released == ring->load_producer()) {
      say("nothing left to release");
      return 1;
    }
    ring->publish_consumer(++released);
    kicked = ring->kick_producer(kick);
  }
  auto done = [&] {
    uint32_t p = ring->load_producer();
    if (p != released) {
      released = p;
      ring->publish_consumer(p);
      ring->kick_producer(kick);
    }
    return released >= n;
  };
  if (!wait_for(done, "the last packet")) return 1;
  say("received %u kicked", released);
  for (;;)
    std::this_thread::sleep_for(1s);
}

int hostile(const std::string& socket, const std::string& flow, const std::string& kind) {
  Raw r;
  if (!raw_open(r, socket)) {
    say("session failed");
    return 3;
  }
  if (kind == "garbage-message") {
    char junk[40];
    std::memset(junk, 0x5a, sizeof junk);
    (void)::send(r.session.get(), junk, sizeof junk, MSG_NOSIGNAL);
    return expect_cut(r);
  }
  daqiri::v1::AttachRequest req;
  // gpu-tx-*: `flow` names a TX queue that sends from GPU memory: "IF/Q", or Q of lo.
  const bool gpu_tx = kind.starts_with("gpu-tx-");
  if (kind == "consumer-index") {
    req.set_flow(flow);
  } else {
    const size_t slash = flow.find('/');
    req.mutable_tx_queue()->set_interface(
        gpu_tx && slash != std::string::npos ? flow.substr(0, slash) : std::string("lo"));
    if (gpu_tx) {
      req.mutable_tx_queue()->set_queue(slash == std::string::npos ? flow : flow.substr(slash + 1));
      req.set_gpu(true);
    }
  }
  if (!raw_attach(r, req)) return 3;
  void* rings =
      ::mmap(nullptr, r.attached.rings_size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fds[0].get(), 0);
  auto* base = static_cast<std::byte*>(rings);
  say("attached");
  if (kind == "consumer-index") {
    auto ring = daqiri::abi::RingView::open(base + r.attached.ring_offset, r.attached.rings_size,
                                            DAQIRI_RING_RX, sizeof(daqiri_rx_desc));
    while (ring->load_producer() == 0)
      std::this_thread::sleep_for(1ms);
    ring->publish_consumer(ring->load_producer() + 1000);  // releasing what was never lent
  } else {
    auto t =
        daqiri::abi::RingView::open(base + r.attached.ring_offset, r.attached.completion_offset,
                                    DAQIRI_RING_TX, sizeof(daqiri_tx_desc));
    // tx-descriptor: a buffer that does not exist. gpu-tx-length: a frame longer than a host
    // header and a GPU buffer together; gpu-tx-buffer: a buffer past the GPU buffers.
    uint32_t buffers = r.attached.regions[0].num_bufs;
    daqiri_tx_desc d{buffers + 7, 100, 0, 0};
    if (kind == "gpu-tx-length") d = {0, 65535, 0, 0};
    *t->slot<daqiri_tx_desc>(0) = d;
    t->publish_producer(1);
  }
  return expect_cut(r);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 4 && a[0] == "hold") return hold(a[1], a[2], std::stoul(a[3]));
  if (a.size() == 5 && a[0] == "hold") {
    return hold(a[1], a[2], std::stoul(a[3]), static_cast<uint32_t>(std::stoul(a[4])));
  }
  if (a.size() == 4 && a[0] == "slow") return slow(a[1], a[2], std::stoi(a[3]));
  if (a.size() == 4 && a[0] == "take") return take(a[1], a[2], std::stoull(a[3]));
  if (a.size() == 4 && a[0] == "attach-many") return attach_many(a[1], a[2], std::stoi(a[3]));
  if (a.size() == 3 && a[0] == "write-rx") return write_rx(a[1], a[2]);
  if (a.size() == 6 && a[0] == "tx-at") {
    return tx_at(a[1], a[2], a[3], static_cast<uint32_t>(std::stoul(a[4])),
                 static_cast<uint32_t>(std::stoul(a[5])));
  }
  if (a.size() == 7 && a[0] == "tx") {
    return tx(a[1], a[2], {0x7f000001, static_cast<uint16_t>(std::stoi(a[3]))},
              {0x7f000001, static_cast<uint16_t>(std::stoi(a[4]))}, {}, std::stoull(a[5]),
              std::stoul(a[6]));
  }
  // tx-to SOCKET ITF SRC_IP:PORT DST_IP:PORT DST_MAC COUNT SIZE
  if (a.size() == 8 && a[0] == "tx-to") {
    auto endpoint = [](const std::string& text) {
      daqiri::frame::UdpEndpoint e;
      in_addr addr{};
      size_t colon = text.find(':');
      inet_pton(AF_INET, text.substr(0, colon).c_str(), &addr);
      e.ipv4 = ntohl(addr.s_addr);
      e.port = static_cast<uint16_t>(std::stoi(text.substr(colon + 1)));
      return e;
    };
    daqiri::frame::Mac mac{};
    std::sscanf(a[5].c_str(), "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &mac[0], &mac[1], &mac[2], &mac[3],
                &mac[4], &mac[5]);
    return tx(a[1], a[2], endpoint(a[3]), endpoint(a[4]), mac, std::stoull(a[6]), std::stoul(a[7]));
  }
  if (a.size() == 4 && a[0] == "reconnect") return reconnect(a[1], a[2], std::stoull(a[3]));
  if (a.size() == 4 && a[0] == "resume") return resume(a[1], a[2], std::stoull(a[3]));
  if (a.size() == 4 && a[0] == "stream-rx") return stream_rx(a[1], a[2], std::stoull(a[3]));
  if (a.size() == 7 && a[0] == "stream-tx") {
    return stream_tx(a[1], a[2], static_cast<uint16_t>(std::stoul(a[3])),
                     static_cast<uint32_t>(std::stoul(a[4])), std::stoull(a[5]),
                     static_cast<uint32_t>(std::stoul(a[6])));
  }
  if (a.size() == 5 && a[0] == "stream-echo")
    return stream_echo(a[1], a[2], a[3], std::stoull(a[4]));
  // An optional last word: the RX descriptors' layout.
  bool layout = a.back() == "compact" || a.back() == "full";
  bool compact = a.back() == "compact";
  if (a.size() == 4 && a[0] == "batches") return batches(a[1], a[2], std::stoull(a[3]));
  if (a.size() == 4u + layout && a[0] == "frames-rx") {
    return frames_rx(a[1], a[2], std::stoull(a[3]), compact);
  }
  if (a.size() == 5u + layout && a[0] == "queue-rx") {
    return queue_rx(a[1], a[2], a[3], std::stoull(a[4]), compact);
  }
  if (a.size() == 4 && a[0] == "hostile") return hostile(a[1], a[2], a[3]);
  if (a.size() == 3 && a[0] == "cross-release") return cross_release(a[1], a[2]);
  if (a.size() == 3 && a[0] == "kick-storm") return kick_storm(a[1], std::stoull(a[2]));
  if (a.size() == 5 && a[0] == "rx-kick") return rx_kick(a[1], a[2], std::stoull(a[3]), a[4]);
  if (a.size() == 4 && a[0] == "stall-release") return stall_release(a[1], a[2], std::stoull(a[3]));
  if (a.size() == 4 && a[0] == "tx-idle") return tx_idle(a[1], a[2], a[3] == "1");
  if (a.size() == 4 && a[0] == "tx-gpu-attach") return tx_gpu_attach(a[1], a[2], a[3]);
  if (a.size() == 3 && a[0] == "tx-kick") {
    return tx_kick(a[1], static_cast<uint16_t>(std::stoi(a[2])));
  }
  std::fprintf(stderr, "usage: see the comment at the top of test_client.cpp\n");
  return 2;
}
