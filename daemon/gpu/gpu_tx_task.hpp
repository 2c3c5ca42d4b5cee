// The GPU engine for one GPU TX attachment. Its client writes frames into GPU buffers the
// daemon made (or, with header-data split, payloads there and headers into host buffers) and
// submits them on an ordinary TX ring. Per burst the task copies each frame's GPU bytes with the
// copy engines into the same-numbered buffer of a daemon-internal TX attachment and its header
// there on the CPU; once the copy completed it submits the frames on that attachment, which the
// queue's TX poller sends like any client's (tx_policy, pacing, send times, the backend).
// Completions there go back to the client as they come. The client never maps the internal
// buffers: what the policy checks is what goes out. Runs on its GPU's poller.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "daqiri/ring.hpp"
#include "dataplane/tx_attachment.hpp"
#include "gpu/copy_streams.hpp"
#include "gpu/gpu_device.hpp"
#include "gpu/gpu_engine.hpp"
#include "gpu/host_registration.hpp"

namespace daqiri::gpu {

class GpuTxTask final : public GpuRing {
 public:
  // `client`'s buffers, host and GPU (TxAttachment::send_from_gpu), pair with `internal`'s one
  // to one; `internal` must outlive the task, and its buffers hold a whole frame each.
  static Result<std::unique_ptr<GpuTxTask>> create(const GpuDevice& gpu,
                                                   std::unique_ptr<dataplane::TxAttachment> client,
                                                   dataplane::TxAttachment& internal);
  ~GpuTxTask() override;
  GpuTxTask(const GpuTxTask&) = delete;
  GpuTxTask& operator=(const GpuTxTask&) = delete;

  bool poll() override;
  [[nodiscard]] bool busy_poll() const override { return spin_ || inflight_ != 0; }
  // NEED_WAKEUP on the client's TX ring (it kicks) and on the internal completion ring (its
  // eventfd, wake_fd(), is written then).
  bool arm_wakeups() override;
  void disarm_wakeups() override;
  // A client that does not kick is served on the poller's timer.
  [[nodiscard]] bool needs_timed_wakeup() const override { return !client_->client_kicks(); }
  void spin_while_attached() { spin_ = true; }

  // ---- control side ----
  [[nodiscard]] int gpu() const override { return gpu_.ordinal(); }
  [[nodiscard]] int wake_fd() const override { return internal_.eventfd(); }
  [[nodiscard]] int kick_fd() const override { return client_->kick_fd(); }
  [[nodiscard]] const abi::RingView& control_ring() const override { return client_->tx_ring(); }
  // No copy in flight (or its stream failed); the first time, the client's rings say DETACHED.
  [[nodiscard]] bool quiesced() override;
  [[nodiscard]] Result<dataplane::AttachmentShare> share(uint64_t id) const override;
  [[nodiscard]] Result<std::string> ipc_handle() const override;

 private:
  // Frames per copy launch, and launches in flight: a launch costs an event and a few copies
  // on the copy engines whatever its size, so under load bursts grow to what was submitted.
  static constexpr uint32_t kMaxLaunch = 1024;
  static constexpr uint32_t kMaxInflight = 8;
  static constexpr uint32_t kStreams = 2;
  struct Inflight {      // its event: streams_.event(its slot)
    uint32_t count = 0;  // descriptors from descs_[slot * kMaxLaunch]
    uint64_t bytes = 0;
    uint64_t launched_ns = 0;
  };

  GpuTxTask(const GpuDevice& gpu, std::unique_ptr<dataplane::TxAttachment> client,
            dataplane::TxAttachment& internal, HostRegistration pinned);
  // Internal completions back to the client.
  bool complete();
  // Completed copies, oldest first, submitted on the internal attachment.
  bool retire();
  // Client descriptors, validated, into copies.
  bool launch();
  // Enqueues the copies of descriptors [0, n) of `descs` (headers already in place).
  cudaError_t enqueue_copies(const daqiri_tx_desc* descs, uint32_t n, cudaStream_t stream);
  void fail_attachment(const char* call, cudaError_t error);

  const GpuDevice& gpu_;
  std::unique_ptr<dataplane::TxAttachment> client_;
  dataplane::TxAttachment& internal_;
  abi::RingView internal_tx_;
  abi::RingView internal_completion_;
  const dataplane::GpuTxBuffers& payloads_;  // client_'s
  const daqiri_gpu_ring_info& info_;
  HostRegistration pinned_;  // internal_'s buffers, for the copy engines to write into
  uint32_t frame_size_ = 0;  // internal_'s buffers
  bool spin_ = false;

  std::array<Inflight, kMaxInflight> inflight_ring_{};
  std::vector<daqiri_tx_desc> descs_;      // kMaxInflight * kMaxLaunch: taken, being copied
  std::vector<daqiri_tx_desc> completed_;  // kMaxLaunch: a run of completions for the client
  uint32_t head_ = 0;                      // oldest copy in flight
  uint32_t inflight_ = 0;
  uint32_t submitted_ = 0;   // internal TX ring: producer index
  uint32_t queued_ = 0;      // submitted_ plus the frames whose copies are in flight
  uint32_t taken_back_ = 0;  // internal completion ring: consumer index
  bool failed_ = false;
  bool detached_ = false;
  // Last: destroyed first, once every copy into internal_'s buffers is done.
  CopyStreams<kStreams, kMaxInflight> streams_;
};

}  // namespace daqiri::gpu
