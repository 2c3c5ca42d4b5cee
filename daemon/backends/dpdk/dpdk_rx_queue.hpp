// One RX queue of a DPDK port and the flows steered to it. The queue's mbufs carry their data
// in a client-shared region (an ExternalMbufPool over the queue's BufferPool memory): a frame
// the PMD writes is delivered by descriptor, not copied, and its mbuf goes back to the PMD only
// when every client it was lent to has released it. Frames are steered to flows in software
// (the flow's match; a catch-all last); the NIC may have steered them already (rte_flow).
// The queue is polled only while some flow on it has a client: without one there is nobody to
// deliver to, and the NIC's own counters (imissed) say what it dropped meanwhile.
// A gpudirect queue's pool is GPU memory (the NIC writes there, the gpu engine reads it): the
// poller never reads a frame, so its flows are told apart by the NIC's rte_flow MARK, and
// frames without one go to the queue's catch-all.
#pragma once

#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/dpdk/external_memory.hpp"
#include "backends/dpdk/hardware_steering.hpp"
#include "backends/dpdk/software_reach.hpp"
#include "core/flow_table.hpp"
#include "core/packet_fields.hpp"
#include "dataplane/handoff_ring.hpp"
#include "dataplane/nic_stats.hpp"
#include "dataplane/poller.hpp"
#include "dataplane/rx_flow_task.hpp"
#include "dataplane/snapshot.hpp"
#include "memory/buffer_pool.hpp"
#include "memory/device_memory.hpp"

namespace daqiri::backends::dpdk {

class DpdkRxQueue;

// The queues an RSS flow spreads over, shared by its members (a DpdkRxFlow on each queue).
// Either the NIC spreads the frames (`rule`, an rte_flow RSS action) or the daemon does: the
// member on the queue a frame arrives at hashes it (core/rss_hash.hpp) and hands it to the
// queue the hash picks, through that queue's inbox. Fixed once made but for `clients`.
struct RssGroup {
  // Unique for the daemon's life: what a handoff names, so that a frame still in an inbox when
  // its flow goes is never delivered to a later flow that takes the same id there.
  uint64_t serial = 0;
  std::vector<DpdkRxQueue*> queues;         // the flow's order: what rss_queue_index() indexes
  std::vector<dataplane::Poller*> pollers;  // each queue's, the same order
  std::unique_ptr<HardwareRule> rule;       // null: spread in software
  // The indirection table (core::rss_queue_index for every entry), so that a frame's queue is
  // one load: table[hash & mask].
  std::array<uint8_t, core::kMaxRssQueues> table{};
  uint32_t mask = 0;
  // Each member's attachments (control side writes; every member's poller reads): while any
  // member has one, every member's queue is polled, since any of them may receive its frames.
  std::array<std::atomic<uint32_t>, core::kMaxRssQueues> clients{};
  [[nodiscard]] bool wanted() const {
    for (size_t i = 0; i < queues.size(); ++i) {
      if (clients[i].load(std::memory_order_relaxed) != 0) return true;
    }
    return false;
  }
};

// A frame a queue received for an RSS member on another queue, copied into that queue's pool
// and passed through its inbox (any queue's poller producing, its own consuming).
struct RssHandoff {
  rte_mbuf* mbuf;
  uint64_t received;  // the receive stamp, as the first queue took it
  uint64_t group;     // its RssGroup's serial
  uint16_t flags;
  uint16_t payload_offset;
};

// A flow on a DPDK queue: its fan-out and counters. Its packets live in the queue's pool,
// so clients of any flow of a queue map that queue's region (isolation is per queue). An RSS
// flow has one on each of its queues, sharing an RssGroup.
class DpdkRxFlow final : public dataplane::RxFlowTask {
 public:
  DpdkRxFlow(core::Flow flow, DpdkRxQueue& queue, std::unique_ptr<HardwareRule> rule);
  // A member of an RSS flow: the `index`th of `group`'s queues.
  DpdkRxFlow(core::Flow flow, DpdkRxQueue& queue, std::shared_ptr<RssGroup> group, uint32_t index);
  bool poll() override { return false; }  // the queue polls
  [[nodiscard]] const core::Flow& flow() const override { return flow_; }
  [[nodiscard]] std::vector<int> fds() const override { return {}; }
  [[nodiscard]] memory::BufferPool& pool() override;
  [[nodiscard]] bool shares_pool() const override { return true; }  // the queue's
  [[nodiscard]] dataplane::RxFanout& fanout() override { return fanout_; }
  [[nodiscard]] dataplane::Steering steering() const override {
    return nic_steered() ? dataplane::Steering::kHardware : dataplane::Steering::kSoftware;
  }
  // The NIC marks this flow's frames with its id (RTE_MBUF_F_RX_FDIR_ID).
  [[nodiscard]] bool marked() const { return rule() != nullptr && rule()->marked(); }
  // The NIC steers it: its rte_flow rule (or its RSS flow's) was accepted.
  [[nodiscard]] bool nic_steered() const { return rule() != nullptr; }
  // The NIC strips its tag or tunnel too: its marked frames are delivered as they land.
  [[nodiscard]] bool nic_decapsulates() const {
    return rule() != nullptr && rule()->decapsulates();
  }
  // An RSS member whose frames the daemon spreads: the queue's poller hashes each.
  [[nodiscard]] bool spreads_in_software() const { return rss_ && !rss_->rule; }
  [[nodiscard]] RssGroup* rss() const { return rss_.get(); }
  [[nodiscard]] uint32_t rss_index() const { return rss_index_; }
  // Its RSS flow's clients changed here: every member's poller is told (control side).
  void clients_changed() override;

 private:
  [[nodiscard]] const HardwareRule* rule() const { return rss_ ? rss_->rule.get() : rule_.get(); }
  core::Flow flow_;
  DpdkRxQueue& queue_;
  std::unique_ptr<HardwareRule> rule_;
  std::shared_ptr<RssGroup> rss_;
  uint32_t rss_index_ = 0;
  dataplane::RxFanout fanout_;
};

struct RxQueueCounters {
  std::atomic<uint64_t> packets{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> unmatched{0};  // no flow of the queue took it
  std::atomic<uint64_t> copied{0};     // the PMD handed over a buffer not of our pool
  std::atomic<uint64_t> no_buffer{0};  // ... and our pool had none to copy it into
  std::atomic<uint64_t> truncated{0};  // more than one segment: the first is delivered
  std::atomic<uint32_t> on_loan{0};
};

struct RxQueueSetup {
  uint16_t port = 0;
  uint16_t queue = 0;
  std::string pool_name;
  uint32_t buf_size = 0;
  uint32_t num_bufs = 0;
  bool huge = false;
  uint32_t batch = 0;
  int socket = SOCKET_ID_ANY;
  rte_device* dma_device = nullptr;  // the PCI device that DMAs into the pool, or null (vdevs)
  // The PMD gets buffers back in the order clients released them (no per-core mempool cache),
  // so consecutive frames land in consecutive buffers.
  bool in_order = false;
  // gpudirect: the pool in this GPU memory instead of a memfd.
  const memory::DeviceMemory* device = nullptr;
  // Which frames reach the queue without an rte_flow rule (software_reach()).
  SoftwareReach reach = SoftwareReach::kReaches;
  // The NIC's buffer split (RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT): each frame's first `split` bytes
  // into a header mbuf pool of the EAL's (copied beside GPU rings, then freed), the rest into
  // this queue's pool. 0: whole frames.
  uint16_t split = 0;
  // hardware_timestamps: where the PMD puts each frame's receive timestamp (the mbuf dynamic
  // field) and the flag that says it did; flag 0: the poll's own time for every frame.
  int timestamp_offset = -1;
  uint64_t timestamp_flag = 0;
};

class DpdkRxQueue final : public dataplane::PollTask, public memory::BufferPool::Owner {
 public:
  static constexpr uint32_t kMaxBatch = 512;
  // The pool's memory becomes DPDK external memory.
  static Result<std::unique_ptr<DpdkRxQueue>> create(const RxQueueSetup& setup);

  ~DpdkRxQueue() override;
  bool poll() override;
  [[nodiscard]] bool busy_poll() const override { return spinning_; }
  // With clients it never sleeps (busy_poll); without, it is not polled, and a client that
  // attaches wakes the poller: no timer either way.
  [[nodiscard]] bool needs_timed_wakeup() const override { return false; }

  // For a PMD that refuses external-buffer mempools (af_xdp wants its UMEM to be the pool's
  // own memory): a plain DPDK pool it may fill instead; each frame is then copied into the
  // client-shared pool (counted as copied). Null on failure.
  rte_mempool* make_private_pool(uint32_t count, int socket);

  [[nodiscard]] rte_mempool* mempool() const { return mbufs_pool_->mempool(); }
  // With the NIC's buffer split: the pool of the frames' first segments; null without.
  [[nodiscard]] rte_mempool* header_mempool() const { return header_pool_; }
  [[nodiscard]] uint16_t split() const { return split_; }
  // gpudirect: the frames are in GPU memory, out of the CPU's reach.
  [[nodiscard]] bool frames_on_device() const { return pool_.on_device(); }
  [[nodiscard]] memory::BufferPool& pool() { return pool_; }
  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] uint16_t queue() const { return queue_; }
  // Which frames reach it without an rte_flow rule (fixed when its port was set up).
  [[nodiscard]] SoftwareReach reach() const { return reach_; }
  RxQueueCounters counters;
  [[nodiscard]] dataplane::NicQueueStats stats(const std::string& name) const;

  // Control side (callers serialise); `epoch` is the owning poller's.
  void add(DpdkRxFlow* flow, const dataplane::Epoch& epoch);
  dataplane::Grace remove(DpdkRxFlow* flow, const dataplane::Epoch& epoch);

 private:
  using Flows = std::vector<DpdkRxFlow*>;  // decapsulating flows first, catch-all last
  DpdkRxQueue(uint16_t port, uint16_t queue, memory::BufferPool pool, uint32_t batch,
              SoftwareReach reach);
  // A frame's receive time: the NIC's stamp where the port gives one (flagged in `flags`),
  // else the poll's.
  uint64_t stamp(const rte_mbuf* m, uint64_t now, uint16_t& flags) const {
    if (timestamp_flag_ == 0 || (m->ol_flags & timestamp_flag_) == 0) return now;
    flags |= DAQIRI_DESC_NIC_TIME;
    return *RTE_MBUF_DYNFIELD(m, timestamp_offset_, const rte_mbuf_timestamp_t*);
  }
  // The flow that takes every frame of the poll unread (takes_every_frame()), or null.
  [[nodiscard]] DpdkRxFlow* takes_all(const Flows& flows) const;
  // A poll of a queue whose flow takes_all() frames whole to host memory and has one client,
  // `a`, that lends_objects() (RxFanout::begin_single, which takes back what `a` released, every
  // few bursts).
  bool poll_single(const Flows& flows, DpdkRxFlow& flow, dataplane::RxAttachment& a);
  // Every other poll: several flows or clients, a NIC split, GPU memory, a closing client.
  // A function of its own, so that poll() is the short choice between the two (it had saved
  // and spilled this one's registers on poll_single's way too; level on the VM either way).
  [[gnu::noinline]] bool poll_general(const Flows& flows, DpdkRxFlow* takes_all, bool whole_frames);
  // The poll's `n` frames to `a` alone (deliver_whole in the ring's layout), published.
  [[gnu::always_inline]] void deliver_alone(const Flows& flows, DpdkRxFlow& flow,
                                            dataplane::RxAttachment& a, uint16_t n);
  // The poll's `n` frames, all to `flow`'s one client `a` (takes_all, no split, host memory,
  // `a` lends_objects()), each with its mbuf (Run::push_alone: released, they go straight back
  // to the mempool), in a loop of its own for the ring's layout: the general loop's state
  // did not fit in registers, and its spills made each frame wait for the ring's stores.
  // Not inlined: inside poll() it changed how the general loop below it kept its registers.
  template <bool kCompact>
  [[gnu::noinline]] void deliver_whole(DpdkRxFlow& flow, dataplane::RxAttachment& a, uint16_t n,
                                       uint64_t now);
  [[nodiscard]] bool owned(const rte_mbuf* m) const { return m->pool == mempool(); }
  [[nodiscard]] uint32_t index_of(const rte_mbuf* m) const {
    return pool_.index_at(static_cast<const std::byte*>(m->buf_addr));
  }
  // Where `m`'s frame starts in the region clients map (a descriptor's offset).
  [[nodiscard]] uint64_t offset_of(const rte_mbuf* m) const { return offset_from(base_, m); }
  // offset_of() from a `base` the caller keeps in a register (deliver_whole).
  [[nodiscard]] static uint64_t offset_from(const std::byte* base, const rte_mbuf* m) {
    return uint64_t(static_cast<const std::byte*>(m->buf_addr) - base) + m->data_off;
  }
  rte_mbuf* adopt(rte_mbuf* foreign);
  // Which flow takes the frame starting in `first`; null when none does. `readable`: its bytes
  // are in host memory (else only the NIC's mark says). A decapsulating flow's frame comes with
  // what to strip (`decap`), and `fields` are then the inner frame's. Inline in poll(): a call
  // per frame.
  [[nodiscard, gnu::always_inline]] static inline DpdkRxFlow* steer(
      const Flows& flows, const rte_mbuf* first, bool readable, core::PacketFields& fields,
      std::optional<core::Decapsulation>& decap);
  // An RSS member's frame that its hash gives to the `target`th queue of its group: copied
  // (from `strip` bytes in) into that queue's pool and put in its inbox. Counted here when it
  // cannot be (no buffer there, a full inbox).
  void hand_off(DpdkRxFlow& from, uint32_t target, const rte_mbuf* m, uint16_t strip,
                uint64_t received, uint16_t flags, uint16_t payload_offset);
  // Frees the segments after `m`'s first, flagging and counting the frame truncated if any.
  void keep_first_segment(rte_mbuf* m, uint16_t& flags);
  // NIC buffer split: detaches the payload from header mbuf `h` (the payload, or null when the
  // frame fit in the header), keeping the payload's first segment only.
  rte_mbuf* take_payload(rte_mbuf* h, uint16_t& flags);
  // Fills mbuf_of_ from the mempool's objects.
  Result<void> map_mbufs();
  // pool_'s Returner: mbufs whose buffers clients no longer hold, back to the mempool.
  void give_back(void* const* mbufs, uint32_t n) override;
  // Takes what give_back() returned off the buffers on loan.
  void count_returned(const Flows& flows);
  // The queue's buffers on loan, as each flow reports them (they share the pool).
  void publish_on_loan(const Flows& flows);

  uint16_t port_;
  uint16_t queue_;
  SoftwareReach reach_;
  memory::BufferPool pool_;  // buffer refs; a buffer's last one goes back to the mempool
  std::unique_ptr<ExternalMbufPool> mbufs_pool_;
  rte_mempool* private_pool_ = nullptr;
  rte_mempool* header_pool_ = nullptr;  // NIC buffer split
  uint16_t split_ = 0;
  int timestamp_offset_ = -1;
  uint64_t timestamp_flag_ = 0;
  const std::byte* base_ = nullptr;
  uint32_t batch_;
  bool spinning_ = false;
  dataplane::Published<Flows> flows_;
  std::vector<rte_mbuf*> mbuf_of_;  // by buffer index: the mbuf whose data it is (map_mbufs)
  uint32_t returned_ = 0;           // by give_back(), not yet off counters.on_loan
  // Where RSS members on other queues put the frames of this queue's members.
  dataplane::HandoffRing<RssHandoff> inbox_{size_t{2} * kMaxBatch};
  std::array<rte_mbuf*, kMaxBatch> rx_{};
  std::array<RssHandoff, kMaxBatch> handed_{};           // a poll's from the inbox
  std::array<rte_mbuf*, size_t{2} * kMaxBatch> drop_{};  // received and handed ones alike
  std::array<rte_mbuf*, kMaxBatch> heads_{};  // NIC buffer split: header mbufs of a burst
};

}  // namespace daqiri::backends::dpdk
