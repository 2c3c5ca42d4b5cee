// One TX queue of a DPDK port. A client's TX buffer is attached to an mbuf as an external
// buffer and handed to rte_eth_tx_burst; when DPDK frees the mbuf (the NIC is done with it) the
// buffer's index comes back through a completion queue and on to the client's completion ring.
// Under the `checked` policy the frame's headers are first copied into an mbuf of the daemon's,
// checked there (dataplane/tx_frame_policy.hpp) and sent from there, the payload chained behind
// them zero-copy; a PMD without multi-segment TX gets the whole frame copied instead. `raw`
// sends the client's buffer as it is. Mbufs come from a small pool of the queue's own; when it
// runs dry the queue asks the PMD to clean up its done descriptors and takes no new frames
// until mbufs return, and frames the PMD did not accept stay pending and are offered first
// next time: the TX path never waits on itself (DAQIRI's dry-pool stall).
// A gpudirect queue's clients write each frame's first `split_header` bytes into a host buffer
// and the rest into a GPU buffer of theirs: the headers are copied (and checked) as above, and
// the GPU bytes chained behind them for the NIC to read in place.
// On a raw queue, the interface's TX flows (core/encap.hpp, DAQIRI's tx.flows) are matched on
// the daemon's own copy of each frame's first bytes; a frame one matches leaves with that flow's
// headers in front, written into an mbuf of the queue's own chained in front of the client's
// buffer (or with the frame copied behind them where the port cannot chain).
#pragma once

#include <rte_ether.h>
#include <rte_mbuf.h>

#include <array>
#include <atomic>
#include <memory>
#include <vector>

#include "backends/dpdk/burst_pacer.hpp"
#include "backends/dpdk/completion_queue.hpp"
#include "backends/dpdk/external_memory.hpp"
#include "backends/dpdk/send_clock.hpp"
#include "config/config.hpp"
#include "daqiri/frame.hpp"
#include "dataplane/nic_stats.hpp"
#include "dataplane/poller.hpp"
#include "dataplane/snapshot.hpp"
#include "dataplane/tx_attachment.hpp"
#include "dataplane/tx_bindings.hpp"
#include "dataplane/tx_pacer.hpp"
#include "dataplane/tx_queue_task.hpp"

namespace daqiri::backends::dpdk {

struct TxQueueCounters {
  std::atomic<uint64_t> packets{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> no_header{0};  // polls that found no header left in the pool
  std::atomic<uint64_t> oversize{0};   // frames longer than the port's MTU allows
};

struct TxQueueSetup {
  uint16_t port = 0;
  uint16_t queue = 0;
  std::string pool_name;
  uint32_t descriptors = 0;  // the NIC's TX ring, as the PMD adjusted it
  uint32_t batch = 0;
  uint32_t max_frame = 0;  // bytes on the wire the port's MTU allows
  int socket = SOCKET_ID_ANY;
  rte_device* dma_device = nullptr;  // the PCI device that reads the buffers, or null (vdevs)
  config::TxPolicy policy = config::TxPolicy::kChecked;
  uint32_t source_ipv4 = 0;         // checked: the source address frames must carry (host order)
  rte_ether_addr mac{};             // checked: written as every frame's source MAC
  bool multi_segment = false;       // the port takes chained mbufs (RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
  uint32_t pacing_mbps = 0;         // the queue's rate cap in megabits of frames a second; 0: none
  bool send_times = false;          // accurate_send: frames may name a time to leave at
  uint32_t split_header = 0;        // gpudirect: bytes of a frame in its client's host buffer
  std::vector<core::TxFlow> flows;  // raw queues: the interface's TX flows
};

class DpdkTxQueue final : public dataplane::TxQueueTask {
 public:
  static constexpr uint32_t kMaxBatch = 512;
  static Result<std::unique_ptr<DpdkTxQueue>> create(const TxQueueSetup& setup);
  ~DpdkTxQueue() override;

  bool poll() override;
  // NEED_WAKEUP on its attachments' TX rings while the poller sleeps (their clients kick).
  bool arm_wakeups() override;
  void disarm_wakeups() override;
  // While frames are in flight (their completions come back on polls) or a client is
  // attached that did not say it kicks (it is served by the poller's 1 ms sleeps).
  [[nodiscard]] bool needs_timed_wakeup() const override;
  TxQueueCounters counters;
  [[nodiscard]] dataplane::NicQueueStats stats(const std::string& name) const;

  // Ethernet/IPv4/UDP frames, as socket queues take.
  [[nodiscard]] dataplane::TxRules rules() const override {
    return {.min_length = frame::kUdpHeaders,
            .send_times = send_times_,
            .nic_schedules = send_times_ && send_time_offset_ >= 0};
  }
  // The NIC puts every TX flow's headers around its frames (egress rules, before the queue is
  // polled): frames go as clients wrote them, `overhead` bytes at most to grow on the wire.
  void encapsulated_by_nic(uint32_t overhead) {
    flows_.clear();
    nic_overhead_ = overhead;
  }
  // After the port started with RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP: frames with a send time
  // go to the NIC at once, their time in the mbuf's dynamic field `offset` (flag `flag`), in the
  // NIC's clock of `ticks_per_second`; the NIC holds them. Clients attached later see it.
  void schedule_sends_in_nic(int offset, uint64_t flag, uint64_t ticks_per_second) {
    send_time_offset_ = offset;
    send_time_flag_ = flag;
    send_clock_ = SendClock(ticks_per_second);
  }
  // After schedule_sends_in_nic, on a queue with pacing_mbps: the NIC meters it (BurstPacer)
  // instead of the poller's token bucket, as DAQIRI paces.
  void pace_in_nic(uint64_t mbps) {
    pacer_ = dataplane::TxPacer(0, 0);
    burst_pacer_ = BurstPacer(mbps);
  }
  // add() registers the attachment's buffers with DPDK; remove() (after the attachment is
  // released) undoes it.
  Result<> add(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) override;
  dataplane::Grace remove(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) override;

 private:
  struct Binding {
    dataplane::TxAttachment* attachment = nullptr;
    // The buffers chained into frames (the client's host buffers, or on a gpudirect queue
    // its GPU buffers), `stride` bytes apart.
    std::unique_ptr<ExternalMemory> memory;
    uint32_t stride = 0;
    std::vector<rte_mbuf_ext_shared_info> shinfo;  // one per buffer: daemon memory only
    CompletionQueue done;
    uint32_t in_flight = 0;  // attached to an mbuf and not yet freed by DPDK
    std::array<rte_mbuf*, kMaxBatch> pending{};
    uint32_t pending_first = 0, pending_count = 0;
    explicit Binding(uint32_t num_bufs) : shinfo(num_bufs), done(num_bufs) {}
  };
  using Set = dataplane::TxBindings<Binding>::Set;
  // For the wake-up helpers of dataplane/tx_attachment.hpp.
  static dataplane::TxAttachment& attachment_of(const Binding* b) { return *b->attachment; }

  DpdkTxQueue(const TxQueueSetup& setup, rte_mempool* headers);
  static void on_freed(void* addr, void* opaque);
  bool complete(Binding& b);
  // Sends what `b`'s client submitted, as far as the pacer's budget goes.
  bool send(Binding& b);
  // The mbuf that carries frame `d` of `b`, or null when it is refused or already complete.
  rte_mbuf* zero_copy(Binding& b, const daqiri_tx_desc& d);
  // Checked, or split: the frame's headers copied into an mbuf of the queue's own (checked
  // there), the rest chained behind them zero-copy.
  rte_mbuf* copy_headers(Binding& b, const daqiri_tx_desc& d, uint32_t& done_now);
  // The TX flow that takes frame `d`, read once into head_, or null.
  const core::TxFlow* match_flow(const Binding& b, const daqiri_tx_desc& d);
  // Raw frame `m` (the client's buffer) with `flow`'s headers in front: the mbuf to send.
  rte_mbuf* encapsulate(const core::TxFlow& flow, rte_mbuf* m);
  // Attaches bytes [offset, offset + length) of `d`'s chained buffer to `m`, zero-copy.
  void attach(Binding& b, const daqiri_tx_desc& d, rte_mbuf* m, uint16_t offset, uint32_t length);
  // Tops the stash up to a batch from the header pool, with what is left when that is less.
  void refill_stash();
  void flush_pending(Binding& b);
  // The NIC's send time of frame `d`, in `m` (NIC scheduling). `now`: the send's clock
  // reading, taken here on its first frame (0 until then).
  void stamp(rte_mbuf* m, const daqiri_tx_desc& d, uint64_t& now);
  // The NIC's time a paced burst of `bytes` starting with `first` may leave, in `first`: the
  // later of its own send time, if it has one, and the pacer's.
  void stamp_burst(rte_mbuf* first, uint64_t bytes, uint64_t& now);
  // The NIC's ticks of host time `at_ns`, the clocks read together again when that is stale.
  uint64_t nic_ticks(uint64_t at_ns, uint64_t now);

  uint16_t port_;
  uint16_t queue_;
  rte_mempool* headers_;
  uint32_t batch_;
  uint32_t max_frame_;
  rte_device* dma_device_;
  config::TxPolicy policy_;
  uint32_t source_ipv4_;
  rte_ether_addr mac_;
  // Checked: bytes copied into the daemon's mbuf (the headers, or the whole frame where the
  // port cannot chain); a frame longer than that has its payload chained behind, zero-copy.
  // Split: split_header_. Raw: 0.
  uint32_t copy_length_;
  uint32_t split_header_;
  uint32_t mbufs_per_frame_;  // at most: 2 where checked frames chain their payload, or flows
                              // put headers in front of raw ones
  bool multi_segment_;
  std::vector<core::TxFlow> flows_;
  uint32_t nic_overhead_ = 0;        // headers the NIC puts in front (encapsulated_by_nic)
  std::array<uint8_t, 128> head_{};  // the daemon's copy of a frame's first bytes (match_flow)
  uint32_t head_length_ = 0;
  dataplane::TxPacer pacer_;
  bool send_times_;
  int send_time_offset_ = -1;  // the NIC schedules: the mbuf's send time field, else -1
  uint64_t send_time_flag_ = 0;
  SendClock send_clock_;
  BurstPacer burst_pacer_;
  dataplane::TxBindings<Binding> bindings_;
  std::array<daqiri_tx_desc, kMaxBatch> descs_{};
  std::array<rte_mbuf*, kMaxBatch> stash_{};  // header mbufs taken from the pool, unused yet
  uint32_t stash_count_ = 0;
};

}  // namespace daqiri::backends::dpdk
