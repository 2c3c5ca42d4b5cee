// The GPU copy engine for one GPU RX attachment. It is the consumer of a daemon-internal RX
// attachment on the flow (so fan-out, backpressure and the buffer ledger are the ones every
// client gets) and the producer of the client's GPU ring: per burst it writes the descriptors
// on the CPU (payload offsets included), copies the frames and the descriptors with the GPU's
// copy engines only (copy_plan.hpp: no kernel of ours time-slices against a client's), then
// cuStreamWriteValue32 rings the doorbell on the same stream, then an event; when the event
// completes the source buffers go back to the pool and the host mirror of the producer index
// advances (waking a sleeping client). Runs on its GPU's poller.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "config/config.hpp"
#include "daqiri/ring.hpp"
#include "dataplane/poller.hpp"
#include "dataplane/rx_attachment.hpp"
#include "gpu/copy_plan.hpp"
#include "gpu/copy_streams.hpp"
#include "gpu/device_ring.hpp"
#include "gpu/gpu_device.hpp"
#include "gpu/gpu_engine.hpp"
#include "memory/shared_memory.hpp"

namespace daqiri::gpu {

class GpuRxTask final : public GpuRing {
 public:
  // `source` is the internal attachment it drains; `pool_device_addresses[r]` is where region r
  // of `source` is mapped for the GPU. Both must outlive the task.
  static Result<std::unique_ptr<GpuRxTask>> create(const GpuDevice& gpu,
                                                   dataplane::RxAttachment& source,
                                                   std::vector<uint64_t> pool_device_addresses,
                                                   uint32_t slots, uint32_t slot_size,
                                                   uint32_t header_size = 0, bool cuda_ipc = false);
  ~GpuRxTask() override;
  GpuRxTask(const GpuRxTask&) = delete;
  GpuRxTask& operator=(const GpuRxTask&) = delete;

  bool poll() override;
  [[nodiscard]] bool busy_poll() const override { return spin_ || inflight_ != 0 || backlog_; }
  // Asleep on the source's eventfd (nothing to copy, nothing in flight: the RX poller writes it
  // when frames come), it needs no timer; otherwise it may wait for its client to make room,
  // which only polls see.
  [[nodiscard]] bool needs_timed_wakeup() const override { return !sleeping_; }
  // Before it is polled: keep its poller spinning for as long as it is attached (the queue's
  // busy_poll), instead of sleeping on the source's eventfd when idle.
  void spin_while_attached() { spin_ = true; }

  // ---- control side ----
  [[nodiscard]] int gpu() const override { return gpu_.ordinal(); }
  [[nodiscard]] int wake_fd() const override { return source_.eventfd(); }
  [[nodiscard]] memory::SharedMemory& control() { return control_; }
  // Header-data split: the header slots clients map read-only; nullptr without.
  [[nodiscard]] const memory::SharedMemory* headers() const {
    return headers_ ? &*headers_ : nullptr;
  }
  [[nodiscard]] const DeviceRing& ring() const { return ring_; }
  [[nodiscard]] const abi::RingView& control_ring() const override { return control_ring_; }
  // Its streams idle or failed; a stream that does not answer must not hold up a control call.
  [[nodiscard]] bool quiesced() override;
  [[nodiscard]] Result<dataplane::AttachmentShare> share(uint64_t id) const override;
  [[nodiscard]] Result<std::string> ipc_handle() const override;

 private:
  // Frames per launch: what has arrived, up to launch_frames_, a quarter of the smaller ring
  // (so that a launch's worth gathers while others are in flight) from kMinLaunch to
  // kMaxLaunch. Each launch costs a descriptor copy, a doorbell and an event on the copy
  // engines whatever its size: 8000-byte frames from adjacent buffers on an H200 reach 0.93x
  // of one bulk copy in launches of 1024, 0.95x of 2048, 0.96x of 4096.
  static constexpr uint32_t kMinLaunch = 256;
  static constexpr uint32_t kMaxLaunch = 4096;
  static constexpr uint32_t kMaxInflight = 8;
  // With this many launches in flight, the next waits until it has launch_frames_ frames (or
  // one of them retires): a whole launch's worth (1024-byte frames at bursts of 256 on an
  // H200: 25-27 Mpps, against 23-24 waiting for 128), while the wait never outlasts the copies
  // in flight.
  static constexpr uint32_t kBatchWhenInflight = 2;
  // Bursts alternate between streams, so that one burst's copies start while the previous
  // one's are still moving (the copy engines then never wait for the host to queue the next);
  // each doorbell still waits for the one before it.
  static constexpr uint32_t kStreams = 2;
  // Per burst in flight: where frames that go in no direct copy are packed first (at least a
  // slot).
  static constexpr uint64_t kStagingBytes = uint64_t{512} * 1024;
  struct Inflight {           // its event: streams_.event(its slot)
    uint32_t source_end = 0;  // source consumer index once this copy is done
    uint32_t ring_end = 0;    // GPU ring producer index once this copy is done
    uint32_t packets = 0;
    uint64_t bytes = 0;
    uint64_t launched_ns = 0;
  };

  GpuRxTask(const GpuDevice& gpu, dataplane::RxAttachment& source,
            std::vector<uint64_t> pool_device_addresses, DeviceRing ring,
            memory::SharedMemory control, abi::RingView control_ring, UniqueFd client_eventfd);
  Result<> init_cuda();
  bool retire();
  bool launch();
  // Frame i of the burst: its descriptor into `desc` (header split and payload offset done on
  // the CPU) and what its GPU slot gets into frames_[i].
  void prepare(uint32_t i, daqiri_rx_desc& desc);
  // Enqueues the plan's copies of the frames.
  cudaError_t enqueue_frames(const CopyPlan& plan, uint32_t slot_in_flight, cudaStream_t stream);
  // Enqueues the `n` descriptors' copy (in two pieces when the burst wraps the ring).
  cudaError_t enqueue_descriptors(const daqiri_rx_desc* descs, uint32_t n, cudaStream_t stream);
  // The client broke the ring protocol.
  void fail_attachment();
  // A call of the engine's own failed: the session server logs it when it cuts the client off.
  void fail_attachment(const char* call, cudaError_t error);
  void fail_attachment(const char* call, CUresult error);

  const GpuDevice& gpu_;
  dataplane::RxAttachment& source_;
  abi::RingView source_ring_;
  std::vector<uint64_t> pool_device_;
  std::vector<uint64_t> pool_bytes_;
  bool spin_ = false;
  std::vector<bool> pool_on_device_;  // gpudirect pools: no header is read there by the CPU
  DeviceRing ring_;
  memory::SharedMemory control_;
  std::optional<memory::SharedMemory>
      headers_;  // header-data split: ring().info().header_size each
  abi::RingView control_ring_;
  UniqueFd client_eventfd_;

  CopyStreams<kStreams, kMaxInflight> streams_;
  uint32_t launch_frames_ = kMinLaunch;
  daqiri_rx_desc* descs_ = nullptr;  // pinned: kMaxInflight * launch_frames_ descriptors
  std::byte* staging_ = nullptr;     // pinned: kMaxInflight * staging_bytes_
  uint64_t staging_bytes_ = 0;
  std::vector<FrameSource> frames_;  // launch_frames_ each
  std::vector<CopyOp> ops_;
  std::array<Inflight, kMaxInflight> inflight_ring_{};
  uint32_t head_ = 0;      // oldest copy in flight
  uint32_t inflight_ = 0;  // copies in flight
  uint32_t read_ = 0;      // next source descriptor to copy
  uint32_t produced_ = 0;  // GPU ring producer index (doorbell) as launched
  uint32_t released_ = 0;  // client consumer index, validated
  bool backlog_ = false;   // source descriptors waiting for GPU ring room
  bool sleeping_ = false;  // NEED_WAKEUP set on the source ring
  bool failed_ = false;
  bool detached_ = false;  // control side: quiesced() said so to the client
};

}  // namespace daqiri::gpu
