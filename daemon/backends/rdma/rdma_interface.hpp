// One interface on the rdma backend (rdma-core verbs over RoCE or InfiniBand), as DAQIRI's
// RDMA manager offers them: a server listens on address:port and takes peers, a client connects
// each of its flows to an endpoint and reconnects when the peer goes away. One poll task per
// interface owns everything verbs: the CM event channel, the protection domain, one completion
// queue shared by all queue pairs, the connections. It receives SENDs and WRITEs with immediate
// into its flows' pools (RdmaRxFlow) and drains its TX attachments into SEND, WRITE,
// WRITE_IMM and READ work requests; a buffer comes back to its owner when its work completes,
// or when its connection dies. All of it runs on the interface's poller; control threads add
// and remove flows and attachments through Published snapshots.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/rdma/rdma_handshake.hpp"
#include "backends/rdma/rdma_rx_flow.hpp"
#include "backends/rdma/verbs.hpp"
#include "backends/redial.hpp"
#include "config/config.hpp"
#include "dataplane/nic_stats.hpp"
#include "dataplane/tx_bindings.hpp"
#include "dataplane/tx_queue_task.hpp"

namespace daqiri::backends::rdma {

// A fixed-capacity FIFO: the work requests a queue pair has outstanding complete in the order
// they were posted, so a FIFO per queue is the whole ledger.
template <typename T, uint32_t N>
class Fifo {
 public:
  [[nodiscard]] uint32_t size() const { return count_; }
  [[nodiscard]] bool full() const { return count_ == N; }
  void push(const T& v) { items_[(head_ + count_++) % N] = v; }
  T pop() {
    T v = items_[head_];
    head_ = (head_ + 1) % N;
    --count_;
    return v;
  }

 private:
  std::array<T, N> items_{};
  uint32_t head_ = 0;
  uint32_t count_ = 0;
};

class RdmaInterface final : public dataplane::TxQueueTask {
 public:
  static constexpr size_t kMaxConnections = 16;
  static constexpr uint32_t kRecvDepth = 128;  // RECVs kept posted per connection
  static constexpr uint32_t kSendDepth = 128;  // work requests in flight per connection

  // `ipv4`: the interface's address, host byte order.
  static Result<std::unique_ptr<RdmaInterface>> create(const config::InterfaceConfig& itf,
                                                       uint32_t ipv4, uint32_t batch);
  ~RdmaInterface() override;
  RdmaInterface(const RdmaInterface&) = delete;
  RdmaInterface& operator=(const RdmaInterface&) = delete;

  bool poll() override;
  // NEED_WAKEUP on its attachments' TX rings while the poller sleeps (their clients kick).
  bool arm_wakeups() override;
  void disarm_wakeups() override;
  // Timed wake-ups only for what no fd announces: clients' releases (RECVs to post again), a
  // TX client that does not kick, and completions while the CQ is not armed; a client flow's
  // next dial is due at a time of its own. Completions, CM and device events make its fds
  // readable.
  [[nodiscard]] bool needs_timed_wakeup() const override;
  [[nodiscard]] uint64_t wakeup_due_ns() const override;
  // What wakes its parked poller: CM events, completions, device events.
  [[nodiscard]] std::vector<int> fds() const;

  // ---- control side (callers serialise); `epoch` is the interface poller's ----
  [[nodiscard]] dataplane::TxRules rules() const override { return {1, true}; }
  Result<> add(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) override;
  dataplane::Grace remove(dataplane::TxAttachment* a, const dataplane::Epoch& epoch) override;
  // A flow's pool (and remote window, when `region` allows remote access), registered with
  // the device; its connections open from the next poll on. INVALID_ARGUMENT for a flow the
  // interface's mode does not take (core::check_rdma_flow). `device`: the pool lives in that
  // GPU memory, registered through its dma-buf (GPUDirect RDMA).
  Result<std::unique_ptr<RdmaRxFlow>> add_flow(const core::Flow& flow,
                                               const config::MemoryRegionConfig& region,
                                               memory::PageArena* arena,
                                               const dataplane::Epoch& epoch,
                                               const memory::DeviceMemory* device = nullptr);
  // Removal in two steps, so that the caller bounds the wait between them: close_flow asks
  // the poller to close the flow's connections (every buffer they held comes back) and let go
  // of it (`flow->released`); once it has, remove_closed_flow forgets it, and its Grace says
  // when the flow may be freed. Until then the flow stays published and alive.
  void close_flow(RdmaRxFlow* flow, const dataplane::Epoch& epoch);
  dataplane::Grace remove_closed_flow(RdmaRxFlow* flow, const dataplane::Epoch& epoch);
  [[nodiscard]] dataplane::NicStats stats() const;
  // "N connections" (established now).
  [[nodiscard]] std::string state() const;

 private:
  struct FlowRecord {
    RdmaRxFlow* flow = nullptr;
    MemoryRegistration pool_mr;
    MemoryRegistration window_mr;
    Handshake ours;
    // Poller side, client flows: when to dial again.
    RedialBackoff redial;
    uint32_t posted = 0;  // RECVs posted from its pool, all connections
  };
  struct TxRecord {
    dataplane::TxAttachment* a = nullptr;
    MemoryRegistration mr;
    uint32_t in_flight = 0;  // poller side: work requests not yet completed
  };
  struct InFlight {
    TxRecord* tx = nullptr;
    daqiri_tx_desc desc{};
  };
  enum class State : uint8_t { kFree, kResolving, kConnecting, kEstablished };
  struct Connection {
    State state = State::kFree;
    CmId id;
    FlowRecord* flow = nullptr;  // where its messages go
    uint16_t stream = 0;
    uint32_t generation = 0;  // bumped at teardown: completions of an older one are stale
    bool failed = false;      // a completion error: tear down after this poll
    std::optional<Handshake> peer;
    Fifo<uint32_t, kRecvDepth> recvs;
    Fifo<InFlight, kSendDepth> sends;
  };
  struct Counters {
    std::atomic<uint64_t> messages{0}, message_bytes{0};     // RECV and WRITE_IMM delivered
    std::atomic<uint64_t> completed{0}, completed_bytes{0};  // TX work done
    std::atomic<uint64_t> opened{0}, closed{0}, connect_failures{0}, rejected{0};
    std::atomic<uint64_t> completion_errors{0}, remote_access_errors{0};
    std::atomic<uint64_t> qp_errors{0}, cq_errors{0}, device_events{0};
    std::atomic<uint64_t> tx_refused{0};       // no such connection, window or slot
    std::atomic<uint64_t> window_overruns{0};  // WRITE_IMM into a slot clients still hold
    std::atomic<uint64_t> bad_immediates{0};   // WRITE_IMM naming no slot, or too long
    std::atomic<uint32_t> established{0};
  };
  using Flows = std::vector<FlowRecord*>;
  // For the wake-up helpers of dataplane/tx_attachment.hpp.
  static dataplane::TxAttachment& attachment_of(const TxRecord* t) { return *t->a; }

  RdmaInterface(const config::InterfaceConfig& itf, uint32_t batch);
  // A CM id of the interface's transport bound to its address and `port` (0: any), on its
  // event channel; nullopt with errno set.
  std::optional<CmId> bound_id(uint16_t port, void* context);
  void handle_cm_events(uint64_t now_ns);
  void handle_device_events();
  void on_connect_request(rdma_cm_id* id, const std::optional<Handshake>& peer);
  void dial(FlowRecord& f, uint64_t now_ns);
  bool open_queue_pair(Connection& c);
  bool poll_completions();
  // A buffer of the flow's pool or remote window to the flow's clients.
  void deliver(Connection& c, memory::BufferPool& pool, uint32_t buffer, uint32_t length,
               uint16_t flags, uint64_t now_ns);
  // A peer's WRITE with immediate into window slot `slot`, checked first.
  void deliver_window(Connection& c, uint32_t slot, uint32_t length, uint64_t now_ns);
  bool drain_tx();
  void post(TxRecord& t, const daqiri_tx_desc& d);
  void refuse(TxRecord& t, const daqiri_tx_desc& d);
  void post_receives(Connection& c);
  void teardown(Connection& c, uint64_t now_ns);
  Connection* find_stream(uint16_t stream);
  int free_slot() const;
  [[nodiscard]] bool has_connection(const FlowRecord& f) const;
  uint16_t next_stream();

  std::string name_;
  config::RdmaConfig::Mode mode_;
  ibv_qp_type qp_type_;   // RC, or UC: no READ, no receiver-not-ready flow control
  uint32_t address_ = 0;  // host byte order
  uint16_t port_ = 0;
  uint32_t batch_;
  uint8_t rd_atomic_ = 0;     // READs in flight per queue pair, both ways
  uint32_t max_message_ = 0;  // the port's longest message (Soft-RoCE 8 MiB, ConnectX 1 GiB)
  std::string device_;

  EventChannel channel_;
  CmId bound_;  // bound to the interface address (a server listens on it): holds the device
  ProtectionDomain pd_;
  CompletionChannel completions_;
  CompletionQueue cq_;
  ibv_context* context_ = nullptr;

  // Control side: what the snapshots point to.
  std::map<const RdmaRxFlow*, std::unique_ptr<FlowRecord>> flow_records_;
  dataplane::Published<Flows> flows_;
  dataplane::TxBindings<TxRecord> tx_;

  // Poller side.
  std::array<Connection, kMaxConnections> conns_{};
  uint16_t next_stream_ = 1;
  bool armed_ = false;  // completion notification requested: the channel fd will wake us
  uint32_t idle_ = 0;
  uint64_t tick_ = 0;
  std::array<daqiri_tx_desc, 256> descs_{};
  std::array<uint32_t, kRecvDepth> bufs_{};

  Counters counters_;
};

}  // namespace daqiri::backends::rdma
