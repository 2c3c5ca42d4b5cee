// daqiri-rdma-test-client: a client of an RDMA interface, for the tests in the Soft-RoCE VM.
//   send SOCKET IF OP COUNT SIZE [CONNECTION [FAILED]]
//       OP is send, write, write-imm or read. Messages 0..COUNT-1 carry daqiri-gen's pattern
//       (stream 7, sequence i); write and write-imm put message i into the peer's window slot i;
//       read fetches slot i and checks it holds message i. Prints what was done; exit 0 only
//       when exactly FAILED buffers (default 0) came back with their work not done.
//   recv SOCKET FLOW COUNT SECONDS
//       receives (blocking backpressure) until COUNT messages arrived (or SECONDS passed),
//       checks each, prints counts; exit 0 only when messages 0..COUNT-1 each arrived once,
//       intact.
//   bench SOCKET IF OP COUNT SIZE SLOTS      (tools/bench/run-rdma)
//       as send, without writing or checking the pattern; message i goes to slot i % SLOTS.
//   echo SOCKET FLOW IF COUNT SECONDS
//       sends each message of FLOW back, byte for byte, on the connection it came on (through
//       IF's TX queue) until COUNT were; exit 0 when all COUNT went back, none failed.
//   drain SOCKET FLOW COUNT SECONDS          (tools/bench/run-rdma)
//       as recv, counting only; prints the rate from the first message to the last.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/client.hpp"
#include "daqiri/test_pattern.hpp"
#include "support/test_client_support.hpp"

namespace {

using namespace std::chrono_literals;

using daqiri::test::say;

std::unique_ptr<daqiri::Client> connect(const std::string& socket) {
  return daqiri::test::connect_or_exit(socket, "rdma-test");
}

struct SendPlan {
  std::string op;
  uint64_t count = 0;
  uint32_t size = 0;
  uint16_t connection = 0;
  uint64_t expect_failed = 0;
  uint32_t slots = 0;  // message i goes to remote slot i % slots (0: slot i)
  bool pattern = true;
};

int send(const std::string& socket, const std::string& itf, const SendPlan& plan) {
  const std::string& op_name = plan.op;
  uint64_t count = plan.count;
  uint32_t size = plan.size;
  std::map<std::string, daqiri_rdma_op> ops{{"send", DAQIRI_RDMA_SEND},
                                            {"write", DAQIRI_RDMA_WRITE},
                                            {"write-imm", DAQIRI_RDMA_WRITE_IMM},
                                            {"read", DAQIRI_RDMA_READ}};
  if (!ops.contains(op_name) || (plan.pattern && size < daqiri::pattern::kHeaderSize)) {
    say("bad operation or size");
    return 2;
  }
  daqiri_rdma_op op = ops[op_name];
  auto client = connect(socket);
  auto tx = client->attach_tx({itf, ""});
  if (!tx) {
    say("attach failed: %s", tx.error().message.c_str());
    return 3;
  }
  daqiri::TxStream& s = **tx;
  std::vector<daqiri::TxBuffer> bufs(64);
  std::vector<int64_t> read_into;  // READ: which message each buffer should hold at the end
  auto start = std::chrono::steady_clock::now();
  uint64_t next = 0;
  uint64_t bytes = 0;
  while (next < count) {
    size_t n = s.reserve(std::span(bufs).first(std::min<uint64_t>(64, count - next)));
    if (n == 0) {
      if (s.detached()) {
        say("detached");
        return 3;
      }
      std::this_thread::sleep_for(50us);
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      daqiri::TxBuffer& b = bufs[i];
      uint64_t seq = next + i;
      if (!plan.pattern) {
        // bench: the bytes are whatever the buffer holds
      } else if (op == DAQIRI_RDMA_READ) {
        std::memset(b.data.data(), 0, size);
        if (read_into.size() <= b.index) read_into.resize(b.index + 1, -1);
        read_into[b.index] = int64_t(seq);
      } else {
        daqiri::pattern::fill(b.data.first(size), 7, seq);
      }
      b.length = size;
      b.op = op;
      b.connection = plan.connection;
      b.remote_slot = static_cast<uint32_t>(plan.slots ? seq % plan.slots : seq);
    }
    // The ring may take fewer than we filled: offer the rest again until it takes them.
    for (size_t done = 0; done < n;) {
      auto sent = s.submit(std::span(bufs).subspan(done, n - done));
      if (!sent) {
        say("submit failed: %s", sent.error().message.c_str());
        return 3;
      }
      if (*sent == 0) std::this_thread::sleep_for(20us);
      done += *sent;
    }
    next += n;
    bytes += uint64_t(n) * size;
  }
  if (auto ok = s.flush(10s); !ok) {
    std::vector<daqiri::TxBuffer> back(1u << 16);
    say("flush failed: %s (%zu buffers back)", ok.error().message.c_str(), s.reserve(back));
    return 3;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  say("%s: %llu messages, %llu bytes in %.3f s (%.1f MB/s), %llu failed", op_name.c_str(),
      (unsigned long long)count, (unsigned long long)bytes, secs, bytes / secs / 1e6,
      (unsigned long long)s.failed());
  if (s.failed() != plan.expect_failed) return 1;
  // Nothing to look at when every READ was expected to fail.
  if (op != DAQIRI_RDMA_READ || !plan.pattern || plan.expect_failed == count) return 0;
  // READ: every buffer holds the last message read into it (the buffers are reused in turn).
  std::vector<daqiri::TxBuffer> all(1u << 16);
  size_t held = s.reserve(all);
  uint64_t used = 0, good = 0;
  for (size_t i = 0; i < held; ++i) {
    if (all[i].index >= read_into.size() || read_into[all[i].index] < 0) continue;
    ++used;
    daqiri::pattern::Header h{};
    good += daqiri::pattern::check(all[i].data.first(size), h) == daqiri::pattern::Check::kOk &&
            h.sequence == uint64_t(read_into[all[i].index]);
  }
  say("read back: %llu of %llu buffers hold the message last read into them",
      (unsigned long long)good, (unsigned long long)used);
  return good == used && used > 0 ? 0 : 1;
}

// Blocking backpressure: a full ring stops the daemon reposting RECVs, and RC flow control
// (receiver not ready, retried without limit) holds the sender. Nothing is dropped.
daqiri::Result<daqiri::RxStream*> attach_blocking(daqiri::Client& client, const std::string& flow) {
  daqiri::RxOptions o;
  o.flow = flow;
  o.block = true;
  return client.attach_rx(o);
}

int recv(const std::string& socket, const std::string& flow, uint64_t count, int seconds,
         bool verify) {
  auto client = connect(socket);
  auto rx = attach_blocking(*client, flow);
  if (!rx) {
    say("attach failed: %s", rx.error().message.c_str());
    return 3;
  }
  say("attached");
  daqiri::RxStream& s = **rx;
  std::vector<uint8_t> seen(count, 0);
  uint64_t got = 0, bytes = 0, corrupt = 0, duplicate = 0, foreign = 0, remote_writes = 0;
  std::map<uint16_t, uint64_t> streams;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::chrono::steady_clock::time_point first{}, last{};
  while (got < count && std::chrono::steady_clock::now() < deadline) {
    auto burst = s.wait_burst(100ms);
    if (!burst) {
      say("detached: %s", burst.error().message.c_str());
      break;
    }
    if (burst->empty()) continue;
    last = std::chrono::steady_clock::now();
    if (got == 0) first = last;
    for (size_t i = 0; i < burst->size(); ++i) {
      daqiri::Packet p = (*burst)[i];
      ++got;
      bytes += p.payload.size();
      ++streams[p.stream];
      if (p.flags & DAQIRI_DESC_REMOTE_WRITE) ++remote_writes;
      if (!verify) continue;
      daqiri::pattern::Header h{};
      auto c = daqiri::pattern::check(p.payload, h);
      if (c != daqiri::pattern::Check::kOk || (p.flags & DAQIRI_DESC_MESSAGE) == 0) {
        ++corrupt;
      } else if (h.sequence >= count) {
        ++foreign;
      } else if (seen[h.sequence]++ != 0) {
        ++duplicate;
      }
    }
    s.release(*burst);
  }
  if (!verify) {
    double secs = std::chrono::duration<double>(last - first).count();
    say("drained %llu messages, %llu bytes in %.3f s (%.1f MB/s)", (unsigned long long)got,
        (unsigned long long)bytes, secs, secs > 0 ? bytes / secs / 1e6 : 0.0);
    return got == count ? 0 : 1;
  }
  uint64_t missing = 0;
  for (uint8_t v : seen)
    missing += v == 0;
  say("received %llu messages, %llu bytes: %llu corrupt, %llu duplicate, %llu foreign, %llu "
      "missing, %llu remote writes, %zu connections",
      (unsigned long long)got, (unsigned long long)bytes, (unsigned long long)corrupt,
      (unsigned long long)duplicate, (unsigned long long)foreign, (unsigned long long)missing,
      (unsigned long long)remote_writes, streams.size());
  return got == count && corrupt + duplicate + foreign + missing == 0 ? 0 : 1;
}

int echo(const std::string& socket, const std::string& flow, const std::string& itf, uint64_t count,
         int seconds) {
  auto client = connect(socket);
  auto rx = attach_blocking(*client, flow);
  auto tx = client->attach_tx({itf, ""});
  if (!rx || !tx) {
    say("attach failed: %s", (!rx ? rx.error() : tx.error()).message.c_str());
    return 3;
  }
  say("attached");
  daqiri::RxStream& r = **rx;
  daqiri::TxStream& t = **tx;
  uint64_t echoed = 0, bytes = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (echoed < count && std::chrono::steady_clock::now() < deadline) {
    auto burst = r.wait_burst(100ms);
    if (!burst) {
      say("detached: %s", burst.error().message.c_str());
      return 3;
    }
    for (size_t i = 0; i < burst->size(); ++i) {
      daqiri::Packet p = (*burst)[i];
      daqiri::TxBuffer b;
      while (t.reserve(std::span(&b, 1)) == 0)
        std::this_thread::sleep_for(20us);
      std::memcpy(b.data.data(), p.payload.data(), p.payload.size());
      b.length = static_cast<uint32_t>(p.payload.size());
      b.connection = p.stream;
      while (t.submit(std::span(&b, 1)).value_or(0) == 0)
        std::this_thread::sleep_for(20us);
      ++echoed;
      bytes += p.payload.size();
    }
    r.release(*burst);
  }
  auto flushed = t.flush(10s);
  say("echoed %llu messages, %llu bytes, %llu failed%s", (unsigned long long)echoed,
      (unsigned long long)bytes, (unsigned long long)t.failed(), flushed ? "" : ", not flushed");
  return echoed == count && t.failed() == 0 && flushed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if ((a.size() >= 6 && a.size() <= 8 && a[0] == "send") || (a.size() == 7 && a[0] == "bench")) {
    SendPlan plan{a[3], std::stoull(a[4]), static_cast<uint32_t>(std::stoul(a[5]))};
    if (a[0] == "bench") {
      plan.slots = static_cast<uint32_t>(std::stoul(a[6]));
      plan.pattern = false;
    } else {
      if (a.size() >= 7) plan.connection = static_cast<uint16_t>(std::stoul(a[6]));
      if (a.size() == 8) plan.expect_failed = std::stoull(a[7]);
    }
    return send(a[1], a[2], plan);
  }
  if (a.size() == 5 && (a[0] == "recv" || a[0] == "drain")) {
    return recv(a[1], a[2], std::stoull(a[3]), std::stoi(a[4]), a[0] == "recv");
  }
  if (a.size() == 6 && a[0] == "echo") {
    return echo(a[1], a[2], a[3], std::stoull(a[4]), std::stoi(a[5]));
  }
  std::fprintf(stderr, "usage: see the comment at the top of rdma_test_client.cpp\n");
  return 2;
}
