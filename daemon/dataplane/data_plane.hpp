// The data plane as control threads see it: flows installed and removed, attachments created,
// activated and closed, counters read. Owns the pollers and everything they poll. Thread-safe:
// every method may be called from any control thread (a mutex serialises them); pollers never
// take that mutex.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/socket/socket_rx_flow.hpp"
#include "backends/socket/socket_tx_queue.hpp"
#include "backends/socket/tcp_rx_flow.hpp"
#ifdef DAQIRI_HAVE_DPDK
#include "backends/dpdk/dpdk_backend.hpp"
#endif
#ifdef DAQIRI_HAVE_RDMA
#include "backends/rdma/rdma_interface.hpp"
#endif
#include "config/config.hpp"
#include "core/flow_table.hpp"
#include "dataplane/latency_histogram.hpp"
#include "dataplane/nic_stats.hpp"
#include "dataplane/poller.hpp"
#include "dataplane/rx_attachment.hpp"
#include "dataplane/tx_attachment.hpp"
#include "memory/device_memory.hpp"
#ifdef DAQIRI_HAVE_CUDA
#include "gpu/device_pool_memory.hpp"
#include "gpu/gpu_device.hpp"
#include "gpu/gpu_rx_task.hpp"
#include "gpu/host_registration.hpp"
#endif

namespace daqiri::dataplane {

struct RxAttachOptions {
  uint32_t ring_size = 0;  // 0: the queue's ring_size
  Backpressure backpressure = Backpressure::kDropNew;
  bool gpu = false;       // a GPU ring (the flow's queue must have a device region)
  bool cuda_ipc = false;  // with gpu: cudaMalloc'd, shared by a legacy cudaIpcMemHandle_t
  // The daemon's own host reader on any queue, device ones included: there it reads the pinned
  // staging pool every packet passes through before its GPU copy (daemon-side captures).
  bool staging_pool = false;
  // A ring of daqiri_rx_desc_compact: no stamp, payload offset or stream (not for TCP, RDMA
  // or GPU rings).
  bool compact = false;
  // Who asks (a login name): kBlock needs each flow's allow_block to name them, or anyone.
  std::string user;
};

// Memory an attachment makes the daemon take: host bytes (its rings, a TX pool, a GPU ring's
// host side) and GPU bytes (a GPU ring).
struct MemoryCost {
  uint64_t host = 0;
  uint64_t gpu = 0;
};
// Asked for an attachment's cost before any of it is allocated; an error refuses the
// attachment (the session server charges it to the user, within the daemon's caps).
using ReserveMemory = std::function<Result<>(const MemoryCost&)>;

struct FlowStats {
  std::string name;
  std::string interface;
  std::string queue;
  uint64_t packets = 0, bytes = 0, no_attachment = 0, rings_full = 0, filtered = 0, truncated = 0;
  uint64_t kernel_drops = 0;  // all the kernel dropped, read from /proc at the time of asking
  // The same drops as datagrams reported them, by cause (both only grow, unlike a difference of
  // two counts read at different times): the pool was empty, or the poller fell behind.
  uint64_t no_buffer = 0, overflow = 0;
  uint32_t buffers_on_loan = 0, buffers_total = 0, connections = 0;
  size_t attachments = 0;
  Steering steering = Steering::kSoftware;
};

struct AttachmentStats {
  uint64_t id = 0;
  bool rx = true;
  bool gpu = false;       // RX into a GPU ring
  std::string target;     // flow name, "queue IF/Q", or (TX) "IF/Q"
  std::string interface;  // TX: the queue's interface
  std::string queue;      // TX: the queue
  uint64_t packets = 0, bytes = 0, dropped_ring_full = 0, dropped_no_buffer = 0, bad_index = 0,
           bad_descriptor = 0, send_errors = 0, refused = 0, on_loan = 0, dropped_over_share = 0;
  uint32_t share = 0;   // RX: the most buffers it may hold now (RxAttachment::share)
  uint64_t stalls = 0;  // RX, block backpressure: times this attachment's full ring held the flow
  uint64_t kicks = 0;   // times its client woke the sleeping poller
  // The client's ring: slots and descriptors in it now (RX: not yet released; TX: submitted,
  // not yet taken), read from the shared ring at scrape time.
  uint32_t ring_size = 0, ring_used = 0;
  uint64_t gpu_packets = 0, gpu_bytes = 0;  // GPU: copies into the GPU ring completed
  LatencyHistogram::Snapshot gpu_copy_latency;
  bool violated = false;
  bool claimed = false;  // activate() ran: the pollers deliver to it
};

struct PollerStats {
  std::string name;
  double busy_ratio = 0;
  PollerWakeups wakeups;
};

// What a client needs to map an attachment: sent over the session socket.
struct AttachmentShare {
  uint64_t id = 0;
  bool rx = true;
  UniqueFd rings_fd;
  size_t rings_size = 0;
  size_t ring_offset = 0;
  size_t completion_offset = 0;
  UniqueFd event_fd;
  UniqueFd kick_fd;  // RX and TX: the client's doorbell (sent after the regions)
  struct Region {
    UniqueFd fd;
    uint64_t size = 0;
    uint32_t buf_size = 0;
    uint32_t num_bufs = 0;
    bool writable = false;
  };
  std::vector<Region> regions;
  // GPU RX: the ring's VMM fd and layout (rings_fd is then its host control block).
  UniqueFd gpu_fd;  // or, for a legacy IPC ring (gpu_ipc), none: the handle went over gRPC
  bool gpu_ipc = false;
  daqiri_gpu_ring_info gpu{};
  [[nodiscard]] bool is_gpu() const { return gpu_fd.valid() || gpu_ipc; }
};

class DataPlane {
 public:
  // Starts a poller per RX queue and per TX queue (queues pinned to one core share it).
  static Result<std::unique_ptr<DataPlane>> start(const config::Config& config);
  ~DataPlane();
  DataPlane(const DataPlane&) = delete;
  DataPlane& operator=(const DataPlane&) = delete;

  Result<> add_flow(const core::Flow& flow);
  // Detaches every attachment of the flow (their rings say DETACHED), then removes it.
  Result<> remove_flow(std::string_view name);

  // A new RX attachment on a flow, not yet delivering. Its id is unique for the daemon's life.
  Result<uint64_t> create_rx(std::string_view flow, const RxAttachOptions& options,
                             const ReserveMemory& reserve = {});
  // A GPU ring attached with cuda_ipc: its legacy cudaIpcMemHandle_t.
  Result<std::string> cuda_ipc_handle(uint64_t attachment_id) const;
  // A new RX attachment on every flow of an RX queue (as they are now; at most 4), one ring,
  // one region per flow. Deleting any of those flows ends it.
  Result<uint64_t> create_rx_queue(std::string_view interface, std::string_view queue,
                                   const RxAttachOptions& options,
                                   const ReserveMemory& reserve = {});
  // A new TX attachment on an interface's TX queue (empty queue: the first).
  // `client_kicks`: the client said it kicks (TxAttachment::client_kicks).
  Result<uint64_t> create_tx(std::string_view interface, std::string_view queue,
                             bool client_kicks = false, const ReserveMemory& reserve = {});
  // Starts delivery (RX) or draining (TX); returns what the client must map.
  Result<AttachmentShare> activate(uint64_t id);
  // Ends an attachment: the poller returns every buffer it lent, then it is freed. Waits for
  // that, outside the data plane's lock, up to kReleaseWait; an attachment its poller has not
  // let go by then is parked (kept, out of the table, never freed under the poller) until it
  // does. Unknown ids (already closed) are ignored.
  void close(uint64_t id);
  static constexpr std::chrono::milliseconds kReleaseWait = Epoch::kGraceWait;
  // How long a stop waits for each poller to leave its loop, and the exit code when one does
  // not (the daemon then exits without cleanup).
  static constexpr std::chrono::seconds kStopWait{5};
  static constexpr int kExitPollerStuck = 3;
  // Attachments closed whose pollers have not let them go yet.
  [[nodiscard]] size_t parked() const;
  // Flows removed that could not be let go within kReleaseWait (an RDMA flow's poller has not
  // closed its connections, a GPU ring's copies still read its buffers): they linger, alive
  // and still polled, until they are; reap_parked() finishes their removal.
  [[nodiscard]] size_t lingering_flows() const;
  // Frees the parked attachments whose pollers have let go since (close() does too), and
  // finishes the removal of lingering flows let go since.
  void reap_parked();
  // Pollers whose loop has not come round for longer than `limit` (an idle one parks for a
  // second at most), by name. Called now and then (the daemon's health tick): it compares
  // each poller's iteration count with what it was at the previous call.
  [[nodiscard]] std::vector<std::string> stalled_pollers(std::chrono::milliseconds limit);
  // Attachments whose clients broke the protocol.
  [[nodiscard]] std::vector<uint64_t> violated() const;

  [[nodiscard]] std::vector<FlowStats> flow_stats() const;
  [[nodiscard]] std::vector<AttachmentStats> attachment_stats() const;
  // What an attachment is called in sessions and stats alike: the flow ("gpu FLOW" for a GPU
  // ring), "queue IF/Q" for an RX queue, "IF/Q" for TX with the queue resolved. Empty when
  // there is no such attachment.
  [[nodiscard]] std::string target(uint64_t id) const;
  // Each poller's name and the fraction of its iterations that did work.
  [[nodiscard]] std::vector<PollerStats> poller_stats() const;
  // How an installed flow is steered (nullopt: not installed).
  [[nodiscard]] std::optional<Steering> steering(std::string_view flow) const;
  // DPDK ports (empty without dpdk interfaces).
  [[nodiscard]] std::vector<NicStats> nic_stats() const;
  // "up ...", "down" for a DPDK interface; "configured" otherwise.
  [[nodiscard]] std::string interface_state(const std::string& interface) const;
  // How an RX queue's clients get frames: "zero-copy", "copy (...)", or "socket" (the
  // kernel copies into the flow's buffers).
  [[nodiscard]] std::string delivery(const std::string& interface, const std::string& queue) const;
  // The kind of region an RX attachment's packets arrive in (nullopt: no such attachment).
  [[nodiscard]] std::optional<config::RegionKind> rx_region_kind(uint64_t id) const;

 private:
  struct RxQueueHome {
    Poller* poller = nullptr;
    const config::InterfaceConfig* itf = nullptr;
    const config::QueueConfig* queue = nullptr;
    const config::MemoryRegionConfig* region = nullptr;
    const config::MemoryRegionConfig* headers = nullptr;  // header-data split: header slots
  };
  struct TxQueueHome {
    Poller* poller = nullptr;
    const config::InterfaceConfig* itf = nullptr;
    const config::QueueConfig* queue = nullptr;
    const config::MemoryRegionConfig* region = nullptr;
    std::unique_ptr<TxQueueTask> owned;
    TxQueueTask* task = nullptr;  // socket: `owned`; rdma: the interface's task; DPDK: null
  };
  struct FlowEntry {
    std::unique_ptr<RxFlowTask> flow;
    Poller* poller = nullptr;
  };
  struct Attachment {
    std::unique_ptr<RxAttachment> rx;
    std::unique_ptr<TxAttachment> tx;
#ifdef DAQIRI_HAVE_CUDA
    std::unique_ptr<gpu::GpuRxTask> gpu;  // drains `rx` into a GPU ring
    Poller* gpu_poller = nullptr;
    Grace gpu_removal;  // closing: `gpu` out of its poller's tasks
#endif
    std::vector<std::string> flows;  // RX: the flows feeding it, in region order
    std::string target;
    TxQueueHome* tx_home = nullptr;
    bool active = false;
    bool closing = false;  // a close() waits for its pollers to let go
    bool retired = false;  // out of its pollers' sets
    // Removals from a poller's sets that the poller has not come round past (it is stuck): the
    // attachment is kept (parked) until it has.
    std::vector<Grace> awaiting;
    void await(const Grace& g) {
      if (!g.passed) awaiting.push_back(g);
    }
    [[nodiscard]] bool unseen() const {
      return std::all_of(awaiting.begin(), awaiting.end(),
                         [](const Grace& g) { return g.reached(); });
    }
    [[nodiscard]] AttachmentLifecycle& lifecycle() const {
      return rx ? rx->lifecycle : tx->lifecycle;
    }
    [[nodiscard]] const AttachmentCounters& counters() const {
      return rx ? rx->counters : tx->counters;
    }
  };

  explicit DataPlane(config::Config config) : config_(std::move(config)) {}
  // Stops every poller, each within kStopWait; exits the process (kExitPollerStuck) if one
  // does not.
  void stop_pollers();
  Result<Poller*> poller_for(const std::string& name, int core);
  // Creates an rdma interface's task and the poller it runs on.
  Result<Poller*> start_rdma(const config::InterfaceConfig& itf);
  // The DPDK backend's poll task for a queue.
  [[nodiscard]] PollTask* dpdk_task(const config::InterfaceConfig& itf,
                                    const config::QueueConfig& q, bool rx) const;
  [[nodiscard]] bool is_dpdk(const std::string& interface) const;
  // A gpudirect region's pool: GPU memory on the region's GPU, `region.total_bytes()` at least.
  Result<memory::DeviceMemory> gpudirect_memory(const config::MemoryRegionConfig& region);
  static std::string target_of(const Attachment& a);
  // `extra`: more of the attachment's cost than its ring (a GPU ring's), reserved with it.
  Result<uint64_t> create_rx_locked(std::vector<std::string> flows, std::string target,
                                    uint32_t ring_size, const RxAttachOptions& options,
                                    const ReserveMemory& reserve, MemoryCost extra = {});
  // close() with the lock held throughout (flow removal, shutdown): the same bounded wait.
  void close_locked(uint64_t id);
  // close() in steps: asks its pollers to let go; waits for it (up to kReleaseWait); takes it
  // out of their sets and frees it, or parks it if not let go.
  void begin_close(uint64_t id, Attachment& a);
  // The bound on waiting for an attachment's pollers to let go: kReleaseWait, or none at all
  // while one of them is known stuck; a poller that did not come round once in the whole wait
  // is marked stuck, so that the next close does not wait for it again.
  class ReleaseWait {
   public:
    explicit ReleaseWait(const std::vector<Poller*>& pollers);
    [[nodiscard]] bool over();

   private:
    std::chrono::steady_clock::time_point deadline_;
    std::vector<std::pair<const Epoch*, uint64_t>> counts_;
  };
  // Erases it if it was never claimed (nothing to wait for); whether it did.
  bool erased_unclaimed(std::map<uint64_t, Attachment>::iterator it);
  // Out of the table: freed, or parked while a poller may still see it (`why`, logged).
  void drop(std::map<uint64_t, Attachment>::iterator it, const char* why);
  void finish_close(std::map<uint64_t, Attachment>::iterator it, bool released);
  // Out of its pollers' sets (they let go of it); a removal a stuck poller has not come round
  // past goes to `a.awaiting`.
  void retire(Attachment& a);
  // Frees the parked attachments whose pollers have let go since.
  void reap_parked_locked();
  // Asks its RX pollers to give back what it holds and let go, once nothing else reads its
  // buffers (a GPU ring: its copy task off its poller, no copy in flight); whether it has.
  // Never waits: close() and reap_parked_locked() ask again.
  bool hand_back_when_quiet(Attachment& a);
  // Whether a flow being removed may be taken from its poller now: an RDMA flow's poller has
  // closed its connections, and no copy into a GPU ring reads its buffers any more. Asks its
  // parked GPU rings to hand back (hand_back_when_quiet) on the way, so that a loop on it
  // makes progress.
  bool let_go(std::string_view name, const FlowEntry& e);
  // Takes a flow that was let go from its poller (or backend) and frees it after the grace.
  void finish_removal(std::string_view name, FlowEntry& e);
  // Finishes the removal of lingering flows let go since.
  void reap_lingering_locked();
  [[nodiscard]] bool lingers(std::string_view flow) const;
  // A flow's removal has been published (its Grace, `removal`): its parked attachments stop
  // waiting for a release through it.
  void let_parked_go(std::string_view flow, Poller& poller, const Grace& removal);
  // Every poller it is on: its flows' (RX) or its queue's (TX), and its GPU ring's.
  [[nodiscard]] std::vector<Poller*> pollers_of(const Attachment& a) const;
  // RX: the pollers of its flows, each once.
  [[nodiscard]] std::vector<Poller*> rx_pollers(const Attachment& a) const;
  // RX: its flows deliver to it, and their pollers watch its kick. False, with nothing
  // changed, when a flow delivers to kMaxAttachmentsPerFlow already.
  [[nodiscard]] bool add_rx(Attachment& a);
  // Undoes add_rx for the first `flows` of its flows, and the kick watches.
  void remove_rx(Attachment& a, size_t flows);
  // RX attachments (claimed or not) that `flow` feeds.
  [[nodiscard]] size_t rx_attachments_of(std::string_view flow) const;
  // activate() in two steps: every fallible thing first (fds for the client, the per-flow
  // limit), then what makes the attachment visible to its pollers.
  [[nodiscard]] Result<AttachmentShare> prepare_activation(uint64_t id, const Attachment& a) const;
  [[nodiscard]] Result<AttachmentShare> share_of(uint64_t id, const Attachment& a) const;
  Result<> install(Attachment& a);
  // Of a flow's pool, the buffers its clients may hold between them.
  [[nodiscard]] uint32_t lendable(FlowEntry& f) const;
  // Sets each claimed RX attachment's share (RxAttachment::set_share): an equal part of what
  // its pools can lend among the attachments that draw on them, so that a client that never
  // releases leaves the others theirs.
  void rebalance_shares();
  // FAILED_PRECONDITION unless a GPU (or host) attachment suits the flow's queue region.
  Result<> check_delivery(const RxQueueHome& home, std::string_view flow,
                          const RxAttachOptions& options) const;
#ifdef DAQIRI_HAVE_CUDA
  // `header_size` > 0: header-data split (the first header_size bytes of each frame to host
  // header slots, the rest to the GPU ring). `busy_poll`: the GPU's poller spins while it has
  // this ring.
  Result<> add_gpu_engine(Attachment& a, const config::MemoryRegionConfig& region, uint32_t slots,
                          uint32_t header_size, bool cuda_ipc, bool busy_poll);
  // The region's GPU (its primary context retained on first use).
  Result<gpu::GpuDevice*> gpu_of(const config::MemoryRegionConfig& region);
  std::map<int, std::unique_ptr<gpu::GpuDevice>> gpus_;
  std::map<int, Poller*> gpu_pollers_;
  // Flow pools the GPUs read from, registered on first use, dropped with the flow.
  std::map<const memory::BufferPool*, gpu::HostRegistration> pinned_pools_;
#endif

  const config::Config config_;
  mutable std::mutex mutex_;
#ifdef DAQIRI_HAVE_DPDK
  std::unique_ptr<backends::dpdk::DpdkBackend> dpdk_;  // outlives pollers, flows, attachments
#endif
#ifdef DAQIRI_HAVE_RDMA
  std::map<std::string, std::unique_ptr<backends::rdma::RdmaInterface>> rdma_;
  [[nodiscard]] backends::rdma::RdmaInterface* rdma(const std::string& interface) const {
    auto it = rdma_.find(interface);
    return it == rdma_.end() ? nullptr : it->second.get();
  }
#endif
  std::vector<std::unique_ptr<Poller>> pollers_;
  std::map<int, Poller*> pinned_;
  std::map<std::string, RxQueueHome> rx_queues_;  // "interface/queue"
  std::map<std::string, std::unique_ptr<TxQueueHome>> tx_queues_;
  std::map<std::string, FlowEntry, std::less<>> flows_;
  std::map<std::string, memory::PageArena> arenas_;  // per share_pages region: its slabs
  std::map<uint64_t, Attachment> attachments_;
  std::vector<Attachment> parked_;  // closed, not yet let go by their pollers
  std::vector<std::pair<std::string, FlowEntry>> lingering_;  // removed, not yet let go
  struct Progress {
    uint64_t count = 0;
    std::chrono::steady_clock::time_point since;
  };
  std::map<const Poller*, Progress> progress_;  // stalled_pollers()' last look
  uint64_t next_id_ = 1;
};

}  // namespace daqiri::dataplane
