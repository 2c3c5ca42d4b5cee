// handoff-bound [EAL ARGS] -- MODE BURST SECONDS [CONSUMER_CPU DESC_BYTES READ_HEADER EVERY]
//
// The ceiling for handing DPDK frames to a consumer on another core, measured on the same
// vdev as dpdk-testpmd rxonly, so that daqirid's rate can be read against what any design of
// the kind could reach on the host rather than against a receive loop that hands nothing on.
//   rxonly   rte_eth_rx_burst, then rte_pktmbuf_free_bulk: testpmd rxonly's loop, as a check
//            that this program and testpmd agree.
//   handoff  the least a daemon must do to lend frames to a consumer on CONSUMER_CPU: one
//            descriptor of DESC_BYTES (8, 16 or 32: buffer offset, length, flow, padding) per
//            frame into a single-producer ring of 4096 slots, a producer index published
//            once a burst; the consumer reads every descriptor and publishes its consumer
//            index once a burst, as a libdaqiri client releasing each burst does; the receive
//            core then returns the consumed mbufs straight to the mempool. READ_HEADER=1 also
//            reads each frame's ethertype first (steering must look at the frame). No
//            steering, no ledger, no fan-out, no counters, no checks: whatever daqirid does
//            beyond this is its own overhead; what this reaches is the bound. EVERY (default
//            1): publish the producer index once every EVERY bursts instead, the consumer
//            taking up to EVERY bursts at a time (fewer index lines crossing a frame, at the
//            cost of latency: a design a daemon could choose).
// Prints "pps N": frames the consumer (rxonly: the receive loop) took in its last SECONDS
// seconds, after one second of warm-up. The receive loop runs on the EAL's first worker lcore.
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "pin_to_cpu.hpp"

namespace {

constexpr uint32_t kRingSize = 4096;
constexpr uint32_t kMaxBurst = 512;
constexpr uint32_t kMbufs = 16384;  // as run-dpdk gives testpmd (--total-num-mbufs)

struct alignas(64) Index {
  std::atomic<uint32_t> value{0};
};

struct alignas(64) Count {
  std::atomic<uint64_t> value{0};
};

struct Options {
  bool handoff = false;
  uint32_t burst = 32;
  uint32_t seconds = 4;
  int consumer_cpu = 0;
  uint32_t desc_bytes = 8;
  bool read_header = false;
  uint32_t publish_every = 1;  // bursts per published producer index
};

// A descriptor as it lies in the ring: the first 8 bytes are what a consumer needs (where,
// how long, which flow); the rest stands in for a stamp and flags. Written from registers in
// 8- or 16-byte stores, as daqirid's descriptor_store.hpp does: a struct built on the stack
// and copied into the slot is read back across its smaller stores, which cannot be forwarded,
// and every frame then waits for the store buffer (docs/benchmarks.md, DPDK).
template <uint32_t Bytes>
struct alignas(Bytes) Descriptor {
  uint64_t words[Bytes / 8];
};

inline uint64_t pack(uint32_t offset, uint16_t length, uint16_t flow) {
  return uint64_t{offset} | uint64_t{length} << 32 | uint64_t{flow} << 48;
}

template <uint32_t Bytes>
inline void store(Descriptor<Bytes>* slot, uint64_t first, uint64_t stamp) {
#if defined(__x86_64__)
  if constexpr (Bytes > 8) {
    auto* line = reinterpret_cast<__m128i*>(slot->words);
    _mm_store_si128(line, _mm_set_epi64x(static_cast<int64_t>(stamp), static_cast<int64_t>(first)));
    if constexpr (Bytes == 32)
      _mm_store_si128(line + 1, _mm_set1_epi64x(static_cast<int64_t>(stamp)));
    return;
  }
#endif
  slot->words[0] = first;
  for (uint32_t i = 1; i < Bytes / 8; ++i)
    slot->words[i] = stamp;
}

// rte_eal_cleanup on every way out of main once the EAL is up.
struct EalScope {
  EalScope() = default;
  EalScope(const EalScope&) = delete;
  EalScope& operator=(const EalScope&) = delete;
  ~EalScope() { rte_eal_cleanup(); }
};

struct MempoolFree {
  void operator()(rte_mempool* pool) const { rte_mempool_free(pool); }
};

// A started port, stopped and closed when it goes (before its mempool).
class StartedPort {
 public:
  explicit StartedPort(uint16_t port) : port_(port) {}
  StartedPort(const StartedPort&) = delete;
  StartedPort& operator=(const StartedPort&) = delete;
  ~StartedPort() {
    rte_eth_dev_stop(port_);
    rte_eth_dev_close(port_);
  }

 private:
  uint16_t port_;
};

struct Shared {
  Index prod;
  Index cons;
  Count taken;  // frames the consumer (rxonly: the receive loop) has taken
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> checksum{0};
  Options opt;
  uint16_t port = 0;
  std::unique_ptr<rte_mempool, MempoolFree> pool;
  struct alignas(64) Ring {
    std::array<std::byte, size_t{kRingSize} * 32>
        bytes;  // kRingSize descriptors of the largest size
  };
  std::unique_ptr<Ring> ring_memory = std::make_unique<Ring>();
  std::byte* ring = ring_memory->bytes.data();
};

int receive_only(Shared& s) {
  std::array<rte_mbuf*, kMaxBurst> pkts{};
  uint64_t taken = 0;
  while (!s.stop.load(std::memory_order_relaxed)) {
    uint16_t n = rte_eth_rx_burst(s.port, 0, pkts.data(), static_cast<uint16_t>(s.opt.burst));
    if (n == 0) continue;
    rte_pktmbuf_free_bulk(pkts.data(), n);
    taken += n;
    s.taken.value.store(taken, std::memory_order_relaxed);
  }
  return 0;
}

template <uint32_t Bytes>
int lend(Shared& s) {
  using Desc = Descriptor<Bytes>;
  auto* slots = reinterpret_cast<Desc*>(s.ring);
  rte_mempool* const pool = s.pool.get();
  std::vector<rte_mbuf*> shadow(kRingSize);
  std::array<rte_mbuf*, kMaxBurst> pkts{};
  const uint32_t mask = kRingSize - 1;
  uint32_t prod = 0;
  uint32_t freed = 0;
  uint32_t unpublished = 0;  // bursts since the producer index was last published
  while (!s.stop.load(std::memory_order_relaxed)) {
    uint32_t cons = s.cons.value.load(std::memory_order_acquire);
    while (freed != cons) {
      uint32_t start = freed & mask;
      uint32_t n = std::min({cons - freed, kRingSize - start, kMaxBurst});
      rte_mempool_put_bulk(pool, reinterpret_cast<void* const*>(&shadow[start]), n);
      freed += n;
    }
    if (kRingSize - (prod - freed) < s.opt.burst) continue;
    uint16_t n = rte_eth_rx_burst(s.port, 0, pkts.data(), static_cast<uint16_t>(s.opt.burst));
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* m = pkts[i];
      uint16_t flow = 0;
      if (s.opt.read_header) {
        const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
        flow = eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ? 1 : 0;
      }
      shadow[prod & mask] = m;
      auto offset = static_cast<uint32_t>(rte_pktmbuf_iova(m));
      store<Bytes>(&slots[prod & mask], pack(offset, m->data_len, flow), prod);
      ++prod;
    }
    if (n > 0 && ++unpublished == s.opt.publish_every) {
      s.prod.value.store(prod, std::memory_order_release);
      unpublished = 0;
    }
  }
  return 0;
}

template <uint32_t Bytes>
void consume(Shared& s) {
  using Desc = Descriptor<Bytes>;
  const auto* slots = reinterpret_cast<const Desc*>(s.ring);
  const uint32_t mask = kRingSize - 1;
  uint32_t cons = 0;
  uint64_t taken = 0;
  uint64_t sum = 0;
  const uint32_t most = s.opt.burst * s.opt.publish_every;
  while (!s.stop.load(std::memory_order_relaxed)) {
    uint32_t prod = s.prod.value.load(std::memory_order_acquire);
    uint32_t n = std::min(prod - cons, most);
    if (n == 0) continue;
    for (uint32_t i = 0; i < n; ++i) {
      sum += slots[(cons + i) & mask].words[0];
    }
    cons += n;
    s.cons.value.store(cons, std::memory_order_release);
    taken += n;
    s.taken.value.store(taken, std::memory_order_relaxed);
  }
  s.checksum.store(sum, std::memory_order_relaxed);  // so that the reads stay
}

// Calls f with the descriptor size as a compile-time constant.
template <typename F>
auto with_desc_bytes(uint32_t bytes, F&& f) {
  switch (bytes) {
    case 8:
      return f(std::integral_constant<uint32_t, 8>{});
    case 16:
      return f(std::integral_constant<uint32_t, 16>{});
    default:
      return f(std::integral_constant<uint32_t, 32>{});
  }
}

int run_receive_core(void* arg) {
  auto& s = *static_cast<Shared*>(arg);
  if (!s.opt.handoff) return receive_only(s);
  return with_desc_bytes(s.opt.desc_bytes, [&s](auto b) { return lend<decltype(b)::value>(s); });
}

void run_consumer(Shared& s) {
  with_desc_bytes(s.opt.desc_bytes, [&s](auto b) { consume<decltype(b)::value>(s); });
}

bool parse(int argc, char** argv, Options& o) {
  if (argc < 3 || argc > 7) return false;
  std::string mode = argv[0];
  if (mode != "rxonly" && mode != "handoff") return false;
  o.handoff = mode == "handoff";
  try {
    o.burst = static_cast<uint32_t>(std::stoul(argv[1]));
    o.seconds = static_cast<uint32_t>(std::stoul(argv[2]));
    if (argc > 3) o.consumer_cpu = std::stoi(argv[3]);
    if (argc > 4) o.desc_bytes = static_cast<uint32_t>(std::stoul(argv[4]));
    if (argc > 5) o.read_header = std::stoi(argv[5]) != 0;
    if (argc > 6) o.publish_every = static_cast<uint32_t>(std::stoul(argv[6]));
  } catch (const std::exception&) {
    return false;
  }
  bool sizes = o.desc_bytes == 8 || o.desc_bytes == 16 || o.desc_bytes == 32;
  bool every = o.publish_every >= 1 && uint64_t{o.burst} * o.publish_every <= kRingSize / 2;
  return o.burst >= 1 && o.burst <= kMaxBurst && o.seconds >= 1 && sizes && every;
}

int setup_port(Shared& s) {
  if (rte_eth_dev_count_avail() == 0) {
    std::fprintf(stderr, "handoff-bound: no port (give the EAL a --vdev)\n");
    return -1;
  }
  s.port = static_cast<uint16_t>(rte_eth_find_next(0));
  int socket = rte_socket_id();
  s.pool.reset(rte_pktmbuf_pool_create("hb_pool", kMbufs, RTE_MEMPOOL_CACHE_MAX_SIZE, 0,
                                       RTE_MBUF_DEFAULT_BUF_SIZE, socket));
  if (s.pool == nullptr) {
    std::fprintf(stderr, "handoff-bound: mbuf pool: %s\n", rte_strerror(rte_errno));
    return -1;
  }
  rte_eth_conf conf{};
  int rc = rte_eth_dev_configure(s.port, 1, 1, &conf);
  if (rc == 0) rc = rte_eth_rx_queue_setup(s.port, 0, 1024, socket, nullptr, s.pool.get());
  if (rc == 0) rc = rte_eth_tx_queue_setup(s.port, 0, 1024, socket, nullptr);
  if (rc == 0) rc = rte_eth_dev_start(s.port);
  if (rc != 0) std::fprintf(stderr, "handoff-bound: port %u: %s\n", s.port, rte_strerror(-rc));
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  int used = rte_eal_init(argc, argv);
  if (used < 0) {
    std::fprintf(stderr, "handoff-bound: EAL: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  EalScope eal;
  Shared s;
  if (!parse(argc - used - 1, argv + used + 1, s.opt)) {
    std::fprintf(stderr,
                 "usage: handoff-bound [EAL ARGS] -- rxonly|handoff BURST SECONDS "
                 "[CONSUMER_CPU DESC_BYTES(8|16|32) READ_HEADER(0|1) "
                 "EVERY(BURST x EVERY <= 2048)]\n");
    return 2;
  }
  unsigned lcore = rte_get_next_lcore(-1, 1, 0);
  if (lcore >= RTE_MAX_LCORE || setup_port(s) != 0) {
    if (lcore >= RTE_MAX_LCORE) std::fprintf(stderr, "handoff-bound: give the EAL two lcores\n");
    return 1;
  }
  StartedPort started(s.port);
  std::thread consumer;
  if (s.opt.handoff) {
    consumer = std::thread([&s] {
      if (!pin_to_cpu(s.opt.consumer_cpu)) {
        std::fprintf(stderr, "handoff-bound: cannot run on CPU %d\n", s.opt.consumer_cpu);
        std::exit(1);
      }
      run_consumer(s);
    });
  }
  rte_eal_remote_launch(run_receive_core, &s, lcore);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  uint64_t first = s.taken.value.load();
  auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(s.opt.seconds));
  uint64_t last = s.taken.value.load();
  auto end = std::chrono::steady_clock::now();
  s.stop.store(true);
  rte_eal_wait_lcore(lcore);
  if (consumer.joinable()) consumer.join();
  double secs = std::chrono::duration<double>(end - start).count();
  std::printf("pps %.0f\n", static_cast<double>(last - first) / secs);
  return 0;
}
