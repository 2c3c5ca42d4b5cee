// The data plane as control threads see it: flows installed and removed, attachments created,
// activated and closed, counters read. Owns the pollers, the backends (through
// backends/backend.hpp, made by the registry) and the GPU engine (gpu/gpu_engine.hpp), and names
// neither a backend nor CUDA. Thread-safe: every method may be called from any control thread
// (a mutex serialises them); pollers never take that mutex. Its parts: data_plane.cpp (set-up,
// teardown, pollers), flow_install.cpp, attachment_setup.cpp, attachment_release.cpp,
// plane_stats.cpp.
#pragma once

#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "config/config.hpp"
#include "core/flow_table.hpp"
#include "daqiri/v1/stats_counters.hpp"
#include "dataplane/attachment_share.hpp"
#include "dataplane/latency_histogram.hpp"
#include "dataplane/nic_stats.hpp"
#include "dataplane/poller.hpp"
#include "dataplane/rx_attachment.hpp"
#include "dataplane/tx_attachment.hpp"
#include "gpu/gpu_engine.hpp"
#include "memory/page_arena.hpp"

namespace daqiri::orchestrator {

using dataplane::AttachmentShare;
using dataplane::Backpressure;
using dataplane::Epoch;
using dataplane::Grace;
using dataplane::Poller;
using dataplane::Steering;

// Who asks for an attachment, as the kernel says: a flow or TX queue with a clients list
// admits only those it names (and admins); kBlock needs each flow's allow_block to name the
// user (a login name), or anyone.
struct Requester {
  std::string user;
  uint32_t uid = UINT32_MAX;
  uint32_t gid = UINT32_MAX;
  std::vector<uint32_t> groups;
  bool admin = false;
  [[nodiscard]] bool admitted_by(const core::ClientList& list) const {
    return admin || list.allows(uid, gid, groups);
  }
};

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
  Requester who;
};

struct TxAttachOptions {
  bool client_kicks = false;  // the client said it kicks (TxAttachment::client_kicks)
  bool gpu = false;           // frames from GPU memory (the queue must have a device region)
  Requester who;
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

// A flow's counters as GetStats reports them, one member per row of DAQIRI_FLOW_COUNTERS
// (daqiri/v1/stats_counters.hpp): packets and bytes; drops by cause; kernel_drops, all the
// kernel dropped, read from /proc at the time of asking, and the same drops as datagrams
// reported them (no_buffer: the pool was empty; overflow: the poller fell behind; both only
// grow); the pool's buffers and those clients hold; its attachments.
struct FlowStats {
  std::string name;
  std::string interface;
  std::string queue;
#define DAQIRI_STATS_MEMBER(member, ...) uint64_t member = 0;
  DAQIRI_FLOW_COUNTERS(DAQIRI_STATS_MEMBER)
  Steering steering = Steering::kSoftware;
  bool reorder = false;  // a reorder: the kReorder rows apply
};

// An attachment's counters, one member per row of DAQIRI_ATTACHMENT_COUNTERS: share is the
// most buffers an RX attachment may hold now (RxAttachment::share); stalls, the times a full
// ring held its flow back (block backpressure); kicks, the times its client woke the sleeping
// poller; ring_size and ring_used, the client's ring read at scrape time (RX: not yet
// released; TX: submitted, not yet taken); gpu_*: copies into a GPU ring completed.
struct AttachmentStats {
  uint64_t id = 0;
  bool rx = true;
  bool gpu = false;       // RX into a GPU ring, or TX out of GPU buffers
  std::string target;     // flow name, "queue IF/Q", or (TX) "IF/Q"
  std::string interface;  // TX: the queue's interface
  std::string queue;      // TX: the queue
  DAQIRI_ATTACHMENT_COUNTERS(DAQIRI_STATS_MEMBER)
#undef DAQIRI_STATS_MEMBER
  dataplane::LatencyHistogram::Snapshot gpu_copy_latency;
  bool violated = false;
  bool claimed = false;  // activate() ran: the pollers deliver to it
};

struct PollerStats {
  std::string name;
  double busy_ratio = 0;
  dataplane::PollerWakeups wakeups;
};

class DataPlane {
 public:
  // Starts a poller per RX queue and per TX queue (queues pinned to one core share it).
  static Result<std::unique_ptr<DataPlane>> start(const config::Config& config);
  ~DataPlane();
  DataPlane(const DataPlane&) = delete;
  DataPlane& operator=(const DataPlane&) = delete;

  Result<> add_flow(const core::Flow& flow);
  // Detaches every attachment of the flow (their rings say DETACHED), then removes it. A
  // reorder, and a flow a reorder reads, stay: FAILED_PRECONDITION.
  Result<> remove_flow(std::string_view name);
  // A reorder (reorder_install.cpp), once its flows are installed: an attachment of the
  // daemon's own on each, and the reorder as a flow of batches on a pseudo-queue
  // "reorder:NAME" of the interface, which clients attach to by the reorder's name.
  Result<> add_reorder(const config::ReorderConfig& reorder);

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
  Result<uint64_t> create_tx(std::string_view interface, std::string_view queue,
                             const TxAttachOptions& options = {},
                             const ReserveMemory& reserve = {});
  // Starts delivery (RX) or draining (TX); returns what the client must map.
  Result<AttachmentShare> activate(uint64_t id);
  // Ends an attachment: the poller returns every buffer it lent, then it is freed. Waits for
  // that, outside the data plane's lock, up to kReleaseWait; an attachment its poller has not
  // let go by then is parked (kept, out of the table, never freed under the poller) until it
  // does. Unknown ids (already closed) are ignored.
  void close(uint64_t id);
  static constexpr std::chrono::milliseconds kReleaseWait = Epoch::kGraceWait;
  // An attachment's ring_size at least.
  static constexpr uint32_t kMinRing = 64;
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
  // Attachments whose clients broke the protocol or whose engine failed them.
  struct Violation {
    uint64_t attachment = 0;
    const char* engine_call = nullptr;  // null: the client broke the protocol
    const char* engine_error = nullptr;
  };
  [[nodiscard]] std::vector<Violation> violated() const;

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
  // Each backend's ports and interfaces that keep counters of their own (DPDK, RDMA).
  [[nodiscard]] std::vector<dataplane::NicStats> nic_stats() const;
  // "up ...", "down" for a DPDK interface, "N connections" for RDMA; "configured" otherwise.
  [[nodiscard]] std::string interface_state(const std::string& interface) const;
  // The GPUs this host has (none in a daqirid built without CUDA).
  [[nodiscard]] std::vector<gpu::GpuInfo> gpus() const;
  // How an RX queue's clients get frames: "zero-copy", "copy (...)", or "socket" (the
  // kernel copies into the flow's buffers).
  [[nodiscard]] std::string delivery(const std::string& interface, const std::string& queue) const;
  // The kind of region an RX attachment's packets arrive in (nullopt: no such attachment).
  [[nodiscard]] std::optional<config::RegionKind> rx_region_kind(uint64_t id) const;

 private:
  struct RxQueue {
    backends::QueueHome home;
    backends::Backend* backend = nullptr;
  };
  struct TxQueue {
    backends::QueueHome home;
    backends::Backend* backend = nullptr;
    dataplane::TxQueueTask* task = nullptr;  // the backend's
    // Sent from GPU memory: the payload (or whole-frame) region on the GPU, and with
    // header-data split the header region. Staged, home.region is the host frames the backend
    // sends; in place (a gpudirect region), the NIC reads the clients' GPU buffers.
    const config::MemoryRegionConfig* gpu_payloads = nullptr;
    const config::MemoryRegionConfig* gpu_headers = nullptr;
    [[nodiscard]] bool gpu_in_place() const { return gpu_payloads && gpu_payloads->gpudirect; }
  };
  struct FlowEntry {
    std::unique_ptr<dataplane::RxFlowTask> flow;
    const RxQueue* queue = nullptr;
    [[nodiscard]] Poller* poller() const { return queue->home.poller; }
  };
  struct Attachment {
    std::unique_ptr<dataplane::RxAttachment> rx;
    std::unique_ptr<dataplane::TxAttachment> tx;
    // RX: drains `rx` into a GPU ring. TX: copies its client's frames out of GPU memory into
    // `tx`, which the queue sends from.
    std::unique_ptr<gpu::GpuRing> gpu;
    Poller* gpu_poller = nullptr;
    Grace gpu_removal;               // closing: `gpu` out of its poller's tasks
    std::vector<std::string> flows;  // RX: the flows feeding it, in region order
    std::string target;
    TxQueue* tx_queue = nullptr;
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
    [[nodiscard]] dataplane::AttachmentLifecycle& lifecycle() const {
      return rx ? rx->lifecycle : tx->lifecycle;
    }
    [[nodiscard]] const dataplane::AttachmentCounters& counters() const {
      return rx ? rx->counters : tx->counters;
    }
  };

  explicit DataPlane(config::Config config) : config_(std::move(config)) {}

  // ---- set-up and teardown (data_plane.cpp) ----
  // Opens the backends the configuration names, then places and opens every queue.
  Result<> open_backends();
  Result<> open_queues(const config::InterfaceConfig& itf, backends::Backend& backend);
  // Stops every poller, each within kStopWait; exits the process (kExitPollerStuck) if one
  // does not.
  void stop_pollers();
  Result<Poller*> poller_for(const std::string& name, int core);

  // ---- flows (flow_install.cpp) ----
  // Where a flow's task on `queue` is kept in flows_ (and named in an attachment's flows): the
  // flow's name, or "NAME@QUEUE" for each member of an RSS flow.
  static std::string member_key(const core::Flow& flow, std::string_view queue);
  // The keys of a flow's tasks: its name, or its RSS members'.
  [[nodiscard]] std::vector<std::string> members_of(std::string_view flow) const;
  Result<> add_member_locked(const core::Flow& flow, const std::string& key);
  // Detaches its attachments, then takes it from its poller (or leaves it lingering).
  void remove_member_locked(std::string_view key);
  // Whether a flow being removed may be taken from its poller now: its backend let go of it
  // (an RDMA flow's connections closed), and no copy into a GPU ring reads its buffers any
  // more. Asks its parked GPU rings to hand back (hand_back_when_quiet) on the way, so that a
  // loop on it makes progress.
  bool let_go(std::string_view name, const FlowEntry& e);
  // Takes a flow that was let go from its poller (or backend) and frees it after the grace.
  void finish_removal(std::string_view name, FlowEntry& e);
  // Finishes the removal of lingering flows let go since.
  void reap_lingering_locked();
  [[nodiscard]] bool lingers(std::string_view flow) const;
  // A flow's removal has been published (its Grace, `removal`): its parked attachments stop
  // waiting for a release through it.
  void let_parked_go(std::string_view flow, Poller& poller, const Grace& removal);

  // ---- attachments made and activated (attachment_setup.cpp) ----
  static std::string target_of(const Attachment& a);
  // `extra`: more of the attachment's cost than its ring (a GPU ring's), reserved with it.
  Result<uint64_t> create_rx_locked(std::vector<std::string> flows, std::string target,
                                    uint32_t ring_size, const RxAttachOptions& options,
                                    const ReserveMemory& reserve, MemoryCost extra = {});
  // FAILED_PRECONDITION unless a GPU (or host) attachment suits the flow's queue region.
  Result<> check_delivery(const RxQueue& queue, std::string_view flow,
                          const RxAttachOptions& options) const;
  // A GPU ring for `a` on its GPU's poller (made on first use).
  Result<> add_gpu_ring(Attachment& a, const backends::QueueHome& home, uint32_t slots,
                        bool cuda_ipc);
  // Its GPU's poller, started on first use.
  Result<Poller*> gpu_poller(int ordinal);
  // FAILED_PRECONDITION unless a GPU (or host) TX attachment suits the queue's region.
  Result<> check_sending(const TxQueue& queue, const TxAttachOptions& options) const;
  // activate() in two steps: every fallible thing first (fds for the client, the per-flow
  // limit), then what makes the attachment visible to its pollers.
  [[nodiscard]] Result<AttachmentShare> prepare_activation(uint64_t id, const Attachment& a) const;
  [[nodiscard]] Result<AttachmentShare> share_of(uint64_t id, const Attachment& a) const;
  Result<> install(Attachment& a);
  // RX: its flows deliver to it, and their pollers watch its kick. False, with nothing
  // changed, when a flow delivers to kMaxAttachmentsPerFlow already.
  [[nodiscard]] bool add_rx(Attachment& a);
  // Undoes add_rx for the first `flows` of its flows, and the kick watches.
  void remove_rx(Attachment& a, size_t flows);
  // RX attachments (claimed or not) that `flow` feeds.
  [[nodiscard]] size_t rx_attachments_of(std::string_view flow) const;
  // TX attachments (claimed or not) of a queue.
  [[nodiscard]] size_t tx_attachments_of(const TxQueue* queue) const;
  // Of a flow's pool, the buffers its clients may hold between them.
  [[nodiscard]] uint32_t lendable(const FlowEntry& f) const;
  // Sets each claimed RX attachment's share (RxAttachment::set_share): an equal part of what
  // its pools can lend among the attachments that draw on them, so that a client that never
  // releases leaves the others theirs.
  void rebalance_shares();

  // ---- attachments closed, parked and freed (attachment_release.cpp) ----
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
  // Every poller it is on: its flows' (RX) or its queue's (TX), and its GPU ring's.
  [[nodiscard]] std::vector<Poller*> pollers_of(const Attachment& a) const;
  // RX: the pollers of its flows, each once.
  [[nodiscard]] std::vector<Poller*> rx_pollers(const Attachment& a) const;

  const config::Config config_;
  mutable std::mutex mutex_;
  // Declared first, gone last: GPU memory that backends' pools and GPU rings live in.
  std::unique_ptr<gpu::GpuEngine> gpu_engine_;
  std::map<config::Backend, std::unique_ptr<backends::Backend>> backends_;
  std::function<void()> thread_setup_;  // every poller runs each backend's first
  std::vector<std::unique_ptr<Poller>> pollers_;
  std::map<int, Poller*> pinned_;
  std::map<int, Poller*> gpu_pollers_;        // by CUDA ordinal
  std::map<std::string, RxQueue> rx_queues_;  // "interface/queue"
  std::map<std::string, TxQueue> tx_queues_;  // "interface/queue"
  std::map<std::string, FlowEntry, std::less<>> flows_;
  std::map<std::string, memory::PageArena> arenas_;  // per share_pages region: its slabs
  // Reorders' pseudo-queues (a list: homes point into it) and the backend they answer to.
  struct ReorderQueue {
    config::QueueConfig queue;
    config::MemoryRegionConfig region;  // the output region, each buffer a header longer
  };
  std::list<ReorderQueue> reorder_queues_;
  // Per TX queue that sends from GPU memory: the geometry of the frames its backend sends (a
  // list: homes point into it).
  std::list<config::MemoryRegionConfig> gpu_tx_frames_;
  std::unique_ptr<backends::Backend> reorder_home_;
  std::map<std::string, std::string, std::less<>> reordered_;  // source flow -> its reorder
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

}  // namespace daqiri::orchestrator
